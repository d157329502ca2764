from __future__ import annotations

from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings


@shared_task(bind=True, acks_late=True, max_retries=None)
def snippet_process(self, snippet_id: int) -> None:  # type: ignore[no-untyped-def]
    """Fetch, extract, chunk, embed and match one evidence source (retries transient network errors)."""
    from evidence import services

    retries = settings.EVIDENCE_FETCH_RETRIES
    try:
        services.snippet_process(snippet_id=snippet_id, final_attempt=self.request.retries >= retries)
    except SoftTimeLimitExceeded:
        services.snippet_fail(
            snippet_id=snippet_id, error_code="timeout", message="processing exceeded the task time limit"
        )
    except services.TransientEvidenceError as exc:
        countdown = settings.EVIDENCE_RETRY_BACKOFF * (2**self.request.retries)
        raise self.retry(exc=exc, countdown=countdown, max_retries=retries) from exc


@shared_task(acks_late=True)
def snippet_refine(snippet_id: int) -> None:
    """Embed the passages the pre-filter skipped (runs after every queued snippet got its first answer)."""
    from evidence import services

    services.snippet_refine(snippet_id=snippet_id)
