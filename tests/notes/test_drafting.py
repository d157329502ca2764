"""Drafting from confirmed snippets: the LLM through a real worker, the offline baseline, failures."""

from __future__ import annotations

from typing import Any

import pytest

from evidence import snippets
from notes import services
from notes.models import DraftJob
from tests.conftest import wait_for
from tests.notes.factories import make_job, make_post, make_ready_snippet
from tests.support.llm_server import Reply

PASSAGE = "Controlled trials found that vitamin C supplements do not prevent the flu in the general population."
OTHER = "Roses need six hours of sun a day and well-drained soil."


def _ready_job(user: Any) -> DraftJob:
    # The post's claim is what PASSAGE answers (the offline draft keeps only sentences on the claim).
    job = make_job(user, make_post("Vitamin C supplements prevent the flu, take them every day."))
    keep = make_ready_snippet(job, "https://a.example/trials", PASSAGE)
    drop = make_ready_snippet(job, "https://b.example/roses", OTHER)
    snippets.snippet_review(snippet=keep, user=user, confirmed=True)
    snippets.snippet_review(snippet=drop, user=user, confirmed=False)
    return job


@pytest.mark.worker
def test_it_drafts_with_the_llm_in_a_real_worker_from_confirmed_snippets_only(
    celery_worker: Any, llm_server: Any, contributor_client: Any, contributor: Any
) -> None:
    llm_server.respond_with(lambda messages: "Controlled trials show vitamin C supplements do not prevent flu.")
    job = _ready_job(contributor)
    response = contributor_client.post(f"/drafts/{job.pk}/draft/")
    assert response.status_code == 302
    wait_for(lambda: DraftJob.objects.get(pk=job.pk).state != DraftJob.State.DRAFTING, timeout=60)
    job.refresh_from_db()
    assert job.state == DraftJob.State.DRAFTED, job.error
    assert job.draft_text == "Controlled trials show vitamin C supplements do not prevent flu."
    assert job.draft_method == "llm:scripted-model"
    prompt = " ".join(str(m["content"]) for m in llm_server.requests[-1]["messages"])
    assert PASSAGE in prompt
    assert OTHER not in prompt
    assert llm_server.requests[-1]["temperature"] == 0
    assert job.draft_provenance[0]["snippet"] == 0
    html = contributor_client.get(f"/drafts/{job.pk}/").content.decode()
    assert "the LLM scripted-model" in html
    assert job.draft_text in html  # loaded into the editor


@pytest.mark.worker
def test_it_shows_a_retryable_failure_when_the_llm_keeps_failing(
    celery_worker: Any, llm_server: Any, contributor_client: Any, contributor: Any
) -> None:
    llm_server.respond_with(lambda messages: "unused")
    llm_server.script(*[Reply(status=503, content="overloaded")] * 4)
    job = _ready_job(contributor)
    contributor_client.post(f"/drafts/{job.pk}/draft/")
    wait_for(lambda: DraftJob.objects.get(pk=job.pk).state != DraftJob.State.DRAFTING, timeout=60)
    job.refresh_from_db()
    assert job.state == DraftJob.State.FAILED
    assert "The LLM endpoint failed" in job.error
    html = contributor_client.get(f"/drafts/{job.pk}/").content.decode()
    assert "The draft failed" in html
    assert "Try drafting again" in html
    contributor_client.post(f"/drafts/{job.pk}/draft/")  # the scripted failures are used up: this one works
    wait_for(lambda: DraftJob.objects.get(pk=job.pk).state == DraftJob.State.DRAFTED, timeout=60)


@pytest.mark.django_db
def test_it_uses_the_labelled_offline_baseline_without_an_llm(contributor: Any, settings: Any) -> None:
    settings.LLM_BASE_URL = ""
    job = _ready_job(contributor)
    DraftJob.objects.filter(pk=job.pk).update(state=DraftJob.State.DRAFTING)
    job = services.draft_job_generate(job_id=job.pk)
    assert job.state == DraftJob.State.DRAFTED
    assert job.draft_method.startswith("baseline:extractive")
    assert job.draft_text == PASSAGE
    assert job.draft_provenance == [{"sentence": PASSAGE, "snippet": 0, "how": "copied", "overlap": 1.0}]


@pytest.mark.django_db
def test_it_fails_visibly_when_the_llm_endpoint_is_unreachable(contributor: Any, settings: Any) -> None:
    settings.LLM_BASE_URL = "http://127.0.0.1:9/v1"  # nothing listens on the discard port
    settings.LLM_MAX_RETRIES = 1
    settings.LLM_TIMEOUT_S = 2
    job = _ready_job(contributor)
    DraftJob.objects.filter(pk=job.pk).update(state=DraftJob.State.DRAFTING)
    job = services.draft_job_generate(job_id=job.pk)
    assert job.state == DraftJob.State.FAILED
    assert "Nothing was lost: try drafting again." in job.error


@pytest.mark.django_db
def test_it_refuses_an_llm_draft_that_breaks_the_note_rules(contributor: Any, llm_server: Any) -> None:
    llm_server.respond_with(lambda messages: "See https://example.org for more.")
    job = _ready_job(contributor)
    DraftJob.objects.filter(pk=job.pk).update(state=DraftJob.State.DRAFTING)
    job = services.draft_job_generate(job_id=job.pk)
    assert job.state == DraftJob.State.FAILED
    assert "broke the note rules" in job.error
    assert job.draft_text == ""
