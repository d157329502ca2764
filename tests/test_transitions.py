"""State transitions owned by the model. Each stateful model declares one table
(crowdnotes_site.lib.transitions); a move it does not list is refused, by the model's `transition`
and by the compare-and-set `transition_rows`, and by the services and tasks that call them: the row
is left as it was."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.db import models

from crowdnotes_site import leases
from crowdnotes_site.lib.transitions import TransitionRefused, Transitions
from crowdnotes_site.models import OutboxMessage
from crowdnotes_site.transitions import Stateful, transition_rows
from evidence.models import AutomationRun
from judging import services as judging
from judging.models import JudgeRun, PreflightCheck
from notes.living import services as living
from notes.models import DraftJob, Note, NoteVersion, RevisionRun, ScoringRun, SupernoteRun
from notes.scoring import services as scoring_services
from notes.supernotes import services as supernotes
from tests.notes.factories import make_job, make_post, make_ready_snippet
from xnotes.models import XFetchRun, XProposal, XTaskRun
from xnotes.services import eligible as x_eligible
from xnotes.services import proposals as x_proposals

pytestmark = pytest.mark.django_db

PASSAGE = "Controlled trials found that vitamin C supplements do not prevent the flu in the general population."
STATEFUL: list[type[models.Model]] = [
    DraftJob, JudgeRun, PreflightCheck, SupernoteRun, RevisionRun, AutomationRun, ScoringRun, XProposal, XFetchRun,
    XTaskRun,
]  # fmt: skip


class NoX:
    """An X client that must not be used: a refused send or pull asks X nothing."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"X was asked ({name}) for a refused transition")


def _note(text: str = "A note.") -> Note:
    return Note.objects.create(post=make_post(f"A post for {text}"), text=text)


# --- The tables -------------------------------------------------------------------------------------


@pytest.mark.parametrize("model", STATEFUL, ids=lambda m: m.__name__)
def test_each_model_declares_every_state_of_its_field_in_its_table(model: Any) -> None:
    assert issubclass(model, Stateful)
    assert model.TRANSITIONS.states == set(model.State.values)


def test_a_table_refuses_what_it_does_not_list_and_says_why() -> None:
    table = Transitions("draft", {"open": {"closed"}, "closed": set()})
    assert table.allows("open", "closed") and not table.allows("closed", "open")
    assert table.sources("closed") == {"open"} and table.sources("open") == set()
    with pytest.raises(TransitionRefused, match=r"A draft cannot go from 'closed' to 'open' \('closed' is final\)"):
        table.check("closed", "open")
    with pytest.raises(ValueError, match="not in the table"):
        Transitions("draft", {"open": {"gone"}})


# --- Each model: a disallowed move is refused and changes nothing -------------------------------------


def _rows(contributor: Any) -> dict[str, tuple[Any, str]]:
    """A row of each model in a state, with a move its table refuses from there."""
    job = make_job(contributor)
    note = _note()
    version = NoteVersion.objects.create(note=note, number=1, text=note.text, producer="user:test")
    proposal_note = _note("Proposed.")
    proposal = XProposal.objects.create(
        post=proposal_note.post, note=proposal_note, x_post_id="1", test_mode=True, text="t",
        classification="NOT_MISLEADING", state="sent",
    )  # fmt: skip
    return {
        "draft: submitted -> drafting": (
            DraftJob.objects.create(post=make_post("Submitted."), contributor=contributor, state="submitted"),
            "drafting",
        ),
        "draft: discarded -> submitted": (
            DraftJob.objects.create(post=make_post("Discarded."), contributor=contributor, state="discarded"),
            "submitted",
        ),
        "judge run: done -> queued": (JudgeRun.objects.create(note=note, content_hash="h", state="done"), "queued"),
        "pre-flight: done -> failed": (
            PreflightCheck.objects.create(requested_by=contributor, post_text="p", note_text="n", state="done"),
            "failed",
        ),
        "Supernote run: failed -> running": (
            SupernoteRun.objects.create(post=make_post("Stuck."), state="failed"),
            "running",
        ),
        "revision run: failed -> done": (
            RevisionRun.objects.create(note=note, base_version=version, state="failed"),
            "done",
        ),
        "search for evidence: done -> queued": (
            AutomationRun.objects.create(draft_job=job, post_text="p", tau=3, state="done"),
            "queued",
        ),
        "scoring run: skipped -> running": (ScoringRun.objects.create(state="skipped"), "running"),
        "proposal to X: sent -> sending": (proposal, "sending"),
        "pull from X: done -> running": (XFetchRun.objects.create(state="done"), "running"),
    }


CASES = [
    "draft: submitted -> drafting", "draft: discarded -> submitted", "judge run: done -> queued",
    "pre-flight: done -> failed", "Supernote run: failed -> running", "revision run: failed -> done",
    "search for evidence: done -> queued", "scoring run: skipped -> running", "proposal to X: sent -> sending",
    "pull from X: done -> running",
]  # fmt: skip


@pytest.mark.parametrize("case", CASES)
def test_a_disallowed_transition_is_refused_and_changes_nothing(case: str, contributor: Any) -> None:
    row, target = _rows(contributor)[case]
    model: Any = type(row)
    before = model.objects.filter(pk=row.pk).values().get()
    with pytest.raises(TransitionRefused, match=f"cannot go from '{before['state']}' to '{target}'"):
        row.transition(target)  # type: ignore[attr-defined]
    assert row.state == before["state"]  # type: ignore[attr-defined]
    assert transition_rows(model.objects.filter(pk=row.pk), target) == 0
    assert model.objects.filter(pk=row.pk).values().get() == before


# --- ... and so through the services and tasks that move them -----------------------------------------


def _unchanged(row: models.Model) -> Callable[[], bool]:
    model: Any = type(row)
    before = model.objects.filter(pk=row.pk).values().get()
    return lambda: model.objects.filter(pk=row.pk).values().get() == before


def test_a_discarded_draft_cannot_be_submitted(contributor_client: Any, contributor: Any) -> None:
    job = make_job(contributor)
    snippet = make_ready_snippet(job, "https://a.example/1", PASSAGE)
    assert contributor_client.post(f"/snippets/{snippet.pk}/confirm/").status_code == 302
    assert contributor_client.post(f"/drafts/{job.pk}/discard/").status_code == 302
    response = contributor_client.post(f"/drafts/{job.pk}/submit/", {"text": "Vitamin C does not prevent flu."})
    assert response.status_code == 302
    html = contributor_client.get(response["Location"]).content.decode()
    assert "This draft was discarded; it cannot be submitted." in html
    job.refresh_from_db()
    assert job.state == DraftJob.State.DISCARDED
    assert not Note.objects.exists() and not OutboxMessage.objects.filter(task_name__startswith="judging").exists()


def test_finished_runs_are_not_claimed_retried_or_failed_again(contributor: Any) -> None:
    rows = _rows(contributor)
    judge_run = rows["judge run: done -> queued"][0]
    check = rows["pre-flight: done -> failed"][0]
    supernote_run = rows["Supernote run: failed -> running"][0]
    revision_run = rows["revision run: failed -> done"][0]
    automation_run = rows["search for evidence: done -> queued"][0]
    unchanged = [_unchanged(r) for r in (judge_run, check, supernote_run, revision_run, automation_run)]
    queued = OutboxMessage.objects.count()
    assert judging.judge_run_retry(run=judge_run) is False  # only a failed run is retried
    judging.judge_run_fail(run_id=judge_run.pk, error="late failure")
    judging.preflight_fail(check_id=check.pk, error="the judges took longer than the task time limit")
    assert supernotes.supernote_run_step(run_id=supernote_run.pk) is False
    assert living.revision_run_execute(run_id=revision_run.pk) is None
    from evidence.search.services import automation_run_step

    assert automation_run_step(run_id=automation_run.pk) is None
    assert all(check() for check in unchanged)
    assert OutboxMessage.objects.count() == queued  # nothing queued again


def test_a_skipped_scoring_run_is_not_claimed_again(contributor: Any) -> None:
    run = _rows(contributor)["scoring run: skipped -> running"][0]
    unchanged = _unchanged(run)
    assert scoring_services.scoring_run_execute(run_id=run.pk).state == ScoringRun.State.SKIPPED
    assert unchanged()


def test_a_sent_proposal_is_not_sent_again_and_a_finished_pull_not_resumed(contributor: Any) -> None:
    rows = _rows(contributor)
    proposal = rows["proposal to X: sent -> sending"][0]
    pull = rows["pull from X: done -> running"][0]
    unchanged = [_unchanged(proposal), _unchanged(pull)]
    assert x_proposals.proposal_send(proposal_id=proposal.pk, client=NoX()).state == XProposal.State.SENT  # type: ignore[arg-type]
    with pytest.raises(TransitionRefused, match="A pull from X cannot go from 'done' to 'running'"):
        x_eligible.fetch_eligible(run=XFetchRun.objects.get(pk=pull.pk), client=NoX())  # type: ignore[arg-type]
    assert all(check() for check in unchanged)


def test_leases_claim_only_what_the_table_allows(contributor: Any) -> None:
    """The claimed runs' generic claim, fail and sweep ask each model's table."""
    run = _rows(contributor)["Supernote run: failed -> running"][0]
    unchanged = _unchanged(run)
    assert leases.run_claim(SupernoteRun, run_id=run.pk) is False
    leases.run_fail(SupernoteRun, run_id=run.pk, error="again")
    assert unchanged()


# --- Re-queues count against the same per-user limits as first requests ---------------------------


def test_a_failed_drafts_new_request_counts_against_the_draft_limit(
    contributor_client: Any, contributor: Any, settings: Any
) -> None:
    settings.RATE_LIMITS = {**settings.RATE_LIMITS, "draft": "2/h"}
    job = make_job(contributor)
    snippet = make_ready_snippet(job, "https://a.example/1", PASSAGE)
    assert contributor_client.post(f"/snippets/{snippet.pk}/confirm/").status_code == 302
    for _ in range(2):  # a first request, then a new one after the draft failed
        assert contributor_client.post(f"/drafts/{job.pk}/draft/").status_code == 302
        job.refresh_from_db()
        assert job.state == DraftJob.State.DRAFTING
        assert transition_rows(DraftJob.objects.filter(pk=job.pk), DraftJob.State.FAILED, error="LLM down") == 1
    response = contributor_client.post(f"/drafts/{job.pk}/draft/")
    assert response.status_code == 429
    job.refresh_from_db()
    assert job.state == DraftJob.State.FAILED
    assert OutboxMessage.objects.filter(task_name="notes.tasks.draft_generate").count() == 2
