"""Runs of the X tasks: the fetch runs' and the task runs' lost-worker rule, and the hydrate and sync
tasks' runs (the writer page's buttons, beat), one active run of a kind at a time."""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Any

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from crowdnotes_site.queue import enqueue_on_commit
from crowdnotes_site.transitions import transition_rows
from xnotes.models import XFetchRun, XRun, XTaskRun

if TYPE_CHECKING:
    from django.contrib.auth.models import User

# A fetch run not saved for this long (running) or this long past its wait (waiting) lost its worker.
FETCH_RUN_STALE_S = 600

TASK_OF_KIND = {
    XTaskRun.Kind.HYDRATE: "xnotes.tasks.x_hydrate_posts",
    XTaskRun.Kind.SYNC: "xnotes.tasks.x_sync_written",
}


def lost_runs_fail(model: type[XFetchRun] | type[XTaskRun], *, error: str, now: dt.datetime | None) -> int:
    """Fail the runs of `model` whose worker was lost: queued or running without an update, or
    waiting past their reset, for FETCH_RUN_STALE_S."""
    now = now or timezone.now()
    stale = now - dt.timedelta(seconds=FETCH_RUN_STALE_S)
    lost = Q(state__in=[XRun.State.QUEUED, XRun.State.RUNNING], updated_at__lt=stale) | Q(
        state=XRun.State.WAITING, wait_until__lt=stale
    )
    return transition_rows(model.objects.filter(lost), XRun.State.FAILED, error=error, finished_at=now)


def task_runs_expire(*, now: dt.datetime | None = None) -> int:
    """Fail the runs whose worker was lost (as fetch_runs_expire), so the next one can start."""
    return lost_runs_fail(XTaskRun, error="The worker was lost; the next run starts again.", now=now)


@transaction.atomic
def task_run_request(*, kind: str, user: User | None) -> tuple[XTaskRun, bool]:
    """The admin's "Fill imported posts' text now" / "Follow notes back now": one run of a kind at a
    time (asking again returns the active one); the task is queued after commit. No X call here."""
    task_runs_expire()
    active = XTaskRun.objects.select_for_update().filter(kind=kind, state__in=XTaskRun.ACTIVE).first()
    if active is not None:
        return active, False
    run = XTaskRun.objects.create(kind=kind, requested_by=user)
    enqueue_on_commit(TASK_OF_KIND[XTaskRun.Kind(kind)], run.pk)
    return run, True


def task_run_begin(*, kind: str, run_id: int | None) -> XTaskRun | None:
    """The task's run, claimed as RUNNING: the queued one (`run_id`), or for beat a new one unless
    a run of this kind is active. None: nothing to do (another run has it, or it ended)."""
    if run_id is None:
        task_runs_expire()
        if XTaskRun.objects.filter(kind=kind, state__in=XTaskRun.ACTIVE).exists():
            return None
        run = XTaskRun.objects.create(kind=kind)
    else:
        queued = XTaskRun.objects.filter(pk=run_id, kind=kind).first()
        if queued is None or queued.state not in XTaskRun.ACTIVE:
            return None
        run = queued
    run.transition(XTaskRun.State.RUNNING)
    run.wait_until = None
    run.save(update_fields=["state", "wait_until", "updated_at"])
    return run


def task_run_progress(run: XTaskRun, *, counts: dict[str, Any], total: int | None = None) -> None:
    run.counts = counts
    if total is not None:
        run.total = total
    run.save(update_fields=["counts", "total", "updated_at"])


def task_run_end(run: XTaskRun, *, state: str, counts: dict[str, Any] | None = None, error: str = "",
                 wait_until: float | None = None) -> None:  # fmt: skip
    """DONE or FAILED (finished), or WAITING until X's reset (`wait_until`, epoch seconds)."""
    run.transition(state)
    if counts is not None:
        run.counts = counts
    run.error = error[:2000]
    run.wait_until = dt.datetime.fromtimestamp(wait_until, tz=dt.UTC) if wait_until is not None else None
    if state in (XTaskRun.State.DONE, XTaskRun.State.FAILED):
        run.finished_at = timezone.now()
    run.save(update_fields=["state", "counts", "error", "wait_until", "finished_at", "updated_at"])
