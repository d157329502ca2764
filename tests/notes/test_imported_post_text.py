"""A post imported from public data without its text: nothing drafts, searches or judges from its
placeholder, and "Write a note" asks the contributor for the post's text first."""

from __future__ import annotations

from typing import Any

import pytest

from evidence import snippets
from evidence.search.services import AutomationError, automation_run_start
from notes import services
from notes.models import DraftJob, Post
from tests.notes.factories import make_job, make_post, make_ready_snippet

PASSAGE = "Controlled trials found that vitamin C supplements do not prevent the flu in the general population."
PLACEHOLDER = "Post 1353031711349739523 (imported from the public Community Notes data; text not included)"


def _imported_post() -> Post:
    return make_post(PLACEHOLDER, text_available=False, external_id="1353031711349739523",
                     source_url="https://x.com/i/status/1353031711349739523")  # fmt: skip


def _confirmed_job(user: Any, post: Post) -> DraftJob:
    job = make_job(user, post=post)
    snippet = make_ready_snippet(job, "https://a.example/trials", PASSAGE)
    snippets.snippet_review(snippet=snippet, user=user, confirmed=True)
    return job


def test_the_draft_gate_refuses_a_post_without_text_and_no_llm_request_is_sent(
    llm_server: Any, contributor_client: Any, contributor: Any
) -> None:
    llm_server.respond_with(lambda messages: "A draft.")
    job = _confirmed_job(contributor, _imported_post())
    html = contributor_client.get(f"/drafts/{job.pk}/").content.decode()
    assert "imported from public Community Notes data without its text" in html
    response = contributor_client.post(f"/drafts/{job.pk}/draft/", follow=True)
    assert "without its text" in response.content.decode()
    job.refresh_from_db()
    assert job.state != DraftJob.State.DRAFTING and job.draft_text == ""
    assert llm_server.requests == []


def test_a_queued_draft_on_a_placeholder_post_fails_in_the_worker_without_calling_the_llm(
    llm_server: Any, contributor: Any
) -> None:
    llm_server.respond_with(lambda messages: "A draft.")
    job = _confirmed_job(contributor, _imported_post())
    DraftJob.objects.filter(pk=job.pk).update(state=DraftJob.State.DRAFTING)  # queued before the rule
    job = services.draft_job_generate(job_id=job.pk)
    assert job.state == DraftJob.State.FAILED and "without its text" in job.error
    assert llm_server.requests == []


def test_find_evidence_never_searches_with_the_placeholder(contributor: Any) -> None:
    job = make_job(contributor, post=_imported_post())
    with pytest.raises(AutomationError, match="without its text"):
        automation_run_start(job=job)
    assert not job.automation_runs.exists()


def test_write_a_note_on_an_imported_post_asks_for_its_text_and_stores_it(
    contributor_client: Any, contributor: Any
) -> None:
    post = _imported_post()
    page = contributor_client.get(f"/contribute/?post={post.pk}").content.decode()
    assert 'id="imported-post-notice"' in page
    assert PLACEHOLDER not in page  # the form is not prefilled with the placeholder
    text = "Vitamin C megadoses stop the flu, doctors hide it."
    response = contributor_client.post(f"/contribute/?post={post.pk}", {"text": text, "urls": "", "action": "find"})
    assert response.status_code == 302
    post.refresh_from_db()
    assert post.text == text and post.text_available and post.text_missing_reason() is None
    job = DraftJob.objects.get(contributor=contributor)
    assert job.post_id == post.pk
    assert Post.objects.count() == 1


def test_pasted_text_of_an_already_flagged_post_uses_that_post(contributor_client: Any, contributor: Any) -> None:
    imported = _imported_post()
    flagged = make_post("Vitamin C megadoses stop the flu, doctors hide it.")
    contributor_client.post(f"/contribute/?post={imported.pk}", {"text": flagged.text, "urls": "", "action": "find"})
    imported.refresh_from_db()
    assert imported.text == PLACEHOLDER and not imported.text_available
    assert DraftJob.objects.get(contributor=contributor).post_id == flagged.pk
