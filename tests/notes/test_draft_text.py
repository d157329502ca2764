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
