"""Site-wide periodic tasks (beat): the outbox dispatcher, the sweeper of expired work leases and
the pruning of finished short-lived work."""

from __future__ import annotations

from celery import shared_task

from crowdnotes_site import queue


@shared_task(name="crowdnotes_site.tasks.outbox_dispatch", ignore_result=True)
def outbox_dispatch() -> dict[str, int]:
    """Deliver the outbox messages whose on-commit attempt failed (broker down at the time)."""
    result = queue.outbox_dispatch()
    queue.outbox_prune()
    return result


@shared_task(name="crowdnotes_site.tasks.work_sweep", ignore_result=True)
def work_sweep() -> dict[str, list[int]]:
    """Re-queue the work whose worker was lost (lease or claim expired): snippet processing, snippet
    refines, drafts, judge runs, automation runs, Supernote runs and scoring runs."""
    from evidence.search.services import automation_runs_sweep
    from evidence.snippets import snippet_refines_sweep, snippets_sweep
    from judging.services import judge_runs_sweep
    from notes.services import draft_jobs_sweep, scoring_runs_sweep
    from notes.supernotes.services import supernote_runs_sweep

    return {
        "snippets": snippets_sweep(),
        "refines": snippet_refines_sweep(),
        "drafts": draft_jobs_sweep(),
        "judge_runs": judge_runs_sweep(),
        "automation_runs": automation_runs_sweep(),
        "supernote_runs": supernote_runs_sweep(),
        "scoring_runs": scoring_runs_sweep(),
    }


@shared_task(name="crowdnotes_site.tasks.prune_finished_work", ignore_result=True)
def prune_finished_work() -> dict[str, int]:
    """Delete finished pre-flights and head starts older than FINISHED_WORK_RETENTION_DAYS, so
    that these tables do not grow for ever."""
    from django.conf import settings

    from evidence.prefetch import prefetch_prune
    from judging.services import preflight_prune

    days = settings.FINISHED_WORK_RETENTION_DAYS
    return {"preflights": preflight_prune(days=days), "prefetches": prefetch_prune(days=days)}
