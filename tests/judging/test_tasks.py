"""The judge chain on real Celery workers (Redis broker, PostgreSQL), with the scripted LLM."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from judging import services
from judging.models import JudgeDecision, JudgeRun
from judging.tasks import judge_run_step
from tests.conftest import wait_for
from tests.judging.factories import answers, note_with_evidence, stage_of
from tests.support.llm_server import Reply

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

ALL_YES = answers(
    relevance="Relevant.\nFinal decision: yes",
    correctness="Faithful.\nFinal decision: yes",
    helpfulness="Helpful.\nFinal decision: yes",
)


def _finished(run: JudgeRun) -> JudgeRun | None:
    run.refresh_from_db()
    return run if run.state in ("done", "failed") else None


def test_it_judges_a_note_through_a_real_worker(celery_worker: Any, llm_server: Any) -> None:
    llm_server.respond_with(ALL_YES)
    run = services.judge_run_request(note=note_with_evidence())
    wait_for(lambda: _finished(run))
    assert (run.state, run.helpful) == ("done", True), celery_worker.output()
    assert JudgeDecision.objects.filter(run=run).count() == 3


def test_it_stores_one_decision_per_stage_under_double_delivery(celery_worker: Any, llm_server: Any) -> None:
    llm_server.respond_with(ALL_YES)
    run = services.judge_run_request(note=note_with_evidence())
    for _ in range(3):  # duplicates of the same message, as a broker may deliver
        judge_run_step.delay(run.pk)
    # One solo worker consumes the queue in order: the duplicates were handled before the
    # chain's later stages, so by the time the run is done they have all been delivered.
    wait_for(lambda: _finished(run))
    assert run.state == "done"
    assert sorted(JudgeDecision.objects.filter(run=run).values_list("stage", flat=True)) == [
        "correctness", "helpfulness", "relevance",
    ]  # fmt: skip
    assert sorted(stage_of(r["messages"]) for r in llm_server.requests) == ["correctness", "helpfulness", "relevance"]


def test_it_retries_transient_llm_errors_then_fails_visibly(own_workers: Any, llm_server: Any) -> None:
    own_workers(extra_env={"JUDGE_TASK_MAX_RETRIES": "2", "JUDGE_RETRY_BACKOFF_S": "0", "LLM_MAX_RETRIES": "1"})
    llm_server.script(*[Reply(status=503, content="overloaded") for _ in range(6)])
    run = services.judge_run_request(note=note_with_evidence())
    wait_for(lambda: _finished(run))
    assert run.state == "failed"
    assert "HTTP 503 after 2 attempts" in run.error and "after 3 tries" in run.error
    assert len(llm_server.requests) == 6  # 3 task tries x 2 client attempts
    assert not JudgeDecision.objects.filter(run=run).exists()


def test_it_recovers_after_transient_errors(own_workers: Any, llm_server: Any) -> None:
    own_workers(extra_env={"JUDGE_TASK_MAX_RETRIES": "2", "JUDGE_RETRY_BACKOFF_S": "0", "LLM_MAX_RETRIES": "0"})
    llm_server.script(Reply(status=500), Reply(status=429))
    llm_server.respond_with(ALL_YES)
    run = services.judge_run_request(note=note_with_evidence())
    wait_for(lambda: _finished(run))
    assert (run.state, run.helpful, run.error) == ("done", True, "")


def test_it_completes_exactly_once_after_the_worker_is_killed_mid_judge(own_workers: Any, llm_server: Any) -> None:
    # Short but still nested timeouts: LLM 1 s < soft 2 s < hard 3 s < visibility 5 s; the claim (4 s) renewed by the heartbeat.
    fast_recovery = {
        "LLM_TIMEOUT_S": "1",
        "CELERY_TASK_SOFT_TIME_LIMIT": "2",
        "CELERY_TASK_TIME_LIMIT": "3",
        "WORK_LEASE_S": "4",
        "CELERY_VISIBILITY_TIMEOUT": "5",
        "CELERY_UNACKED_RESTORE_INTERVAL_S": "0.5",
        "CELERY_UNACKED_RESTORE_THROTTLE": "1",
    }
    held = threading.Event()
    llm_server.script(Reply(content="Final decision: yes", hold=held))  # the first relevance call hangs
    llm_server.respond_with(ALL_YES)
    first = own_workers(extra_env=fast_recovery)
    run = services.judge_run_request(note=note_with_evidence())
    wait_for(lambda: llm_server.requests)
    first.kill()  # SIGKILL in the middle of the judge call: nothing acked, nothing stored
    held.set()
    assert not JudgeDecision.objects.filter(run=run).exists()
    second = own_workers(extra_env=fast_recovery)
    wait_for(lambda: _finished(run), timeout=90)
    assert (run.state, run.helpful) == ("done", True), second.output()
    assert sorted(JudgeDecision.objects.filter(run=run).values_list("stage", flat=True)) == [
        "correctness", "helpfulness", "relevance",
    ]  # fmt: skip
    stages = [stage_of(r["messages"]) for r in llm_server.requests]
    assert stages.count("relevance") == 2 and stages.count("correctness") == 1 and stages.count("helpfulness") == 1
    assert run.attempts == 4  # the lost claim + one per stage
