"""Celery tasks of the judges (queue "llm"). Thin: load by id, call the service, retry."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings

from crowdnotes_site.lib.llm.client import LLMPermanentError, LLMTransientError
from judging import services
from judging.benchmark import queued


@shared_task(bind=True, acks_late=True, reject_on_worker_lost=True, max_retries=None)
def judge_run_step(self: Any, run_id: int) -> str | None:
    """Judge the next stage of a run; the service enqueues the following stage itself.

    Transient LLM failures (after the client's own retries) and soft time limits release
    the claim and retry with doubling backoff, JUDGE_TASK_MAX_RETRIES times; then the run
    fails with the error shown in the audit."""
    try:
        return services.judge_run_step(run_id=run_id)
    except (LLMTransientError, SoftTimeLimitExceeded) as exc:
        error = str(exc) or "soft time limit exceeded"
        if self.request.retries >= settings.JUDGE_TASK_MAX_RETRIES:
            services.judge_run_fail(
                run_id=run_id,
                error=f"{services.LLM_OUTAGE if isinstance(exc, LLMTransientError) else ''}{error} "
                f"(after {self.request.retries + 1} tries)",
            )
            return None
        services.judge_run_release(run_id=run_id, error=f"retrying: {error}")
        raise self.retry(exc=exc, countdown=settings.JUDGE_RETRY_BACKOFF_S * 2**self.request.retries) from exc
    except LLMPermanentError as exc:
        services.judge_run_fail(run_id=run_id, error=str(exc))
        return None


@shared_task(acks_late=True)
def preflight_check(check_id: int) -> None:
    """A contributor's pre-flight (llm queue): the judges' advice, stored for the polling page."""
    try:
        services.preflight_check_run(check_id=check_id)
    except SoftTimeLimitExceeded:
        services.preflight_fail(check_id=check_id, error="the judges took longer than the task time limit")


@shared_task(bind=True, acks_late=True, reject_on_worker_lost=True, max_retries=None)
def benchmark_slice(self: Any, dataset: str, modes: list[str]) -> str:
    """A few tasks of a queued benchmark run (llm queue, lowest priority); the service queues the
    next slice. While the demo's warm-up indexes the pages, it retries every BENCHMARK_WAIT_S."""
    try:
        return queued.benchmark_slice(dataset=Path(dataset), modes=modes).state
    except queued.NotReady as exc:
        raise self.retry(exc=exc, countdown=settings.BENCHMARK_WAIT_S) from exc
