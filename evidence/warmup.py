"""The warm-up's pre-filter table built in slices on the cpu queue, so it yields to people: each
slice computes a batch of vocabulary tokens and queues the next one behind the work queued
meanwhile (at the last broker priority on Redis; at the back of the queue on the filesystem
broker, which keeps first in, first out). A person's match meanwhile ranks passages without the
table (evidence.matching.prerank) instead of building it beside the slices."""

from __future__ import annotations

import time
from dataclasses import dataclass

from django.conf import settings

from crowdnotes_site.banners import duration
from crowdnotes_site.queue import enqueue_on_commit
from evidence import services
from evidence.embedding import build_timings
from evidence.matching import TableProgress, static_table_path, static_table_slice, table_plan, table_progress

TASK = "evidence.tasks.prefilter_table_slice"
# Batches of evidence.matching.TABLE_BATCH tokens per slice: the longest a person's task waits
# behind the warm-up on a worker that runs one task at a time.
SLICE_BATCHES = 1


def _last_priority() -> int:
    return int(settings.FAIR_QUEUE_PRIORITY_STEPS) - 1


def table_warmup_start(*, model_name: str | None = None) -> None:
    """Plan the table's build and queue its first slice (nothing when the table exists)."""
    config = services.match_config(**({"model_name": model_name} if model_name else {}))
    if static_table_path(config.model_name, config.cache_dir).exists():
        return
    table_plan(config.model_name, config.cache_dir)
    enqueue_on_commit(TASK, config.model_name, priority=_last_priority())


def table_warmup_slice(*, model_name: str) -> TableProgress:
    """One slice; the next one is queued behind what people queued meanwhile. A slice that could
    not advance (another process holds the build) ends the chain: the holder finishes the table."""
    config = services.match_config(model_name=model_name)
    matcher = services.get_matcher(config)
    done = static_table_slice(matcher.model, config.model_name, config.cache_dir, batches=SLICE_BATCHES)
    if done.advanced and not done.finished:
        enqueue_on_commit(TASK, config.model_name, priority=_last_priority())
    return done


def table_warmup_progress(*, model_name: str | None = None) -> TableProgress | None:
    """How far the slices got (None: the table exists, or no build was planned)."""
    config = services.match_config(**({"model_name": model_name} if model_name else {}))
    return table_progress(config.model_name, config.cache_dir)


@dataclass(frozen=True)
class TableWait:
    """What a page waiting on the warm-up's table says: how far it got, for how long, and how long
    the last build on this machine took (None: never measured here)."""

    done: int
    total: int | None
    running_seconds: float
    last_seconds: float | None

    @property
    def running_for(self) -> str:
        return duration(self.running_seconds)

    @property
    def took_last(self) -> str:
        return duration(self.last_seconds) if self.last_seconds is not None else ""


def table_warmup_wait(*, now: float | None = None) -> TableWait | None:
    """The configured model's table while the warm-up builds it in slices, else None."""
    config = services.match_config()
    progress = table_progress(config.model_name, config.cache_dir)
    if progress is None:
        return None
    path = static_table_path(config.model_name, config.cache_dir)
    return TableWait(
        done=progress.done,
        total=progress.total,
        running_seconds=max(0.0, (now or time.time()) - progress.since),
        last_seconds=build_timings(path.parent).get(path.name),
    )
