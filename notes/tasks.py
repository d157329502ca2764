from __future__ import annotations

from typing import Any

from celery import shared_task
from django.db import OperationalError

from notes import services


@shared_task(acks_late=True)
def draft_generate(job_id: int) -> None:
    """Write a draft. Idempotent: only a job still in the `drafting` state is worked on."""
    services.draft_job_generate(job_id=job_id)


# Routed to the "llm" queue ("notes.tasks.topic_*"): queued by services.post_create for a post
# with text. Safe to run twice (it overwrites the topic with the same answer).
@shared_task(name="notes.tasks.topic_classify_post", acks_late=True, soft_time_limit=300, time_limit=330)
def topic_classify_post(post_id: int) -> str | None:
    from notes.analytics.topics import post_classify_topic
    from notes.models import Post

    post = Post.objects.filter(pk=post_id).first()
    return post_classify_topic(post=post) if post is not None else None


# Routed to the "cpu" queue by CELERY_TASK_ROUTES ("notes.tasks.score_*"). Safe to run twice:
# the service takes an advisory lock and recomputes everything from the ratings. Only a lost
# database connection is retried (with backoff, 3 times).
@shared_task(
    name="notes.tasks.score_notes",
    soft_time_limit=600,
    time_limit=660,
    autoretry_for=(OperationalError,),
    retry_backoff=10,
    max_retries=3,
)
def score_notes(run_id: int | None = None) -> dict[str, Any]:
    """Score every note; the run (asked for by an admin, or a new scheduled one) is recorded."""
    run = services.scoring_run_execute(run_id=run_id)
    return dict(run.summary)


# Routed to the "llm" queue (CELERY_TASK_ROUTES "notes.tasks.supernote_*"): mostly LLM calls.
# One slice of a run per delivery (SUPERNOTE_SLICE_CANDIDATES candidates, or the jury at the end);
# the service queues the next slice itself, in the starter's fair turn.
@shared_task(name="notes.tasks.supernote_run_execute", acks_late=True)
def supernote_run_execute(run_id: int) -> None:
    from notes.supernotes import services as supernotes

    supernotes.supernote_run_step(run_id=run_id)


@shared_task(name="notes.tasks.supernote_runs_start_stuck")
def supernote_runs_start_stuck() -> int:
    from notes.supernotes import services as supernotes

    return supernotes.supernote_runs_start_stuck()
