"""Run the HealthNotes-style benchmark on a JSONL dataset and print the study's table."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from judging.benchmark import table
from judging.benchmark.dataset import DatasetError, load_dataset
from judging.benchmark.runner import BenchmarkError, run_benchmark


class Command(BaseCommand):
    help = (
        "Judge human notes and generate and judge augmented and automated notes for each row of a JSONL "
        "dataset; write every row's inputs and outcomes (OUT/rows.jsonl) and the table (OUT/table.md, "
        "OUT/table.json). Resumable: rerun the same command to finish an interrupted run."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("dataset", type=Path, help="JSONL: post, note, urls, label, note_time per line")
        parser.add_argument(
            "--modes",
            default=",".join(table.MODES),
            help=f"comma-separated, from {', '.join(table.MODES)} (default: all)",
        )
        parser.add_argument(
            "--ablations", action="store_true", help="also automation with one query, and with rank order"
        )
        parser.add_argument("--limit", type=int, default=None, help="only the first N rows")
        parser.add_argument(
            "--out",
            type=Path,
            default=None,
            help="output folder (default BENCHMARK_DIR/<dataset name>; the results page shows runs there)",
        )
        parser.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")

    def handle(self, *args: Any, **opts: Any) -> None:
        dataset: Path = opts["dataset"]
        try:
            rows = load_dataset(dataset)
        except (OSError, DatasetError) as exc:
            raise CommandError(f"{dataset}: {exc}") from exc
        if opts["limit"] is not None:
            if opts["limit"] < 1:
                raise CommandError("--limit must be at least 1")
            rows = rows[: opts["limit"]]
        out = opts["out"] or Path(settings.BENCHMARK_DIR) / dataset.stem
        modes = [m.strip() for m in opts["modes"].split(",") if m.strip()]
        try:
            outcome = run_benchmark(
                dataset=dataset,
                rows=rows,
                modes=modes,
                ablations=opts["ablations"],
                out=out,
                progress=None if opts["no_progress"] else sys.stderr,
            )
        except BenchmarkError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(outcome.markdown)
        self.stdout.write(
            f"\n{outcome.done} task(s) run, {outcome.skipped} already finished; records in {out / 'rows.jsonl'}"
        )
        if outcome.failed:
            for line in outcome.failed:
                self.stderr.write(f"failed (no record; retried on the next run): {line}")
            raise CommandError(f"{len(outcome.failed)} task(s) failed; rerun the command to retry them")
