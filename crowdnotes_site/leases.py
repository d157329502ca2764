"""Leases with heartbeats for background work (snippet processing, drafting, and the claimed runs:
judge runs, automation runs, Supernote runs, scoring runs).

A worker that claims a row sets its `lease_until`; while the work runs, a heartbeat thread pushes
the lease forward every third of WORK_LEASE_S. A worker that dies (SIGKILL, OOM, lost machine)
stops renewing, the lease expires, and the periodic sweeper (`crowdnotes_site.tasks.work_sweep`)
puts the work back in the queue, where the claim lets exactly one worker take it again.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F, Model, Q
from django.db.models.functions import Coalesce
from django.utils import timezone

from crowdnotes_site.transitions import transition_rows

log = logging.getLogger(__name__)


def lease_deadline() -> datetime:
    return timezone.now() + timedelta(seconds=settings.WORK_LEASE_S)


@contextmanager
def heartbeat(model: type[Model], pk: int, *, field: str = "lease_until") -> Iterator[None]:
    """Renew `model(pk).<field>` (a lease deadline) every WORK_LEASE_S / 3 seconds until the block
    ends. A row whose lease was cleared (work handed back or finished) is left alone."""
    stop = threading.Event()
    interval = max(settings.WORK_LEASE_S / 3, 0.5)
    live = {f"{field}__isnull": False}

    def beat() -> None:
        try:
            while not stop.wait(interval):
                model._default_manager.filter(pk=pk, **live).update(**{field: lease_deadline()})
        except Exception:  # a database hiccup: the lease may lapse and the sweeper re-queues; never crash the work
            log.exception("lease heartbeat of %s %s failed", model.__name__, pk)
        finally:
            connection.close()  # this thread's own connection

    thread = threading.Thread(target=beat, name=f"lease-{model.__name__}-{pk}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=interval + 5)


# --- Claimed runs (JudgeRun, AutomationRun, SupernoteRun, RevisionRun, ScoringRun) --------------
# Such a model has `State` (QUEUED, RUNNING, DONE, FAILED) and its `TRANSITIONS` table (every state
# change below goes through it: crowdnotes_site.transitions), `claimed_until`, `attempts`,
# `started_at`, `finished_at` and `error`. A worker claims one stage (or slice) of the run with a
# compare-and-set, holds `claimed_until` WORK_LEASE_S ahead with `heartbeat(model, pk,
# field="claimed_until")` while it works, and hands the run back (QUEUED, claim cleared) with the
# next stage queued. A worker that dies stops renewing; `runs_sweep` (beat: work_sweep) puts the
# run back in the queue once the claim has expired, so recovery is bounded by WORK_LEASE_S +
# WORK_SWEEP_INTERVAL_S (90 s by default), not by the broker's visibility timeout (1 hour).


def run_claim(model: type[Model], *, run_id: int, lease_s: float | None = None) -> bool:
    """Compare-and-set: take the run if it is queued, or running under an expired claim (its worker
    was lost). Exactly one of several concurrent callers wins. The claim lasts `lease_s`
    (WORK_LEASE_S by default); keep it alive with `heartbeat(..., field="claimed_until")`."""
    state = model.State  # type: ignore[attr-defined]
    now = timezone.now()
    if lease_s is None:
        lease_s = settings.WORK_LEASE_S
    claimable = Q(state=state.QUEUED) | Q(state=state.RUNNING, claimed_until__lt=now)
    return bool(
        transition_rows(
            model._default_manager.filter(claimable, pk=run_id),
            state.RUNNING,
            claimed_until=now + timedelta(seconds=lease_s),
            attempts=F("attempts") + 1,
            started_at=Coalesce(F("started_at"), now),
        )
    )


def run_fail(model: type[Model], *, run_id: int, error: str) -> None:
    """Visible failure: the run stops with its error (unless it already ended: done, or failed before)."""
    state = model.State  # type: ignore[attr-defined]
    transition_rows(
        model._default_manager.filter(pk=run_id),
        state.FAILED,
        claimed_until=None,
        error=error[:2000],
        finished_at=timezone.now(),
    )


def runs_sweep(model: type[Model], requeue: Callable[[int], object]) -> list[int]:
    """Hand back the runs whose worker stopped renewing its claim (beat: work_sweep): each such run
    goes back to QUEUED with its claim cleared, then `requeue(pk)` queues its next delivery. The
    compare-and-set per row means two sweepers never re-queue the same run twice."""
    state = model.State  # type: ignore[attr-defined]
    now = timezone.now()
    expired = model._default_manager.filter(state=state.RUNNING, claimed_until__lt=now)
    swept: list[int] = []
    for pk in expired.values_list("pk", flat=True):
        with transaction.atomic():
            expired_run = model._default_manager.filter(pk=pk, state=state.RUNNING, claimed_until__lt=now)
            if transition_rows(expired_run, state.QUEUED, claimed_until=None):
                requeue(pk)
                swept.append(pk)
    if swept:
        log.warning("re-queued %s %s of lost workers", model.__name__, swept)
    return swept
