"""Site-wide periodic tasks (beat): the outbox dispatcher and the sweeper of expired work leases.
The pruning of finished work (`crowdnotes_site.tasks.prune_finished_work`) calls app services, so it
is defined in notes/tasks.py (the top app) under this same registered name."""

from __future__ import annotations

from celery import shared_task
from django.utils.module_loading import autodiscover_modules

from crowdnotes_site import leases, queue


@shared_task(name="crowdnotes_site.tasks.outbox_dispatch", ignore_result=True)
def outbox_dispatch() -> dict[str, int]:
    """Deliver the outbox messages whose on-commit attempt failed (broker down at the time)."""
    result = queue.outbox_dispatch()
    queue.outbox_prune()
    return result


@shared_task(name="crowdnotes_site.tasks.work_sweep", ignore_result=True)
def work_sweep() -> dict[str, list[int]]:
    """Re-queue the work whose worker was lost (lease or claim expired), and the judge runs an LLM
    outage failed once the LLM answers again: every sweep registered with `leases.sweep`, by name,
    with the ids it swept."""
    # A sweep registers when its module is imported, which its app's tasks module does. A worker has
    # imported every tasks module (Celery's autodiscovery); a direct call (a shell, a test) imports them here.
    autodiscover_modules("tasks")
    return {name: run() for name, run in sorted(leases.SWEEPS.items())}
