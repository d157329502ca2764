"""The benchmark run through the task queue (the demo's first start queues it on its dataset): a few
(row, mode) tasks per delivery, each slice re-queued behind people's work, resumable like the
command (the records are the state). Its progress is OUT/progress.json, which the results page shows."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings

from crowdnotes_site.context_processors import BENCHMARK_MARKER, warmup_started
from crowdnotes_site.queue import enqueue_on_commit
from judging.benchmark.dataset import load_dataset
from judging.benchmark.runner import RECORDS, BenchmarkError, Run, read_records, tasks_for

PROGRESS = "progress.json"
QUEUED, WAITING, RUNNING, DONE, FAILED = "queued", "waiting", "running", "done", "failed"
STATE_TEXT = {
    QUEUED: "queued: a worker starts it behind people's work",
    WAITING: "waiting for the demo's warm-up (the evidence index of its pages) to finish",
    RUNNING: "running",
    DONE: "done",
    FAILED: "stopped",
}
TASK = "judging.tasks.benchmark_slice"


class NotReady(Exception):
    """The run must wait (the demo's warm-up is still indexing the pages its automation mode searches)."""


@dataclass(frozen=True)
class Progress:
    dataset: str
    state: str
    done: int  # (row, mode) tasks with a record
    total: int
    updated: str
    message: str = ""

    @property
    def state_text(self) -> str:
        return STATE_TEXT.get(self.state, self.state)

    @property
    def active(self) -> bool:
        return self.state in (QUEUED, WAITING, RUNNING)


def out_dir(dataset: Path) -> Path:
    return Path(settings.BENCHMARK_DIR) / dataset.stem


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def _write(out: Path, **fields: Any) -> None:
    """Store the run's progress; the banner marker (VAR_DIR/benchmark.running, the time the run was
    queued) exists while the run is queued or running."""
    marker = Path(settings.VAR_DIR) / BENCHMARK_MARKER
    if fields["state"] in (DONE, FAILED):
        marker.unlink(missing_ok=True)
    elif not marker.exists():
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.write_text(dt.datetime.now(dt.UTC).strftime("%H:%M"), encoding="utf-8")
    out.mkdir(parents=True, exist_ok=True)
    path = out / PROGRESS
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({**fields, "updated": _now()}, indent=2), encoding="utf-8")
    tmp.replace(path)


def progress_read(out: Path) -> Progress | None:
    try:
        data = json.loads((out / PROGRESS).read_text(encoding="utf-8"))
        return Progress(
            dataset=str(data["dataset"]),
            state=str(data["state"]),
            done=int(data["done"]),
            total=int(data["total"]),
            updated=str(data.get("updated", "")),
            message=str(data.get("message", "")),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def progress_all() -> list[Progress]:
    """The queued runs' progress under BENCHMARK_DIR, the latest first."""
    found = [progress_read(path.parent) for path in Path(settings.BENCHMARK_DIR).glob(f"*/{PROGRESS}")]
    return sorted((p for p in found if p is not None), key=lambda p: p.updated, reverse=True)


def _counts(dataset: Path, modes: Sequence[str]) -> tuple[int, int]:
    """(tasks with a record, tasks in all) of the run on `dataset` with `modes`."""
    rows = load_dataset(dataset)
    tasks = tasks_for(modes, False)
    keys = {(r["row_id"], r["mode"]) for r in read_records(out_dir(dataset) / RECORDS)}
    return sum((row.id, task) in keys for row in rows for task in tasks), len(rows) * len(tasks)


def _enqueue(dataset: Path, modes: Sequence[str]) -> None:
    """The next slice, at the lowest priority: behind every person's queued work."""
    enqueue_on_commit(TASK, str(dataset), list(modes), priority=settings.FAIR_QUEUE_PRIORITY_STEPS - 1)


def benchmark_queue(*, dataset: Path, modes: Sequence[str]) -> Progress | None:
    """Queue the run on `dataset` unless it finished (then None). A run left unfinished (stopped
    demo, lost worker, failed tasks) is queued again and goes on where it stopped."""
    out = out_dir(dataset)
    done, total = _counts(dataset, modes)
    if done >= total:
        _write(out, dataset=dataset.name, state=DONE, done=done, total=total, modes=list(modes))
        return None
    _write(out, dataset=dataset.name, state=QUEUED, done=done, total=total, modes=list(modes))
    _enqueue(dataset, modes)
    return progress_read(out)


def benchmark_slice(*, dataset: Path, modes: Sequence[str]) -> Progress:
    """Run the next BENCHMARK_SLICE_TASKS unfinished tasks, write the table, and queue the next
    slice while tasks remain. Raises NotReady while the demo's warm-up runs. A slice that finished
    nothing (every task failed) stops the run: the page says why, the next queueing retries."""
    out = out_dir(dataset)
    done, total = _counts(dataset, modes)
    fields: dict[str, Any] = {"dataset": dataset.name, "total": total, "modes": list(modes)}
    if warmup_started() is not None:
        _write(out, **fields, state=WAITING, done=done)
        raise NotReady(STATE_TEXT[WAITING])
    _write(out, **fields, state=RUNNING, done=done)
    try:
        run = Run(dataset=dataset, rows=load_dataset(dataset), tasks=tasks_for(modes, False), out=out)
        outcome = run.execute(progress=None, limit=settings.BENCHMARK_SLICE_TASKS)
    except BenchmarkError as exc:
        _write(out, **fields, state=FAILED, done=done, message=str(exc))
        return _read(out)
    done += outcome.done
    if outcome.done == 0 and outcome.failed:
        message = f"{len(outcome.failed)} task(s) failed: " + "; ".join(outcome.failed)
        _write(out, **fields, state=FAILED, done=done, message=message)
    elif outcome.remaining or outcome.failed:
        _write(out, **fields, state=QUEUED, done=done)
        _enqueue(dataset, modes)
    else:
        _write(out, **fields, state=DONE, done=done)
    return _read(out)


def _read(out: Path) -> Progress:
    progress = progress_read(out)
    if progress is None:
        raise BenchmarkError(f"{out / PROGRESS} could not be read back")
    return progress
