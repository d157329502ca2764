from __future__ import annotations

from celery import shared_task

from notes import services


@shared_task(acks_late=True)
def draft_generate(job_id: int) -> None:
    """Write a draft. Idempotent: only a job still in the `drafting` state is worked on."""
    services.draft_job_generate(job_id=job_id)
