"""Leases with heartbeats for background work (snippet processing, drafting, and the claimed runs:
judge runs, pre-flights, automation runs, Supernote runs, revision runs, scoring runs), and the
sweeps that recover the work of lost workers.

A worker that claims a row sets its `lease_until`; while the work runs, a heartbeat thread pushes
the lease forward every third of WORK_LEASE_S. A worker that dies (SIGKILL, OOM, lost machine)
stops renewing, the lease expires, and the periodic sweeper (`crowdnotes_site.tasks.work_sweep`)
puts the work back in the queue, where the claim lets exactly one worker take it again.

A claimed run is a model that inherits `ClaimedRun` (its claim fields and its default transitions
table); `run_claim`, `run_fail` and `runs_sweep` work on any of them. Each sweep is registered with
`@sweep(name)` where it is defined, and `work_sweep` calls every registered one.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import ClassVar, TypeVar

from django.conf import settings
from django.db import connection, models, transaction
from django.db.models import F, Model, Q
from django.db.models.functions import Coalesce
from django.utils import timezone

from crowdnotes_site.lib.transitions import RUN_STEPS, Transitions
from crowdnotes_site.transitions import Stateful, transition_rows

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


# --- Claimed runs --------------------------------------------------------------------------------
# A worker claims one stage (or slice) of the run with a compare-and-set, holds `claimed_until`
# WORK_LEASE_S ahead with `heartbeat(model, pk, field="claimed_until")` while it works, and hands the
# run back (QUEUED, claim cleared) with the next stage queued; every state change goes through the
# model's `TRANSITIONS` (crowdnotes_site.transitions). A worker that dies stops renewing; `runs_sweep`
# (beat: work_sweep) puts the run back in the queue once the claim has expired, so recovery is bounded
# by WORK_LEASE_S + WORK_SWEEP_INTERVAL_S (90 s by default), not by the broker's visibility timeout
# (1 hour).


class ClaimedRun(Stateful, models.Model):
    """A run that workers claim one stage (or slice) at a time (JudgeRun, PreflightCheck,
    AutomationRun, SupernoteRun, RevisionRun, ScoringRun): its state, its claim and its error.

    A run model with more states declares its own `State`, `state` field and `TRANSITIONS`; one whose
    failed runs may be queued again declares its own `TRANSITIONS`."""

    class State(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"

    # Claimed and handed back until it is done or failed; nothing follows those (RUN_STEPS).
    TRANSITIONS: ClassVar[Transitions] = Transitions("run", RUN_STEPS)

    state = models.CharField(max_length=10, choices=State.choices, default=State.QUEUED, db_index=True)
    error = models.TextField(blank=True)
    # The worker's claim, renewed by its heartbeat; past it (the worker was lost) the sweeper
    # re-queues the run, or a task delivered again takes it over.
    claimed_until = models.DateTimeField(null=True, blank=True)
    # Claims taken: the runs that bound them (the *_MAX_CLAIMS settings) fail a run whose workers keep dying.
    attempts = models.PositiveSmallIntegerField(default=0)
    started_at = models.DateTimeField(null=True, blank=True)  # the first claim
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        abstract = True


def run_claim(model: type[ClaimedRun], *, run_id: int, lease_s: float | None = None) -> bool:
    """Compare-and-set: take the run if it is queued, or running under an expired claim (its worker
    was lost). Exactly one of several concurrent callers wins. The claim lasts `lease_s`
    (WORK_LEASE_S by default); keep it alive with `heartbeat(..., field="claimed_until")`."""
    state = model.State
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


def run_fail(model: type[ClaimedRun], *, run_id: int, error: str) -> None:
    """Visible failure: the run stops with its error (unless it already ended: done, or failed before)."""
    state = model.State
    transition_rows(
        model._default_manager.filter(pk=run_id),
        state.FAILED,
        claimed_until=None,
        error=error[:2000],
        finished_at=timezone.now(),
    )


def runs_sweep(model: type[ClaimedRun], requeue: Callable[[int], object]) -> list[int]:
    """Hand back the runs whose worker stopped renewing its claim (beat: work_sweep): each such run
    goes back to QUEUED with its claim cleared, then `requeue(pk)` queues its next delivery. The
    compare-and-set per row means two sweepers never re-queue the same run twice."""
    state = model.State
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


# --- The sweeps (beat: crowdnotes_site.tasks.work_sweep) ------------------------------------------
# Each sweep is registered where it is defined, under the name work_sweep reports its ids by:
#
#     @leases.sweep("scoring_runs")
#     def scoring_runs_sweep() -> list[int]: ...
#
# so a new kind of leased work adds its sweep in one place. Its module must be imported by its app's
# tasks module (as every services module with work for a worker is): a worker imports those at start.

Sweep = Callable[[], list[int]]
SweepT = TypeVar("SweepT", bound=Sweep)

SWEEPS: dict[str, Sweep] = {}


def sweep(name: str) -> Callable[[SweepT], SweepT]:
    """Register the decorated function as the work sweep `name`: called without arguments, it hands
    back the work of lost workers and returns the ids it re-queued. A name belongs to one function."""

    def register(function: SweepT) -> SweepT:
        known = SWEEPS.get(name)
        if known is not None and known.__qualname__ != function.__qualname__:
            raise ValueError(f"two sweeps are named {name!r}: {known.__qualname__} and {function.__qualname__}")
        SWEEPS[name] = function
        return function

    return register
