"""Leases with heartbeats for background work (snippet processing, drafting).

A worker that claims a row sets its `lease_until`; while the work runs, a heartbeat thread pushes
the lease forward every third of WORK_LEASE_S. A worker that dies (SIGKILL, OOM, lost machine)
stops renewing, the lease expires, and the periodic sweeper (`crowdnotes_site.tasks.work_sweep`)
puts the work back in the queue, where the claim lets exactly one worker take it again.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection
from django.db.models import F, Model, Q
from django.db.models.functions import Coalesce
from django.utils import timezone

log = logging.getLogger(__name__)


def lease_deadline() -> datetime:
    return timezone.now() + timedelta(seconds=settings.WORK_LEASE_S)


@contextmanager
def heartbeat(model: type[Model], pk: int) -> Iterator[None]:
    """Renew `model(pk).lease_until` every WORK_LEASE_S / 3 seconds until the block ends."""
    stop = threading.Event()
    interval = max(settings.WORK_LEASE_S / 3, 0.5)

    def beat() -> None:
        try:
            while not stop.wait(interval):
                model._default_manager.filter(pk=pk, lease_until__isnull=False).update(lease_until=lease_deadline())
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


# --- Claimed runs (JudgeRun, AutomationRun): a lease set at claim time, no heartbeat --------------
# Such a model has `State` (QUEUED, RUNNING, DONE, FAILED), `claimed_until`, `attempts`,
# `started_at`, `finished_at` and `error`.


def run_claim(model: type[Model], *, run_id: int, lease_s: float) -> bool:
    """Compare-and-set: take the run if it is queued, or running under an expired claim (its worker
    was lost). Exactly one of several concurrent callers wins."""
    state = model.State  # type: ignore[attr-defined]
    now = timezone.now()
    claimable = Q(state=state.QUEUED) | Q(state=state.RUNNING, claimed_until__lt=now)
    return bool(
        model._default_manager.filter(claimable, pk=run_id).update(
            state=state.RUNNING,
            claimed_until=now + timedelta(seconds=lease_s),
            attempts=F("attempts") + 1,
            started_at=Coalesce(F("started_at"), now),
        )
    )


def run_fail(model: type[Model], *, run_id: int, error: str) -> None:
    """Visible failure: the run stops with its error (unless it already finished)."""
    state = model.State  # type: ignore[attr-defined]
    model._default_manager.filter(pk=run_id).exclude(state=state.DONE).update(
        state=state.FAILED, claimed_until=None, error=error[:2000], finished_at=timezone.now()
    )
