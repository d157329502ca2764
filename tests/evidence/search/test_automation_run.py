"""The contributor's "Find evidence for me": the run behind the button, its stages and lease,
proposals in the snippet review, and the note's origin."""

from __future__ import annotations

import datetime as dt
import io
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.utils import timezone

from crowdnotes_site.queue import Enqueued
from evidence.models import AutomationRun, Snippet, UtilityRound
from evidence.search import services
from notes.models import DraftJob, Note
from notes.services import note_origin
from tests.notes.factories import make_job, make_post, make_ready_snippet

pytestmark = pytest.mark.django_db
POST = "The MMR vaccine causes autism in children, measles is harmless anyway"
WHO = "https://www.who.int/news-room/fact-sheets/detail/measles"


@pytest.fixture
def indexed(corpus: tuple[Path, Path]) -> None:
    folder, manifest = corpus
    call_command("index_documents", str(folder), "--manifest", str(manifest), "--base-url", "http://127.0.0.1:8001/",
                 stdout=io.StringIO())  # fmt: skip


def _run_to_the_end(run: AutomationRun) -> list[str]:
    stages = []
    while (stage := services.automation_run_step(run_id=run.pk)) is not None:
        stages.append(stage)
    return stages


def test_find_evidence_on_the_flag_page_needs_no_urls_and_queues_a_run(
    contributor_client: Any, django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks() as callbacks:
        response = contributor_client.post("/contribute/", {"text": POST, "urls": "", "action": "find"})
    job = DraftJob.objects.get()
    run = job.automation_runs.get()
    assert response.status_code == 302 and response["Location"] == f"/drafts/{job.pk}/"
    assert job.mode == DraftJob.Mode.AUTOMATION and run.state == "queued" and run.tau == 3
    assert callbacks == [Enqueued("evidence.tasks.automation_run_step", (run.pk,))]
    refused = contributor_client.post("/contribute/", {"text": POST, "urls": "", "action": "fetch"})
    assert "Paste at least one evidence URL" in refused.content.decode()


def test_the_draft_page_button_starts_one_run_at_a_time(contributor: Any, contributor_client: Any) -> None:
    job = make_job(contributor, make_post(POST))
    page = contributor_client.get(f"/drafts/{job.pk}/").content.decode()
    assert 'id="find-evidence"' in page
    contributor_client.post(f"/drafts/{job.pk}/find-evidence/")
    again = contributor_client.post(f"/drafts/{job.pk}/find-evidence/", follow=True).content.decode()
    assert "already looking for evidence" in again
    assert job.automation_runs.count() == 1
    page = contributor_client.get(f"/drafts/{job.pk}/").content.decode()
    assert "CrowdNotes is still looking for evidence" in page and 'id="request-draft"' not in page
    assert 'hx-trigger="every 1s"' in page  # polls while the search runs


def test_a_run_goes_through_every_stage_and_proposes_sources_for_review(
    contributor: Any, contributor_client: Any, indexed: None
) -> None:
    job = make_job(contributor, make_post(POST))
    run = services.automation_run_start(job=job, tau=2)
    stages = _run_to_the_end(run)
    # The screen checks a few candidates per delivery of "choosing", then two utility rounds.
    assert stages[:3] == ["queries", "search", "pool"] and stages[-1] == "fetching"
    assert set(stages[3:-1]) == {"choosing"} and len(stages[3:-1]) >= 3
    run.refresh_from_db()
    assert run.state == "done" and run.stage == "done" and run.finished_at is not None
    proposed = list(job.snippets.order_by("position"))
    assert proposed[0].url == WHO and len(proposed) == 2
    assert all(s.proposed_by_id == run.pk and "reliability prior" in s.proposal_reason for s in proposed)
    rounds = list(UtilityRound.objects.filter(run=run))
    assert [r.number for r in rounds] == [1, 2] and rounds[0].chosen_url == WHO
    assert len(rounds[1].candidates) == len(rounds[0].candidates) - 1  # the chosen one left the pool
    page = contributor_client.get(f"/drafts/{job.pk}/").content.decode()
    for text in ("Proposed by CrowdNotes", "search queries written", "Pool of", "2 source(s) proposed",
                 "the offline baseline (baseline:key-terms-v4), not an LLM"):  # fmt: skip
        assert text in page, text


def test_the_lease_lets_one_worker_run_a_stage_and_a_lost_one_be_replaced(contributor: Any) -> None:
    run = services.automation_run_start(job=make_job(contributor, make_post(POST)))
    assert services.automation_run_claim(run_id=run.pk)
    assert not services.automation_run_claim(run_id=run.pk)  # a duplicate delivery
    AutomationRun.objects.filter(pk=run.pk).update(claimed_until=timezone.now() - dt.timedelta(seconds=1))
    assert services.automation_run_claim(run_id=run.pk)  # the worker was lost: the lease expired
    run.refresh_from_db()
    assert run.attempts == 2 and run.state == "running"


def test_a_proposal_already_in_the_evidence_is_not_added_twice(contributor: Any, indexed: None) -> None:
    job = make_job(contributor, make_post(POST))
    make_ready_snippet(job, WHO, "Measles vaccines are safe.")
    run = services.automation_run_start(job=job, tau=1)
    _run_to_the_end(run)
    run.refresh_from_db()
    assert job.snippets.filter(url=WHO).count() == 1
    assert any("already in your evidence" in w for w in run.flow["warnings"])


def test_the_origin_says_who_chose_the_evidence(contributor: Any) -> None:
    job = make_job(contributor)
    run = AutomationRun.objects.create(draft_job=job, post_text="x", tau=1)
    mine = make_ready_snippet(job, "https://a.example/1", "Text one.")
    theirs = make_ready_snippet(job, "https://b.example/2", "Text two.")
    Snippet.objects.filter(pk=theirs.pk).update(proposed_by=run)
    theirs.refresh_from_db()
    assert note_origin(confirmed=[theirs], survival=0.9) == Note.Origin.AUTOMATED
    assert note_origin(confirmed=[theirs], survival=0.1) == Note.Origin.HUMAN_MACHINE_EVIDENCE
    assert note_origin(confirmed=[theirs], survival=None) == Note.Origin.HUMAN_MACHINE_EVIDENCE
    assert note_origin(confirmed=[mine, theirs], survival=0.9) == Note.Origin.MIXED
    assert note_origin(confirmed=[mine], survival=0.9) == Note.Origin.AUGMENTED
    assert note_origin(confirmed=[mine], survival=0.2) == Note.Origin.HUMAN
    assert note_origin(confirmed=[mine], survival=None) == Note.Origin.HUMAN
