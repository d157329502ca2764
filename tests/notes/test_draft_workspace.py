"""The confirmation gate, drafting, the 280 rule and submission."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from evidence.models import Snippet
from notes.models import DraftJob, Note
from tests.notes.factories import make_failed_snippet, make_job, make_post, make_ready_snippet

pytestmark = pytest.mark.django_db

PASSAGE = "Controlled trials found that vitamin C supplements do not prevent the flu in the general population."


@pytest.fixture
def job(contributor: Any) -> DraftJob:
    return make_job(contributor)


def _review(client: Any, snippet: Snippet, action: str) -> Any:
    return client.post(f"/snippets/{snippet.pk}/{action}/")


def test_it_shows_each_snippet_with_highlighted_words_and_the_failure_reason(contributor_client: Any, job: Any) -> None:
    make_ready_snippet(job, "https://www.cdc.gov/flu", "Bleach is poisonous and does not cure COVID-19 infections.")
    make_failed_snippet(job, "https://gone.example.org/page")
    html = contributor_client.get(f"/drafts/{job.pk}/").content.decode()
    assert "<mark>Bleach</mark> is poisonous" in html or "<mark>bleach</mark>" in html.lower()
    assert "The site answered with an error instead of the page." in html
    assert "Retry" in html
    assert "Review every snippet first" in html
    assert 'id="request-draft"' not in html


def test_it_requires_every_snippet_reviewed_and_one_confirmed(contributor_client: Any, job: Any) -> None:
    first = make_ready_snippet(job, "https://a.example/1", PASSAGE)
    second = make_ready_snippet(job, "https://a.example/2", "Unrelated text about gardening and roses.")
    response = contributor_client.post(f"/drafts/{job.pk}/draft/", follow=True)
    assert "Review every snippet first: 2" in response.content.decode()
    _review(contributor_client, second, "reject")
    response = contributor_client.post(f"/drafts/{job.pk}/draft/", follow=True)
    assert "Confirm at least one snippet" in response.content.decode()
    job.refresh_from_db()
    assert job.state == DraftJob.State.COLLECTING
    _review(contributor_client, first, "confirm")
    first.refresh_from_db()
    assert first.confirmation == Snippet.Confirmation.CONFIRMED
    assert first.confirmed_by is not None and first.confirmed_by.username == "carla"
    assert first.confirmed_at is not None
    assert 'id="request-draft"' in contributor_client.get(f"/drafts/{job.pk}/").content.decode()


def test_it_invalidates_a_confirmation_when_the_passage_changes(contributor_client: Any, job: Any) -> None:
    from notes.selectors import draft_gate

    snippet = make_ready_snippet(job, "https://a.example/1", PASSAGE)
    _review(contributor_client, snippet, "confirm")
    assert draft_gate(job=job).can_draft
    assert snippet.passage is not None
    snippet.passage.text = "A different passage now."
    snippet.passage.save()
    gate = draft_gate(job=job)
    assert not gate.can_draft
    assert gate.pending_review == [snippet]


def test_it_blocks_drafting_while_sources_are_processing(contributor_client: Any, job: Any) -> None:
    snippet = make_ready_snippet(job, "https://a.example/1", PASSAGE)
    _review(contributor_client, snippet, "confirm")
    Snippet.objects.create(post=job.post, draft_job=job, url="https://slow.example/", state=Snippet.State.FETCHING)
    html = contributor_client.get(f"/drafts/{job.pk}/").content.decode()
    assert "still being processed" in html
    assert 'hx-trigger="every 1s"' in html  # live progress while a source is in flight
    assert '<meta http-equiv="refresh"' in html  # and a refresh without JavaScript


def test_it_lets_only_the_owner_see_a_draft(job: Any, make_user: Any) -> None:
    from notes.roles import CONTRIBUTOR
    from tests.conftest import CsrfClient

    other = CsrfClient()
    other.force_login(make_user("other", CONTRIBUTOR))
    assert other.get(f"/drafts/{job.pk}/").status_code == 404


def test_it_blocks_a_note_over_280_characters_and_keeps_the_text(contributor_client: Any, job: Any) -> None:
    snippet = make_ready_snippet(job, "https://a.example/1", PASSAGE)
    _review(contributor_client, snippet, "confirm")
    too_long = "x" * 280  # + 1 for the appended URL = 281
    response = contributor_client.post(f"/drafts/{job.pk}/submit/", {"text": too_long})
    # Post/redirect/get: the refusal comes back on the draft page, whose editor keeps the text.
    assert response.status_code == 302 and response["Location"] == f"/drafts/{job.pk}/#editor"
    html = contributor_client.get(response["Location"]).content.decode()
    assert "1 character over the 280 limit: the note counts 281" in html
    assert too_long in html
    assert not Note.objects.exists()


def test_it_submits_the_note_with_evidence_confirmations_and_draft(contributor_client: Any, job: Any) -> None:
    kept = make_ready_snippet(job, "https://a.example/1", PASSAGE)
    dropped = make_ready_snippet(job, "https://a.example/2", "Roses need sun.")
    _review(contributor_client, kept, "confirm")
    _review(contributor_client, dropped, "reject")
    DraftJob.objects.filter(pk=job.pk).update(state=DraftJob.State.DRAFTED, draft_text="Machine draft.")
    response = contributor_client.post(
        f"/drafts/{job.pk}/submit/", {"text": "Trials show vitamin C does not prevent flu."}
    )
    note = Note.objects.get()
    assert response.status_code == 302
    assert response["Location"] == f"/me/notes/{note.pk}/"
    # The contributor rewrote the machine draft completely: the text is theirs.
    assert note.draft_survival == 0.0
    assert note.origin == Note.Origin.HUMAN
    assert note.evidence_urls == ["https://a.example/1"]
    assert note.draft_text == "Machine draft."
    assert note.author is not None and note.author.user is not None
    assert note.author.user.username == "carla"
    assert list(note.snippets.all()) == [kept]
    assert note.status_changes.count() == 1
    assert note.judge_runs.get().state == "queued"  # judged in the background, never auto-published
    job.refresh_from_db()
    assert job.state == DraftJob.State.SUBMITTED
    again = contributor_client.post(f"/drafts/{job.pk}/submit/", {"text": "Again"}, follow=True)
    html = again.content.decode()
    assert "already submitted" in html and f'href="/me/notes/{note.pk}/"' in html
    assert '<textarea readonly rows="4" id="unsent-note-text">Again</textarea>' in html
    assert Note.objects.count() == 1


def test_it_marks_a_note_written_without_a_draft_as_human(contributor_client: Any, job: Any) -> None:
    snippet = make_ready_snippet(job, "https://a.example/1", PASSAGE)
    _review(contributor_client, snippet, "confirm")
    contributor_client.post(f"/drafts/{job.pk}/submit/", {"text": "My own words about vitamin C trials."})
    assert Note.objects.get().origin == Note.Origin.HUMAN


def test_it_lists_drafts_and_notes_on_my_notes(contributor_client: Any, job: Any) -> None:
    snippet = make_ready_snippet(job, "https://a.example/1", PASSAGE)
    _review(contributor_client, snippet, "confirm")
    other_job = make_job(job.contributor)
    contributor_client.post(f"/drafts/{job.pk}/submit/", {"text": "Trials show vitamin C does not prevent flu."})
    html = contributor_client.get("/me/notes/").content.decode()
    assert "Trials show vitamin C does not prevent flu." in html
    assert "Needs More Ratings" in html
    assert f"/drafts/{other_job.pk}/" in html


def test_it_shows_the_passage_in_context(contributor_client: Any, job: Any) -> None:
    snippet = make_ready_snippet(job, "https://a.example/1", PASSAGE)
    html = contributor_client.get(f"/snippets/{snippet.pk}/context/").content.decode()
    assert "Intro text." in html
    assert f'<mark id="passage">{PASSAGE}</mark>' in html


def test_the_card_quotes_the_highlighted_sentence_first_and_marks_it_in_the_passage(
    contributor_client: Any, job: Any
) -> None:
    text = "Older studies were small. Trials found <b>no</b> effect on flu & colds in adults. Doses varied."
    snippet = make_ready_snippet(job, "https://a.example/1", text)
    start = text.index("Trials")
    Snippet.objects.filter(pk=snippet.pk).update(sentence_start=start, sentence_end=text.index(" Doses"))
    html = contributor_client.get(f"/drafts/{job.pk}/").content.decode()
    sentence = "Trials found &lt;b&gt;no&lt;/b&gt; effect on flu &amp; colds in adults."  # escaped, never markup
    quote = html.index(f"<q>{sentence}</q>")
    box = html.index('<blockquote class="passage" data-sentence-box>')
    assert quote < box  # the card quotes the sentence before the passage (no JavaScript needed)
    assert f'<mark class="sentence" id="sentence-{snippet.pk}">{sentence}</mark>' in html[box:]
    assert "Older studies were small. " in html[box:]
    assert "js/evidence-sentence.js" in html
    context = contributor_client.get(f"/snippets/{snippet.pk}/context/").content.decode()
    assert f'<mark class="sentence" id="sentence">{sentence}</mark>' in context
    assert f"/snippets/{snippet.pk}/context/#sentence" in html


def test_a_snippet_without_a_sentence_shows_the_whole_passage(contributor_client: Any, job: Any) -> None:
    make_ready_snippet(job, "https://a.example/1", PASSAGE)
    html = contributor_client.get(f"/drafts/{job.pk}/").content.decode()
    assert "data-sentence-box" not in html and 'class="sentence"' not in html
    assert "closest to the post" not in html


def test_it_shows_the_judges_preflight_verdicts_without_submitting(
    contributor_client: Any, job: Any, llm_server: Any
) -> None:
    snippet = make_ready_snippet(job, "https://a.example/1", PASSAGE)
    _review(contributor_client, snippet, "confirm")
    llm_server.script(
        "The trial passage is on topic.\nFinal decision: yes",
        "Nothing is distorted.\nFinal decision: **Yes**.",
        "It misses the dosage question.\nFinal decision: no",
    )
    text = "Trials show vitamin C does not prevent flu."
    response = contributor_client.post(f"/drafts/{job.pk}/preflight/", {"text": text})
    from judging.models import PreflightCheck
    from judging.services import preflight_check_run

    check = PreflightCheck.objects.get(draft_job=job)
    # Post/redirect/get: a reload of the result never queues the judges again.
    assert response.status_code == 302
    assert response["Location"] == f"/drafts/{job.pk}/?check={check.pk}#preflight-result"
    page = contributor_client.get(response["Location"]).content.decode()
    assert "Queued:" in page
    assert text in page  # the editor keeps the text
    assert llm_server.requests == []  # no LLM call inside the request: a worker runs the judges
    preflight_check_run(check_id=check.pk)
    response = contributor_client.get(f"/judging/preflight/{check.pk}/", headers={"HX-Request": "true"})
    html = response.content.decode()
    assert response.status_code == 200
    verdicts = re.findall(r"<h2>(\w+): <span class=\"verdict-\w+\">(\w+)</span></h2>", html)
    assert verdicts == [("Relevance", "yes"), ("Correctness", "yes"), ("Helpfulness", "no")]
    assert "It misses the dosage question." in html
    assert "the LLM scripted-model" in html
    assert "stopped at helpfulness" in html
    assert not Note.objects.exists()
    assert len(llm_server.requests) == 3
    assert all(r["temperature"] == 0 for r in llm_server.requests)


def _replace_passage(snippet: Snippet, text: str) -> None:
    """What the refine task does when it finds a closer passage for an unreviewed snippet."""
    from evidence.models import Passage

    assert snippet.source is not None
    closer = Passage.objects.create(
        source=snippet.source, embedding_model="test", chunk_index=1, text=text, char_start=0, char_end=len(text)
    )
    Snippet.objects.filter(pk=snippet.pk).update(passage=closer, similarity=0.9)


def test_it_refuses_to_confirm_a_passage_replaced_while_the_contributor_read(contributor_client: Any, job: Any) -> None:
    snippet = make_ready_snippet(job, "https://a.example/1", PASSAGE)
    shown = snippet.passage_id
    _replace_passage(snippet, "Vitamin C shortens colds slightly in people under heavy physical stress.")
    response = contributor_client.post(f"/snippets/{snippet.pk}/confirm/", {"passage": shown}, follow=True)
    assert "A closer passage was found for this source" in response.content.decode()
    snippet.refresh_from_db()
    assert snippet.confirmation == Snippet.Confirmation.PENDING
    assert snippet.confirmed_by is None
    # The page now shows the new passage; confirming that one works.
    assert "heavy physical stress" in response.content.decode()
    contributor_client.post(f"/snippets/{snippet.pk}/confirm/", {"passage": snippet.passage_id})
    snippet.refresh_from_db()
    assert snippet.confirmation == Snippet.Confirmation.CONFIRMED


def test_it_shows_a_stale_review_error_inside_the_htmx_workspace(contributor_client: Any, job: Any) -> None:
    snippet = make_ready_snippet(job, "https://a.example/1", PASSAGE)
    shown = snippet.passage_id
    _replace_passage(snippet, "A closer passage about vitamin C and colds.")
    response = contributor_client.post(f"/snippets/{snippet.pk}/reject/", {"passage": shown}, HTTP_HX_REQUEST="true")
    html = response.content.decode()
    assert response.status_code == 200
    assert 'id="workspace"' in html and "<html" not in html
    assert 'role="alert">A closer passage was found' in html
    snippet.refresh_from_db()
    assert snippet.confirmation == Snippet.Confirmation.PENDING


def test_the_review_forms_carry_the_passage_shown(contributor_client: Any, job: Any) -> None:
    snippet = make_ready_snippet(job, "https://a.example/1", PASSAGE)
    html = contributor_client.get(f"/drafts/{job.pk}/").content.decode()
    assert html.count(f'name="passage" value="{snippet.passage_id}"') == 2


def test_it_says_when_the_best_passage_may_still_change_and_keeps_polling(
    contributor_client: Any, job: Any, settings: Any
) -> None:
    settings.EVIDENCE_REFINE = True
    snippet = make_ready_snippet(job, "https://a.example/1", PASSAGE)
    # Queued an hour ago and not started (a lost message): still pending, the sweeper queues it again.
    an_hour_ago = timezone.now() - timedelta(hours=1)
    Snippet.objects.filter(pk=snippet.pk).update(
        scores=[0.61, None, 0.42, None, None], refine_pending=True, updated_at=an_hour_ago
    )
    html = contributor_client.get(f"/drafts/{job.pk}/").content.decode()
    assert "Best of 2 of 5 passages so far" in html
    assert 'hx-trigger="every 3s"' in html  # slower than while fetching: the contributor is reading
    # Once reviewed, the passage can no longer change: no notice, no polling.
    contributor_client.post(f"/snippets/{snippet.pk}/confirm/", {"passage": snippet.passage_id})
    html = contributor_client.get(f"/drafts/{job.pk}/").content.decode()
    assert "passages so far" not in html
    assert 'hx-trigger="every' not in html  # no polling (the URL fields keep their own prefetch trigger)


def test_it_shows_no_refine_notice_once_the_refine_ended_or_when_none_was_queued(
    contributor_client: Any, job: Any, settings: Any
) -> None:
    snippet = make_ready_snippet(job, "https://a.example/1", PASSAGE)
    settings.EVIDENCE_REFINE = True
    Snippet.objects.filter(pk=snippet.pk).update(scores=[0.61, 0.2, 0.42])
    assert "passages so far" not in contributor_client.get(f"/drafts/{job.pk}/").content.decode()
    # Passages left unscored but no refine pending (it failed and gave up, or refine is off):
    # nothing is being compared any more, so the page says nothing of the kind.
    Snippet.objects.filter(pk=snippet.pk).update(scores=[0.61, None, 0.42], refine_pending=False)
    html = contributor_client.get(f"/drafts/{job.pk}/").content.decode()
    assert "passages so far" not in html
    assert 'hx-trigger="every' not in html  # no polling (the URL fields keep their own prefetch trigger)


def test_it_polls_while_sources_are_processed_and_slower_while_only_the_refine_runs(
    contributor_client: Any, job: Any
) -> None:
    from notes.selectors import draft_gate

    queued = Snippet.objects.create(post=job.post, draft_job=job, url="https://a.example/q")
    gate = draft_gate(job=job)
    assert (gate.poll_seconds, gate.refresh_seconds) == (1, 3)
    html = contributor_client.get(f"/drafts/{job.pk}/").content.decode()
    assert 'hx-trigger="every 1s"' in html and '<meta http-equiv="refresh" content="3">' in html
    queued.delete()
    refining = make_ready_snippet(job, "https://a.example/r", PASSAGE)
    Snippet.objects.filter(pk=refining.pk).update(scores=[0.5, None], refine_pending=True)
    gate = draft_gate(job=job)
    assert gate.refining == [refining] and (gate.poll_seconds, gate.refresh_seconds) == (3, None)
    html = contributor_client.get(f"/drafts/{job.pk}/").content.decode()
    assert 'hx-trigger="every 3s"' in html and "http-equiv" not in html
    _review(contributor_client, refining, "confirm")
    gate = draft_gate(job=job)
    assert (gate.poll_seconds, gate.refresh_seconds) == (None, None)
    assert gate.urls == ["https://a.example/r"]
    assert 'hx-trigger="every' not in contributor_client.get(f"/drafts/{job.pk}/").content.decode()


def test_it_gives_the_note_editor_its_limit_and_url_rule_from_the_text_rules(contributor_client: Any, job: Any) -> None:
    from crowdnotes_site.lib.text_rules import NOTE_MAX_CHARS, URL_RE

    snippet = make_ready_snippet(job, "https://a.example/1", PASSAGE)
    _review(contributor_client, snippet, "confirm")
    html = contributor_client.get(f"/drafts/{job.pk}/").content.decode()
    assert f'data-limit="{NOTE_MAX_CHARS}"' in html and 'data-urls="1"' in html
    assert f"/ {NOTE_MAX_CHARS} characters" in html
    assert "data-url-pattern" in html and URL_RE.pattern.split("[")[0].replace("\\", "") in html.replace("\\", "")


def test_it_names_the_producer_of_the_draft(contributor_client: Any, job: Any) -> None:
    from crowdnotes_site.lib.llm.steps.common import Producer

    DraftJob.objects.filter(pk=job.pk).update(
        state=DraftJob.State.DRAFTED, draft_text="A draft.", draft_method="llm:gpt-4.1-mini"
    )
    job.refresh_from_db()
    assert job.draft_producer == Producer("llm", "gpt-4.1-mini")
    assert "the LLM gpt-4.1-mini" in contributor_client.get(f"/drafts/{job.pk}/").content.decode()
    DraftJob.objects.filter(pk=job.pk).update(draft_method="baseline:extractive-lexical-v2")
    html = contributor_client.get(f"/drafts/{job.pk}/").content.decode()
    assert "the offline baseline (baseline:extractive-lexical-v2), not an LLM" in html


@pytest.mark.parametrize("word", ["quot", "amp", "x27"])
def test_it_highlights_without_breaking_escaped_characters(word: str) -> None:
    from notes.templatetags.crowdnotes import highlight

    html = str(highlight(f'He said "{word}" & it\'s <b>{word}</b>', f"{word} said"))
    assert html == (
        f"He <mark>said</mark> &quot;<mark>{word}</mark>&quot; &amp; it&#x27;s &lt;b&gt;<mark>{word}</mark>&lt;/b&gt;"
    )


def test_it_shows_the_passage_with_quotes_intact_when_the_post_says_quot(contributor: Any) -> None:
    from django.test import Client

    job = make_job(contributor, make_post('The "amp" and "quot" words: quot amp x27.'))
    make_ready_snippet(job, "https://www.cdc.gov/q", 'He said "stop" & it\'s done; quot amp x27.')
    client = Client()
    client.force_login(contributor)
    html = client.get(f"/drafts/{job.pk}/").content.decode()
    assert "He said &quot;stop&quot; &amp; it&#x27;s done; <mark>quot</mark> <mark>amp</mark> <mark>x27</mark>." in html
    assert "&<mark>" not in html
