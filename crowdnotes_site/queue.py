"""The one way work is queued: `enqueue_on_commit(task, *args)`.

Every service that starts a Celery task calls this instead of `task.delay` so a task never runs
before the rows it reads are committed (and a rolled-back transaction queues nothing). Keeping
every enqueue behind this one function lets it later become a transactional outbox.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.db import transaction


@dataclass(frozen=True)
class Enqueued:
    """The on-commit callback: which task, with which arguments (tests compare it)."""

    task: Any
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)

    def __call__(self) -> None:
        # `task.delay` is looked up at commit time, so a test that patches it sees the call.
        self.task.delay(*self.args, **self.kwargs)


def enqueue_on_commit(task: Any, *args: Any, **kwargs: Any) -> Enqueued:
    """Queue `task(*args, **kwargs)` once the current transaction commits (at once outside one)."""
    callback = Enqueued(task, args, kwargs)
    transaction.on_commit(callback)
    return callback
