"""Celery tasks of the evidence app (queue "cpu"). Thin: each calls the evidence.snippets service
of the same name."""

from __future__ import annotations

from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings

from evidence import prefetch, snippets, warmup
from evidence.search import services


@shared_task(bind=True, acks_late=True, max_retries=None)
def snippet_process(self, snippet_id: int) -> None:  # type: ignore[no-untyped-def]
    """Fetch, extract, chunk, embed and match one evidence source (retries transient network errors)."""
    retries = settings.EVIDENCE_FETCH_RETRIES
    try:
        snippets.snippet_process(snippet_id=snippet_id, final_attempt=self.request.retries >= retries)
    except SoftTimeLimitExceeded:
        snippets.snippet_fail(
            snippet_id=snippet_id, error_code="timeout", message="processing exceeded the task time limit"
        )
    except snippets.TransientEvidenceError as exc:
        countdown = settings.EVIDENCE_RETRY_BACKOFF * (2**self.request.retries)
        raise self.retry(exc=exc, countdown=countdown, max_retries=retries) from exc


@shared_task(acks_late=True)
def snippet_refine(snippet_id: int) -> None:
    """Embed the passages the pre-filter skipped (runs after every queued snippet got its first answer)."""
    snippets.snippet_refine(snippet_id=snippet_id)


@shared_task(acks_late=True)
def automation_run_step(run_id: int) -> None:
    """One stage of "find evidence for me" (the service queues the next stage itself). Backend,
    fetch and LLM failures are handled inside the flow (warnings, fallbacks); anything else is a
    bug and fails the run visibly instead of looping."""
    try:
        services.automation_run_step(run_id=run_id)
    except SoftTimeLimitExceeded:
        services.automation_run_fail(run_id=run_id, error="a stage exceeded the task time limit")
    except Exception as exc:
        services.automation_run_fail(run_id=run_id, error=f"{type(exc).__name__}: {exc}")
        raise


@shared_task(acks_late=True)
def prefetch_url(prefetch_id: int) -> None:
    """A head start: fetch, extract, chunk and embed a URL typed into a form, before submit."""
    try:
        prefetch.prefetch_run(prefetch_id=prefetch_id)
    except SoftTimeLimitExceeded:
        prefetch.prefetch_fail(prefetch_id=prefetch_id, error_code="timeout", message="exceeded the task time limit")


@shared_task(acks_late=True)
def prefilter_table_slice(model_name: str) -> None:
    """One slice of the warm-up's pre-filter table; the next is queued behind people's work."""
    warmup.table_warmup_slice(model_name=model_name)
