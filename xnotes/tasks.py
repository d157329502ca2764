"""X tasks (default queue). A 429 or a spent budget re-queues the task with a countdown to X's
reset (Celery `retry(countdown=…)`): nothing waits in a loop and no request goes out before it."""

from __future__ import annotations

import logging
from typing import Any

from celery import shared_task
from django.conf import settings

from crowdnotes_site.queue import enqueue_on_commit
from crowdnotes_site.transitions import transition_rows
from notes.models import Post
from xnotes.budget import RateLimited
from xnotes.client import XApiError, XBadAnswer, XClient, XNotConfigured, XTransientError, is_configured
from xnotes.models import XFetchRun, XTaskRun
from xnotes.rules import XShapeError
from xnotes.services import eligible, evaluator, hydrate, proposals, runs, written

log = logging.getLogger(__name__)
# Rate-limit waits a task may take before it gives up (the next beat run starts again).
MAX_RATE_LIMIT_RETRIES = 20


@shared_task(name="xnotes.tasks.x_fetch_eligible", bind=True, acks_late=True, max_retries=MAX_RATE_LIMIT_RETRIES)
def x_fetch_eligible(self: Any, run_id: int | None = None) -> dict[str, Any] | None:
    """Pull eligible posts (beat every X_FETCH_INTERVAL_S, or the admin's "Fetch from X now")."""
    if not is_configured():
        return None
    if run_id is None:
        eligible.fetch_runs_expire()
        if XFetchRun.objects.filter(state__in=XFetchRun.ACTIVE).exists():
            return None  # one pull at a time
        run_id = eligible.fetch_run_create().pk
    run = XFetchRun.objects.get(pk=run_id)
    if run.state not in XFetchRun.ACTIVE:
        return run.summary()
    try:
        run = eligible.fetch_eligible(run=run, client=XClient())
    except RateLimited as limited:
        raise self.retry(args=[run_id], countdown=limited.wait_s()) from None
    except XTransientError as exc:
        transition_rows(XFetchRun.objects.filter(pk=run_id), XFetchRun.State.FAILED, error=str(exc))
        return None
    return run.summary()


@shared_task(name="xnotes.tasks.x_hydrate_posts", bind=True, acks_late=True, max_retries=MAX_RATE_LIMIT_RETRIES)
def x_hydrate_posts(self: Any, run_id: int | None = None) -> dict[str, int] | None:
    """Give imported posts (X id, no text) their text, 100 ids a request (beat hourly, or the
    admin's "Fill imported posts' text now": `run_id`). Progress is saved on the run after each batch."""
    if not is_configured():
        return None
    run = runs.task_run_begin(kind=XTaskRun.Kind.HYDRATE, run_id=run_id)
    if run is None:
        return None
    stats = hydrate.HydrateStats(**run.counts) if run.counts else hydrate.HydrateStats()
    limit = settings.X_HYDRATE_BATCH_LIMIT
    if run.total is None:
        runs.task_run_progress(run, counts=stats.as_dict(), total=len(hydrate.hydrate_candidates(limit=limit)[0]))
    left = max(1, limit - stats.looked_up)

    def progress(done: hydrate.HydrateStats) -> None:
        runs.task_run_progress(run, counts=done.as_dict())

    try:
        stats = hydrate.hydrate_posts(client=XClient(), limit=left, stats=stats, on_batch=progress)
    except RateLimited as limited:
        runs.task_run_end(run, state=XTaskRun.State.WAITING, wait_until=limited.reset_at)
        raise self.retry(args=[run.pk], countdown=limited.wait_s()) from None
    except (XApiError, XShapeError) as exc:  # a transient error past its retries, or an answer that cannot be used
        log.warning("X hydration stopped: %s", exc)
        runs.task_run_end(run, state=XTaskRun.State.FAILED, error=str(exc))
        return None
    runs.task_run_end(run, state=XTaskRun.State.DONE, counts=stats.as_dict())
    return stats.as_dict()


@shared_task(name="xnotes.tasks.x_sync_written", bind=True, acks_late=True, max_retries=MAX_RATE_LIMIT_RETRIES)
def x_sync_written(self: Any, run_id: int | None = None) -> dict[str, int] | None:
    """Follow the notes written (beat hourly, or the admin's "Follow notes back now": `run_id`)."""
    if not is_configured():
        return None
    run = runs.task_run_begin(kind=XTaskRun.Kind.SYNC, run_id=run_id)
    if run is None:
        return None

    def progress(done: written.SyncStats) -> None:
        runs.task_run_progress(run, counts={"requests": done.requests, "pages": done.pages, "notes": done.notes})

    try:
        stats = written.sync_written(client=XClient(), on_page=progress)
    except RateLimited as limited:
        runs.task_run_end(run, state=XTaskRun.State.WAITING, wait_until=limited.reset_at)
        raise self.retry(args=[run.pk], countdown=limited.wait_s()) from None
    except (XApiError, XShapeError) as exc:  # a transient error past its retries, or an answer that cannot be used
        log.warning("X notes_written sync stopped: %s", exc)
        runs.task_run_end(run, state=XTaskRun.State.FAILED, error=str(exc))
        return None
    counts = {"requests": stats.requests, "pages": stats.pages, "notes": stats.notes}
    runs.task_run_end(run, state=XTaskRun.State.DONE, counts=counts)
    return {"requests": stats.requests, "notes": stats.notes}


@shared_task(name="xnotes.tasks.x_propose_note", bind=True, acks_late=True, max_retries=MAX_RATE_LIMIT_RETRIES)
def x_propose_note(self: Any, proposal_id: int) -> str | None:
    """Send one proposal (queued through the outbox by proposals.proposal_request)."""
    try:
        proposal = proposals.proposal_send(proposal_id=proposal_id, client=XClient())
    except XNotConfigured:
        return None
    except RateLimited as limited:
        raise self.retry(args=[proposal_id], countdown=limited.wait_s()) from None
    except (XTransientError, XBadAnswer):
        # The row is UNCERTAIN: the retry asks notes_written before sending anything again.
        raise self.retry(
            args=[proposal_id], countdown=settings.X_API_BACKOFF_S * 2 ** min(self.request.retries, 6)
        ) from None
    return proposal.state


@shared_task(name="xnotes.tasks.x_preflight_evaluate")
def x_preflight_evaluate(check_id: int) -> None:
    """Queued by judging for every pre-flight of a draft: when X is connected and the post is on
    X, queue X's evaluator on the same text (x_evaluate holds the rate-limit retries)."""
    if not is_configured():
        return
    needed = evaluator.preflight_evaluation_needed(check_id)
    if needed is not None:
        post, text = needed
        enqueue_on_commit("xnotes.tasks.x_evaluate", post.pk, text)


@shared_task(name="xnotes.tasks.x_evaluate", bind=True, acks_late=True, max_retries=MAX_RATE_LIMIT_RETRIES)
def x_evaluate(self: Any, post_id: int, text: str) -> float | None:
    """X's evaluator on a pre-flight's text (cached per post and text hash)."""
    post = Post.objects.filter(pk=post_id).first()
    if post is None or not is_configured():
        return None
    try:
        return evaluator.evaluate(post=post, text=text, client=XClient()).claim_opinion_score
    except RateLimited as limited:
        raise self.retry(countdown=limited.wait_s()) from None
    except XTransientError:
        raise self.retry(countdown=settings.X_API_BACKOFF_S * 2 ** min(self.request.retries, 6)) from None
