from __future__ import annotations

from typing import Any

from celery import shared_task
from django.conf import settings
from django.db import OperationalError

from evidence.prefetch import prefetch_prune
from judging.services import preflight_prune
from notes import services
from notes.analytics.topics import post_classify_topic
from notes.living import services as living
from notes.models import Post
from notes.scoring import services as scoring
from notes.supernotes import services as supernotes


@shared_task(acks_late=True)
def draft_generate(job_id: int) -> None:
    """Write a draft. Idempotent: only a job still in the `drafting` state is worked on."""
    services.draft_job_generate(job_id=job_id)


# Routed to the "llm" queue ("notes.tasks.topic_*"): queued by services.post_create for a post
# with text. Safe to run twice (it overwrites the topic with the same answer). The LLM call is
# the flagger's: it counts against their daily LLM budget.
@shared_task(name="notes.tasks.topic_classify_post", acks_late=True, soft_time_limit=300, time_limit=330)
def topic_classify_post(post_id: int) -> str | None:
    post = Post.objects.filter(pk=post_id).first()
    return post_classify_topic(post=post, owner=post.flagged_by_id) if post is not None else None


# Routed to the "cpu" queue by CELERY_TASK_ROUTES ("notes.tasks.score_*"). Safe to run twice:
# the service takes an advisory lock and recomputes everything from the ratings. Only a lost
# database connection is retried (with backoff, 3 times). Time limits: SCORING_SOFT_TIME_LIMIT_S
# (long enough for the whole download's rescoring: bench/README), read when the worker imports the tasks.
@shared_task(
    name="notes.tasks.score_notes",
    soft_time_limit=settings.SCORING_SOFT_TIME_LIMIT_S,
    time_limit=settings.SCORING_SOFT_TIME_LIMIT_S + 60,
    autoretry_for=(OperationalError,),
    retry_backoff=10,
    max_retries=3,
)
def score_notes(run_id: int | None = None) -> dict[str, Any]:
    """Score every note; the run (asked for by an admin, or a new scheduled one) is recorded."""
    run = scoring.scoring_run_execute(run_id=run_id)
    return dict(run.summary)


# Routed to the "llm" queue (CELERY_TASK_ROUTES "notes.tasks.supernote_*"): mostly LLM calls.
# One slice of a run per delivery (SUPERNOTE_SLICE_CANDIDATES candidates, or the jury at the end);
# the service queues the next slice itself, in the starter's fair turn.
@shared_task(name="notes.tasks.supernote_run_execute", acks_late=True)
def supernote_run_execute(run_id: int) -> None:
    supernotes.supernote_run_step(run_id=run_id)


@shared_task(name="notes.tasks.supernote_runs_start_stuck")
def supernote_runs_start_stuck() -> int:
    return supernotes.supernote_runs_start_stuck()


# Living notes, "llm" queue: a revision run (LLM draft, judges, jury, decision) is claimed
# once per delivery and swept like the other runs; the beat starts the revisions that are due.
@shared_task(name="notes.tasks.revision_run_execute", acks_late=True, reject_on_worker_lost=True)
def revision_run_execute(run_id: int) -> str | None:
    run = living.revision_run_execute(run_id=run_id)
    return run.outcome if run is not None else None


@shared_task(name="notes.tasks.revisions_start_due", ignore_result=True)
def revisions_start_due() -> list[int]:
    return living.revisions_start_due()


@shared_task(name="notes.tasks.suggestion_tag_kind", acks_late=True)
def suggestion_tag_kind(suggestion_id: int) -> None:
    living.suggestion_tag_kind(suggestion_id=suggestion_id)


# Site-wide pruning (beat, default queue). It lives in the top app because it calls the services of
# two apps below it; its registered name and beat entry are those of crowdnotes_site.tasks.
@shared_task(name="crowdnotes_site.tasks.prune_finished_work", ignore_result=True)
def prune_finished_work() -> dict[str, int]:
    """Delete finished pre-flights and head starts older than FINISHED_WORK_RETENTION_DAYS, so
    that these tables do not grow for ever."""
    days = settings.FINISHED_WORK_RETENTION_DAYS
    return {"preflights": preflight_prune(days=days), "prefetches": prefetch_prune(days=days)}
