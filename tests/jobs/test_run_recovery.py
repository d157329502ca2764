"""Every kind of run recovers within 2 minutes of its worker's death.

The `default,llm` worker is SIGKILLed while the loopback LLM holds its call (mid-judge, mid-Supernote
run), then restarted with celery beat inside it. The judge run's test keeps the DEFAULT lease and
sweep settings (WORK_LEASE_S 60, WORK_SWEEP_INTERVAL_S 30, visibility timeout 1 hour): nothing in it
shortens a timeout, so the production defaults are proven end to end once. The Supernote run's test
goes through the same claim, heartbeat and sweep with a 3 s lease and a 1 s sweep (so the suite
waits seconds, not the default minute and a half, where the defaults are already proven).
The run must complete exactly once within 120 s of the restart: the lease and the sweeper, not the
broker's hour-long visibility timeout, bring it back.
The other tests exercise the sweeper directly on rows; after the sweep a real `cpu` worker
finishes a lost scoring run."""

from __future__ import annotations

import threading
import time
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from crowdnotes_site import leases
from crowdnotes_site.models import OutboxMessage
from crowdnotes_site.queue import Enqueued
from crowdnotes_site.tasks import work_sweep
from evidence.models import AutomationRun
from evidence.search import services as search_services
from judging import services as judging_services
from judging.models import JudgeDecision, JudgeRun, PreflightCheck
from notes.models import NoteStatusChange, ScoringRun, SupernoteRun
from notes.scoring import services as scoring_services
from notes.supernotes import services as supernotes
from tests.conftest import wait_for
from tests.judging.factories import answers, note_with_evidence, stage_of
from tests.notes.factories import make_job
from tests.notes.supernotes.test_runs import _stuck_post
from tests.support.llm_server import Reply
from tests.support.worker import purge_broker

ALL_YES = answers(
    relevance="Relevant.\nFinal decision: yes",
    correctness="Faithful.\nFinal decision: yes",
    helpfulness="Helpful.\nFinal decision: yes",
)
GOOD = "Large studies of millions of children found no link between vaccines and autism. https://cdc.gov/autism"


def _supernote_answer(messages: list[dict[str, Any]]) -> str:
    return "Fine.\nFinal decision: yes" if "Question:" in messages[-1]["content"] else GOOD


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_judge_run_of_a_killed_llm_worker_completes_once_within_two_minutes_of_the_restart(
    worker_factory: Any, llm_server: Any
) -> None:
    held = threading.Event()
    llm_server.script(Reply(content="Never used: this worker is killed.", hold=held))
    llm_server.respond_with(ALL_YES)
    first = worker_factory(queues="default,llm")
    run = judging_services.judge_run_request(note=note_with_evidence())
    wait_for(lambda: llm_server.requests, timeout=60)
    run.refresh_from_db()
    assert run.state == "running" and run.claimed_until is not None
    first.kill()
    held.set()
    restarted = time.monotonic()
    second = worker_factory(queues="default,llm", beat=True)
    wait_for(lambda: JudgeRun.objects.get(pk=run.pk).state in ("done", "failed"), timeout=120)
    recovered_s = time.monotonic() - restarted
    run.refresh_from_db()
    assert (run.state, run.helpful, run.claimed_until) == ("done", True, None), second.output()
    assert sorted(JudgeDecision.objects.filter(run=run).values_list("stage", flat=True)) == [
        "correctness", "helpfulness", "relevance",
    ]  # fmt: skip
    stages = [stage_of(r["messages"]) for r in llm_server.requests]
    assert (stages.count("relevance"), stages.count("correctness"), stages.count("helpfulness")) == (2, 1, 1)
    assert recovered_s < 120
    print(f"judge run recovered {recovered_s:.1f} s after the restart")  # bench/README.md, "Recovery"


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_supernote_run_of_a_killed_llm_worker_completes_once_within_two_minutes_of_the_restart(
    worker_factory: Any, llm_server: Any, admin_user: Any, tmp_path: Any
) -> None:
    post, _notes, _ = _stuck_post()
    held = threading.Event()
    llm_server.script(Reply(content=GOOD), Reply(content=GOOD), Reply(content="Never used: killed.", hold=held))
    llm_server.respond_with(_supernote_answer)
    env = {"PHM_DIR": str(tmp_path / "no-phm")}  # no jury model: the run ends after the candidates
    # Short lease and sweep (the judge run's test above keeps the defaults): the claim, renewed by
    # the heartbeat every second, expires 3 s after the kill and beat sweeps every second.
    env |= {"WORK_LEASE_S": "3", "WORK_SWEEP_INTERVAL_S": "1"}
    first = worker_factory(queues="default,llm", extra_env=env)
    run = supernotes.supernote_run_start(post=post, user=admin_user, n_candidates=8, jury_size=10)
    wait_for(lambda: len(llm_server.requests) >= 3, timeout=60)  # the first slice's third call hangs
    first.kill()
    held.set()
    restarted = time.monotonic()
    second = worker_factory(queues="default,llm", extra_env=env, beat=True)
    wait_for(lambda: SupernoteRun.objects.get(pk=run.pk).state in ("done", "failed"), timeout=120)
    recovered_s = time.monotonic() - restarted
    run.refresh_from_db()
    assert run.state == "done", (run.error, second.output())
    assert "No personalized helpfulness model" in run.outcome
    assert sorted(run.candidates.values_list("index", flat=True)) == list(range(8))  # each candidate once
    assert (run.candidates_done, run.claimed_until) == (8, None)
    assert recovered_s < 120
    print(f"Supernote run recovered {recovered_s:.1f} s after the restart (3 s lease, 1 s sweep)")


# --- The sweeper on rows (no worker) ------------------------------------------------------------


def _expire(model: Any, pk: int) -> None:
    model.objects.filter(pk=pk).update(state="running", claimed_until=timezone.now() - timedelta(seconds=1))


@pytest.mark.django_db
def test_the_sweeper_requeues_each_kind_of_run_whose_claim_expired_once(
    django_capture_on_commit_callbacks: Any, contributor: Any, admin_user: Any
) -> None:
    note = note_with_evidence()
    judge = JudgeRun.objects.create(note=note, content_hash="x", stage="relevance")
    live = JudgeRun.objects.create(note=note, content_hash="y", stage="relevance")
    JudgeRun.objects.filter(pk=live.pk).update(state="running", claimed_until=leases.lease_deadline())
    done = JudgeRun.objects.create(note=note, content_hash="z", state="done")
    automation = AutomationRun.objects.create(draft_job=make_job(contributor), post_text="p", tau=1)
    post, _, _ = _stuck_post()
    supernote = SupernoteRun.objects.create(post=post, requested_by=admin_user)
    scoring = ScoringRun.objects.create()
    for model, row in (
        (JudgeRun, judge),
        (AutomationRun, automation),
        (SupernoteRun, supernote),
        (ScoringRun, scoring),
    ):
        _expire(model, row.pk)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        assert judging_services.judge_runs_sweep() == [judge.pk]
        assert search_services.automation_runs_sweep() == [automation.pk]
        assert supernotes.supernote_runs_sweep() == [supernote.pk]
        assert scoring_services.scoring_runs_sweep() == [scoring.pk]
    assert [(c.task, c.args) for c in callbacks] == [
        ("judging.tasks.judge_run_step", (judge.pk,)),
        ("evidence.tasks.automation_run_step", (automation.pk,)),
        ("notes.tasks.supernote_run_execute", (supernote.pk,)),
        ("notes.tasks.score_notes", (scoring.pk,)),
    ]
    assert all(isinstance(c, Enqueued) for c in callbacks)
    # The owner's fair turn: the automation run is its contributor's, the Supernote run its starter's.
    assert [c.priority is not None for c in callbacks] == [False, True, True, False]
    for model, row in (
        (JudgeRun, judge),
        (AutomationRun, automation),
        (SupernoteRun, supernote),
        (ScoringRun, scoring),
    ):
        assert model.objects.values_list("state", "claimed_until").get(pk=row.pk) == ("queued", None)
    assert JudgeRun.objects.get(pk=live.pk).state == "running" and JudgeRun.objects.get(pk=done.pk).state == "done"
    # Swept once: a second sweep finds nothing.
    assert judging_services.judge_runs_sweep() == supernotes.supernote_runs_sweep() == []


@pytest.mark.django_db
def test_the_sweeper_requeues_a_preflight_whose_claim_expired_in_its_contributors_turn(
    django_capture_on_commit_callbacks: Any, contributor: Any
) -> None:
    lost = judging_services.preflight_request(user=contributor, post_text="Garlic cures flu", note_text="No.")
    live = judging_services.preflight_request(user=contributor, post_text="Onions cure colds", note_text="No.")
    PreflightCheck.objects.filter(pk=live.pk).update(state="running", claimed_until=leases.lease_deadline())
    _expire(PreflightCheck, lost.pk)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        assert judging_services.preflight_checks_sweep() == [lost.pk]
        assert judging_services.preflight_checks_sweep() == []  # re-queued once
    assert [(c.task, c.args) for c in callbacks] == [("judging.tasks.preflight_check", (lost.pk,))]
    assert isinstance(callbacks[0], Enqueued) and callbacks[0].priority is not None  # the contributor's turn
    assert PreflightCheck.objects.values_list("state", "claimed_until").get(pk=lost.pk) == ("queued", None)
    assert PreflightCheck.objects.get(pk=live.pk).state == "running"  # a live claim is never swept
    # The beat task sweeps pre-flights with the runs.
    _expire(PreflightCheck, lost.pk)
    assert work_sweep()["preflights"] == [lost.pk]


@pytest.mark.django_db
def test_a_swept_preflight_runs_once_and_one_that_keeps_losing_its_worker_fails(
    settings: Any, contributor: Any, llm_server: Any
) -> None:
    llm_server.respond_with(ALL_YES)
    check = judging_services.preflight_request(
        user=contributor, post_text="Garlic cures flu", note_text="Trials show it does not.",
        snippets=["Trials found that garlic does not prevent or cure flu."],
    )  # fmt: skip
    _expire(PreflightCheck, check.pk)  # a worker claimed it and died
    assert judging_services.preflight_checks_sweep() == [check.pk]
    done = judging_services.preflight_check_run(check_id=check.pk)
    assert done is not None and done.state == "done" and done.result is not None and done.result["helpful"] is True
    assert judging_services.preflight_check_run(check_id=check.pk) is None  # a duplicate delivery does nothing
    assert len(llm_server.requests) == 3

    settings.JUDGE_MAX_CLAIMS = 2
    poison = judging_services.preflight_request(user=contributor, post_text="Bleach cures flu", note_text="No.")
    PreflightCheck.objects.filter(pk=poison.pk).update(attempts=2)
    _expire(PreflightCheck, poison.pk)
    assert judging_services.preflight_checks_sweep() == [poison.pk]
    assert judging_services.preflight_check_run(check_id=poison.pk) is None
    poison.refresh_from_db()
    assert poison.state == "failed" and "gave up after 2 attempts" in poison.error
    assert len(llm_server.requests) == 3  # the failed check called nothing


@pytest.mark.django_db(transaction=True)
def test_the_heartbeat_keeps_a_live_claim_ahead_of_the_clock(settings: Any) -> None:
    settings.WORK_LEASE_S = 3  # renewed every second
    run = JudgeRun.objects.create(note=note_with_evidence(), content_hash="x", stage="relevance")
    assert leases.run_claim(JudgeRun, run_id=run.pk)
    claimed = JudgeRun.objects.get(pk=run.pk).claimed_until
    assert claimed is not None
    with leases.heartbeat(JudgeRun, run.pk, field="claimed_until"):
        wait_for(
            lambda: (JudgeRun.objects.get(pk=run.pk).claimed_until or claimed) > claimed + timedelta(seconds=0.5),
            timeout=10,
        )
        assert judging_services.judge_runs_sweep() == []
    assert not leases.run_claim(JudgeRun, run_id=run.pk)  # a live claim is not taken twice


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_scoring_run_of_a_lost_worker_is_swept_in_its_admins_turn_and_finished_once(
    worker_factory: Any, admin_user: Any
) -> None:
    _stuck_post()  # notes and ratings to score
    run = scoring_services.notes_rescore_request(user=admin_user)
    purge_broker()  # a worker took the message ...
    ScoringRun.objects.filter(pk=run.pk).update(  # ... claimed the run and died
        state="running", claimed_until=timezone.now() - timedelta(seconds=1), started_at=timezone.now(), attempts=1
    )
    assert scoring_services.scoring_runs_sweep() == [run.pk]
    assert scoring_services.scoring_runs_sweep() == []  # re-queued once
    sent = OutboxMessage.objects.filter(task_name="notes.tasks.score_notes").order_by("pk")
    assert [(m.args, m.owner_id, m.priority) for m in sent] == [
        ([run.pk], admin_user.pk, 0),
        ([run.pk], admin_user.pk, 1),
    ]
    worker = worker_factory(queues="cpu")
    wait_for(lambda: ScoringRun.objects.get(pk=run.pk).state in ("done", "failed"), timeout=120)
    run.refresh_from_db()
    assert (run.state, run.attempts, run.claimed_until) == ("done", 2, None), (run.error, worker.output())
    assert run.summary["notes"] > 0 and run.finished_at is not None
    changes = NoteStatusChange.objects.count()
    # Finished once: a duplicate delivery finds nothing to claim and changes nothing.
    again = scoring_services.scoring_run_execute(run_id=run.pk)
    assert (again.state, again.attempts, again.finished_at) == ("done", 2, run.finished_at)
    assert NoteStatusChange.objects.count() == changes
    assert scoring_services.scoring_runs_sweep() == []
