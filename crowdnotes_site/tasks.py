"""Site-wide periodic task (beat): the outbox dispatcher. The sweeper of expired work leases
(`crowdnotes_site.tasks.work_sweep`) and the pruning of finished work
(`crowdnotes_site.tasks.prune_finished_work`) call app services, so they are defined in
notes/tasks.py (the top app) under these same registered names."""

from __future__ import annotations

from celery import shared_task

from crowdnotes_site import queue


@shared_task(name="crowdnotes_site.tasks.outbox_dispatch", ignore_result=True)
def outbox_dispatch() -> dict[str, int]:
    """Deliver the outbox messages whose on-commit attempt failed (broker down at the time)."""
    result = queue.outbox_dispatch()
    queue.outbox_prune()
    return result
