"""Site-wide periodic tasks (beat): the outbox dispatcher."""

from __future__ import annotations

from celery import shared_task

from crowdnotes_site import queue


@shared_task(name="crowdnotes_site.tasks.outbox_dispatch", ignore_result=True)
def outbox_dispatch() -> dict[str, int]:
    """Deliver the outbox messages whose on-commit attempt failed (broker down at the time)."""
    result = queue.outbox_dispatch()
    queue.outbox_prune()
    return result
