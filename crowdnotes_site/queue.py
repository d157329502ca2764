"""The one way work is queued: `enqueue_on_commit("app.tasks.name", *args)`, through a transactional outbox.

Every service that starts a Celery task calls this instead of `task.delay`, naming the task by its
registered name, so no service imports a tasks module (nor an app above its own: a lower layer
starts work above it this way, without importing it). The intent is stored
as an `OutboxMessage` row in the caller's transaction, so it exists exactly when the rows it
works on exist (a rolled-back transaction queues nothing). After the commit, one attempt sends
it to the broker; if the broker is unreachable the row stays pending and the periodic dispatcher
(`outbox_dispatch`, a beat task) delivers it once the broker is back. Nothing raises into the
request: the page says the work will start when the worker queue is reachable. User actions are
idempotent themselves (a retried contribution reuses its draft and skips known URLs, so it adds
no intent), and tasks are idempotent (claims and leases), so a message sent twice after a crash
is harmless.

Fair ordering of the CPU queue across users: a caller that knows whose work it queues passes
`owner=user_id`. The message then gets a broker priority equal to how many messages that owner
queued on the same queue in the last FAIR_QUEUE_WINDOW_S seconds (capped at the last priority step). On the Redis
broker every priority is its own list and a worker always takes from the lowest-numbered non-empty
one (settings: priority_steps 0..9, prefetch 1, acks late), so everybody's first message is served
before anybody's second: one user's 20 submissions no longer delay another user's first. Within
one owner, later messages get equal or larger numbers, so each user's work stays first in, first
out (each list is FIFO). Work without an owner (beat tasks, sweeps) keeps priority 0.
"""

from __future__ import annotations

import fnmatch
import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from crowdnotes_site.models import OutboxMessage

if TYPE_CHECKING:
    from celery import Celery

log = logging.getLogger(__name__)


def broker_app() -> Celery:
    """The configured Celery app, imported on the first send: Celery (with kombu, billiard, click)
    costs ~0.3 s to import, and most processes (commands, a web worker between enqueues) never send."""
    from crowdnotes_site.celery import app  # deferred: Celery loads on the first send only

    return app


def outbox_key(task_name: str, args: Iterable[Any] = (), kwargs: dict[str, Any] | None = None) -> str:
    """What makes two intents identical: the task and its JSON arguments."""
    key = f"{task_name}:{json.dumps(list(args), separators=(',', ':'))}"
    if kwargs:
        key += json.dumps(kwargs, sort_keys=True, separators=(",", ":"))
    return key[:300]


@dataclass(frozen=True)
class Enqueued:
    """The on-commit callback: which task (its registered name), with which arguments (tests compare
    it), and its outbox row."""

    task: str
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    message_id: int | None = field(default=None, compare=False)
    priority: int | None = field(default=None, compare=False)

    def __call__(self) -> None:
        if self.message_id is None:
            return
        # The row is locked while it is sent, so the dispatcher (SKIP LOCKED) never sends it too.
        with transaction.atomic():
            pending = OutboxMessage.objects.select_for_update(skip_locked=True).filter(
                pk=self.message_id, delivered_at__isnull=True
            )
            if not pending.exists():
                return  # the dispatcher has it
            try:
                # By name, like the dispatcher: routes apply by name (settings.CELERY_TASK_ROUTES), and
                # `send_task` is looked up at commit time, so a test that patches it sees the call.
                broker_app().send_task(self.task, args=self.args, kwargs=self.kwargs, **_options(self.priority))
            except Exception as exc:  # any broker failure: the dispatcher retries, the request goes on
                _record_failure([self.message_id], exc)
                return
            _mark_delivered([self.message_id])


def _record_failure(ids: list[int], exc: BaseException) -> None:
    log.warning("broker unreachable; %d task(s) stay in the outbox: %s", len(ids), exc)
    OutboxMessage.objects.filter(pk__in=ids, delivered_at__isnull=True).update(
        attempts=F("attempts") + 1, last_error=f"{type(exc).__name__}: {exc}"[:2000]
    )


def _mark_delivered(ids: list[int]) -> None:
    OutboxMessage.objects.filter(pk__in=ids, delivered_at__isnull=True).update(
        delivered_at=timezone.now(), attempts=F("attempts") + 1
    )


def _options(priority: int | None) -> dict[str, Any]:
    return {} if priority is None else {"priority": priority}


def queue_of(task_name: str) -> str:
    """The queue a task is routed to (settings.CELERY_TASK_ROUTES, first matching pattern, as
    Celery's router reads the glob patterns), or the default queue."""
    for pattern, route in settings.CELERY_TASK_ROUTES.items():
        if fnmatch.fnmatchcase(task_name, pattern):
            return str(route.get("queue", ""))
    return str(getattr(settings, "CELERY_TASK_DEFAULT_QUEUE", "celery"))


def fair_priority(owner: int, task_name: str | None = None) -> int:
    """The broker priority of `owner`'s next message: how many messages the owner queued within
    FAIR_QUEUE_WINDOW_S, capped at the last priority step (0 = served first). With `task_name`,
    only the owner's messages on that task's queue count: each queue is its own line, so evidence
    pages waiting on the CPU queue do not push the owner's pre-flight behind others on the LLM's."""
    since = timezone.now() - timedelta(seconds=settings.FAIR_QUEUE_WINDOW_S)
    recent = OutboxMessage.objects.filter(owner_id=owner, created_at__gte=since)
    if task_name is not None:
        queue = queue_of(task_name)
        names = set(recent.values_list("task_name", flat=True).distinct())
        recent = recent.filter(task_name__in=[name for name in names if queue_of(name) == queue])
    return min(recent.count(), settings.FAIR_QUEUE_PRIORITY_STEPS - 1)


def _store(
    task_name: str, args: tuple[Any, ...], kwargs: dict[str, Any], owner: int | None, priority: int | None = None
) -> OutboxMessage:
    key = outbox_key(task_name, args, kwargs)
    if priority is None and owner is not None:
        priority = fair_priority(owner, task_name)
    return OutboxMessage.objects.create(
        task_name=task_name, args=list(args), kwargs=kwargs, key=key, owner_id=owner, priority=priority
    )


def enqueue_on_commit(
    task: str, *args: Any, owner: int | None = None, priority: int | None = None, **kwargs: Any
) -> Enqueued:
    """Store the task named `task` with `(*args, **kwargs)` in the outbox now and send it once the
    current transaction commits (at once outside one). `owner` (a user id) puts the message in that
    user's fair turn; `priority` sets the broker priority instead (e.g. the last step for long work
    nobody started, so that it waits behind people's work)."""
    row = _store(task, args, kwargs, owner, priority)
    callback = Enqueued(task, args, kwargs, message_id=row.pk, priority=row.priority)
    transaction.on_commit(callback)
    return callback


def outbox_waiting(keys: Iterable[str]) -> set[str]:
    """Which of these intents are stored but not yet handed to the broker."""
    keys = list(keys)
    if not keys:
        return set()
    return set(OutboxMessage.objects.filter(key__in=keys, delivered_at__isnull=True).values_list("key", flat=True))


def outbox_dispatch(*, limit: int = 500) -> dict[str, int]:
    """Send pending outbox messages to the broker, oldest first (the beat task `outbox_dispatch`).

    Messages younger than OUTBOX_GRACE_S are left to their own on-commit attempt. Rows are locked
    (SKIP LOCKED) so two dispatchers never send the same message; the first broker error stops
    the round (the next one retries)."""
    cutoff = timezone.now() - timedelta(seconds=settings.OUTBOX_GRACE_S)
    sent = 0
    with transaction.atomic():
        rows = list(
            OutboxMessage.objects.select_for_update(skip_locked=True)
            .filter(delivered_at__isnull=True, created_at__lte=cutoff)
            .order_by("created_at")[:limit]
        )
        for row in rows:
            try:
                broker_app().send_task(row.task_name, args=row.args, kwargs=row.kwargs, **_options(row.priority))
            except Exception as exc:
                _record_failure([row.pk], exc)
                break
            _mark_delivered([row.pk])
            sent += 1
    pending = OutboxMessage.objects.filter(delivered_at__isnull=True).count()
    return {"sent": sent, "pending": pending}


def outbox_prune(*, days: int = 7) -> int:
    """Delete delivered messages older than `days` (the table only needs the pending ones)."""
    cutoff = timezone.now() - timedelta(days=days)
    deleted, _ = OutboxMessage.objects.filter(delivered_at__lt=cutoff).delete()
    return deleted
