"""Nothing a contributor typed is lost: the editor's text is saved on the draft as it is edited
(htmx autosave, or "Save my text" without JavaScript), every way back shows it, and the losing
tab of a double submit keeps its text with a link to the note that was submitted."""

from __future__ import annotations

from typing import Any

import pytest

from notes.models import DraftJob, Note
from notes.services import _draft_claimed
from tests.notes.factories import make_job, make_ready_snippet

pytestmark = pytest.mark.django_db

PASSAGE = "Controlled trials found that vitamin C supplements do not prevent the flu in the general population."


@pytest.fixture
def job(contributor: Any) -> DraftJob:
    job = make_job(contributor)
    DraftJob.objects.filter(pk=job.pk).update(state=DraftJob.State.DRAFTED, draft_text="The machine's draft.")
    job.refresh_from_db()
    return job


def test_the_editor_autosaves_with_htmx_and_the_page_shows_the_saved_text(contributor_client: Any, job: Any) -> None:
    page = contributor_client.get(f"/drafts/{job.pk}/")
    html = page.content.decode()
    assert "The machine&#x27;s draft." in html or "The machine's draft." in html
    assert f'hx-post="/drafts/{job.pk}/text/"' in html and 'autocomplete="off"' in html
    assert page["Cache-Control"] == "no-store"  # the back button asks the server again
    saved = contributor_client.post(f"/drafts/{job.pk}/text/", {"text": "My edit, half written"},
                                    headers={"HX-Request": "true"})  # fmt: skip
    assert saved.status_code == 200 and "Your text is saved" in saved.content.decode()
    job.refresh_from_db()
    assert job.edited_text == "My edit, half written" and job.edited_at is not None
    again = contributor_client.get(f"/drafts/{job.pk}/").content.decode()
    assert "My edit, half written</textarea>" in again and "The machine" not in again.split('id="editor"')[1]


def test_save_my_text_works_without_javascript_and_comes_back_to_the_editor(contributor_client: Any, job: Any) -> None:
    response = contributor_client.post(f"/drafts/{job.pk}/text/", {"text": "Saved by the button"})
    assert response.status_code == 302 and response["Location"] == f"/drafts/{job.pk}/#editor"
    html = contributor_client.get(response["Location"]).content.decode()
    assert "Your text is saved." in html and "Saved by the button</textarea>" in html
    assert f'formaction="/drafts/{job.pk}/text/"' in html


def test_an_emptied_editor_stays_empty(contributor_client: Any, job: Any) -> None:
    contributor_client.post(f"/drafts/{job.pk}/text/", {"text": ""})
    html = contributor_client.get(f"/drafts/{job.pk}/").content.decode()
    assert "The machine" not in html.split('id="editor"')[1]


def test_a_text_too_long_to_keep_is_refused_with_a_reason(contributor_client: Any, job: Any) -> None:
    response = contributor_client.post(f"/drafts/{job.pk}/text/", {"text": "x" * 2001}, headers={"HX-Request": "true"})
    assert "Not saved:" in response.content.decode()
    job.refresh_from_db()
    assert job.edited_at is None


def test_only_the_owner_saves_text(make_user: Any, job: Any) -> None:
    from notes.roles import CONTRIBUTOR
    from tests.conftest import CsrfClient

    other = CsrfClient()
    other.force_login(make_user("other", CONTRIBUTOR))
    assert other.post(f"/drafts/{job.pk}/text/", {"text": "not mine"}).status_code == 404
    job.refresh_from_db()
    assert job.edited_at is None


def test_the_back_link_of_the_preflight_page_shows_the_checked_text(contributor_client: Any, job: Any) -> None:
    snippet = make_ready_snippet(job, "https://a.example/1", PASSAGE)
    contributor_client.post(f"/snippets/{snippet.pk}/confirm/")
    text = "Trials show vitamin C does not prevent flu."
    response = contributor_client.post(f"/drafts/{job.pk}/preflight/", {"text": text})
    assert response.status_code == 302
    from judging.models import PreflightCheck

    check = PreflightCheck.objects.get(draft_job=job)
    detail = contributor_client.get(f"/judging/preflight/{check.pk}/").content.decode()
    assert f'href="/drafts/{job.pk}/#editor">Back to your draft' in detail
    assert f"{text}</textarea>" in contributor_client.get(f"/drafts/{job.pk}/").content.decode()
    # Another user's pre-flight id in the address shows nothing of it.
    assert "preflight-result" not in contributor_client.get(f"/drafts/{job.pk}/?check={check.pk + 99}").content.decode()


def test_a_new_machine_draft_replaces_the_saved_text(contributor_client: Any, job: Any, settings: Any) -> None:
    settings.LLM_BASE_URL = ""
    snippet = make_ready_snippet(job, "https://a.example/1", PASSAGE)
    contributor_client.post(f"/snippets/{snippet.pk}/confirm/")
    contributor_client.post(f"/drafts/{job.pk}/text/", {"text": "Old edit"})
    DraftJob.objects.filter(pk=job.pk).update(state=DraftJob.State.DRAFTING)
    job.refresh_from_db()
    job = _draft_claimed(job)
    assert job.state == DraftJob.State.DRAFTED and job.edited_at is None and job.editor_text == job.draft_text


def test_the_losing_tab_of_a_double_submit_keeps_its_text_and_links_the_submitted_note(
    contributor_client: Any, job: Any
) -> None:
    snippet = make_ready_snippet(job, "https://a.example/1", PASSAGE)
    contributor_client.post(f"/snippets/{snippet.pk}/confirm/")
    first = contributor_client.post(f"/drafts/{job.pk}/submit/", {"text": "Text of tab one about vitamin C."})
    note = Note.objects.get()
    assert first["Location"] == f"/me/notes/{note.pk}/"
    second = contributor_client.post(f"/drafts/{job.pk}/submit/", {"text": "Text of tab two about vitamin C."})
    assert second.status_code == 302 and second["Location"] == f"/drafts/{job.pk}/#editor"
    html = contributor_client.get(second["Location"]).content.decode()
    assert f'<a href="/me/notes/{note.pk}/">see the submitted note</a>' in html
    assert "Text of tab two about vitamin C.</textarea>" in html
    assert Note.objects.count() == 1 and Note.objects.get().text == "Text of tab one about vitamin C."


def _seen(html: str) -> str:
    import re

    found = re.search(r'<input type="hidden" name="seen"[^>]*>', html)
    assert found is not None, "the page carries no version of the saved text"
    value = re.search(r'value="([^"]*)"', found.group(0))
    return value.group(1) if value else ""


def test_submit_is_disabled_with_its_reason_until_a_passage_is_confirmed(contributor_client: Any, job: Any) -> None:
    snippet = make_ready_snippet(job, "https://a.example/1", PASSAGE)
    html = contributor_client.get(f"/drafts/{job.pk}/").content.decode()
    button = html.split('id="submit-note"')[1].split(">")[0]
    assert "disabled" in button and 'aria-describedby="submit-why"' in button
    assert "Submit is off until the evidence is ready: Review every snippet first" in html
    # The server refuses it too (a form posted without the page, or with JavaScript removing the attribute).
    refused = contributor_client.post(f"/drafts/{job.pk}/submit/", {"text": "Trials show vitamin C does not help."})
    assert refused["Location"] == f"/drafts/{job.pk}/#editor" and not Note.objects.exists()
    # Confirming with htmx brings an enabled button along, out of band (the editor is outside the workspace).
    swapped = contributor_client.post(
        f"/snippets/{snippet.pk}/confirm/", {"passage": snippet.passage_id}, headers={"HX-Request": "true"}
    ).content.decode()
    gate = swapped.split('id="submit-gate" hx-swap-oob="true"')[1].split("</span>")[0]
    assert 'id="submit-note"' in gate and "disabled" not in gate
    html = contributor_client.get(f"/drafts/{job.pk}/").content.decode()
    assert "disabled" not in html.split('id="submit-note"')[1].split(">")[0] and "submit-why" not in html


def test_the_back_button_after_a_submit_says_which_note_the_draft_became(contributor_client: Any, job: Any) -> None:
    snippet = make_ready_snippet(job, "https://a.example/1", PASSAGE)
    contributor_client.post(f"/snippets/{snippet.pk}/confirm/")
    page = contributor_client.get(f"/drafts/{job.pk}/").content.decode()
    seen = _seen(page)
    # The autosave kept the text as typed (spaces and all); the note keeps it cleaned.
    typed = "Trials show  vitamin C does not prevent flu. "
    saved = contributor_client.post(
        f"/drafts/{job.pk}/text/", {"text": typed, "seen": seen}, headers={"HX-Request": "true"}
    )
    seen = _seen(saved.content.decode())
    sent = {"text": typed, "seen": seen}
    submitted = contributor_client.post(f"/drafts/{job.pk}/submit/", sent)
    note = Note.objects.get()
    assert submitted["Location"] == f"/me/notes/{note.pk}/"
    back = contributor_client.get(f"/drafts/{job.pk}/").content.decode()
    assert f"This draft was submitted as note {note.pk}." in back
    assert f'href="/me/notes/{note.pk}/" id="submitted-note"' in back
    assert "Another tab" not in back and "unsent-text" not in back
    # The browser sends the same form again (back, then Submit or a resent POST): told where its note is.
    again = contributor_client.post(f"/drafts/{job.pk}/submit/", sent, follow=True).content.decode()
    assert f'This draft was submitted as note {note.pk} (<a href="/me/notes/{note.pk}/">see it</a>).' in again
    assert "Not submitted" not in again and "unsent-text" not in again
    assert Note.objects.count() == 1


def test_a_save_that_lost_to_another_tab_says_so_in_that_tab_and_keeps_its_text(
    contributor_client: Any, job: Any
) -> None:
    page = contributor_client.get(f"/drafts/{job.pk}/").content.decode()
    tab_a = tab_b = _seen(page)  # two tabs opened on the same draft
    first = contributor_client.post(f"/drafts/{job.pk}/text/", {"text": "Text of tab A", "seen": tab_a},
                                    headers={"HX-Request": "true"})  # fmt: skip
    assert "Your text is saved" in first.content.decode()
    tab_a = _seen(first.content.decode())
    assert tab_a != tab_b
    # Tab B still has the version it loaded: its save is refused and says so, with A's text to see.
    lost = contributor_client.post(f"/drafts/{job.pk}/text/", {"text": "Text of tab B", "seen": tab_b},
                                   headers={"HX-Request": "true"}).content.decode()  # fmt: skip
    assert "Not saved: this draft&#x27;s text was changed in another tab" in lost or "Not saved: this draft's" in lost
    assert "Text of tab A" in lost and "Your text is saved" not in lost
    job.refresh_from_db()
    assert job.edited_text == "Text of tab A"
    # Without JavaScript ("Save my text"): the page comes back with B's text in the editor, A's beside it.
    page = contributor_client.post(f"/drafts/{job.pk}/text/", {"text": "Text of tab B", "seen": tab_b}).content.decode()
    assert "Text of tab B</textarea>" in page and 'id="other-tab-text">Text of tab A</textarea>' in page
    job.refresh_from_db()
    assert job.edited_text == "Text of tab A"
    # B, having been told, saves again from that page (it carries the version B was shown): B's text wins.
    retry = contributor_client.post(f"/drafts/{job.pk}/text/", {"text": "Text of tab B", "seen": _seen(page)})
    assert retry.status_code == 302
    job.refresh_from_db()
    assert job.edited_text == "Text of tab B"
    # And now it is A's next save that is refused, in A's tab.
    late = contributor_client.post(f"/drafts/{job.pk}/text/", {"text": "Text of tab A, longer", "seen": tab_a},
                                   headers={"HX-Request": "true"}).content.decode()  # fmt: skip
    assert "changed in another tab" in late and "Text of tab B" in late
    job.refresh_from_db()
    assert job.edited_text == "Text of tab B"


def test_a_submit_from_a_tab_that_lost_a_save_is_refused_with_its_text_kept(contributor_client: Any, job: Any) -> None:
    snippet = make_ready_snippet(job, "https://a.example/1", PASSAGE)
    contributor_client.post(f"/snippets/{snippet.pk}/confirm/")
    stale = _seen(contributor_client.get(f"/drafts/{job.pk}/").content.decode())
    contributor_client.post(f"/drafts/{job.pk}/text/", {"text": "The other tab's better text.", "seen": stale})
    page = contributor_client.post(
        f"/drafts/{job.pk}/submit/", {"text": "An old text.", "seen": stale}
    ).content.decode()
    assert not Note.objects.exists()
    assert "changed in another tab" in page and "An old text.</textarea>" in page
    assert "The other tab&#x27;s better text.</textarea>" in page or "The other tab's better text.</textarea>" in page


def test_a_source_being_processed_while_the_warmup_builds_the_table_says_what_it_waits_for(
    contributor_client: Any, job: Any, settings: Any, tmp_path: Any
) -> None:
    import json

    from evidence.embedding import BUILD_TIMINGS
    from evidence.matching import static_table_path, table_plan
    from evidence.models import Snippet

    settings.MODEL_CACHE_DIR = tmp_path
    Snippet.objects.create(post=job.post, draft_job=job, url="https://a.example/queued", state=Snippet.State.QUEUED)
    assert "table-wait" not in contributor_client.get(f"/drafts/{job.pk}/").content.decode()
    table_plan(settings.EMBEDDING_MODEL, tmp_path)
    html = contributor_client.get(f"/drafts/{job.pk}/").content.decode()
    assert "The warm-up is building the embedding table on this machine: its first slice is queued" in html
    assert "first build here: no measurement yet" in html
    assert "ranked by their words alone" in html
    name = static_table_path(settings.EMBEDDING_MODEL, tmp_path).name
    (tmp_path / BUILD_TIMINGS).write_text(json.dumps({name: 431.0}))
    assert "the last build here took 7.2 min" in contributor_client.get(f"/drafts/{job.pk}/").content.decode()
