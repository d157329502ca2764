"""Unpack and load the embedding model and build its pre-filter table, so the first snippet is not
slow. Prints each step and the table's progress. With --in-slices (the demo's warm-up) the table
is built by the cpu worker in slices queued behind people's work, and this command waits for it."""

from __future__ import annotations

import time
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from evidence import services, warmup
from evidence.matching import ensure_model_files, static_table_path, static_vectors


class Command(BaseCommand):
    help = "Prepare the configured embedding model (unpack, load, distil the pre-filter table) in MODEL_CACHE_DIR."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--model", default=None, help="defaults to EMBEDDING_MODEL")
        parser.add_argument(
            "--in-slices",
            action="store_true",
            help="queue the table's build on the cpu worker in slices behind people's work, and wait for it",
        )
        parser.add_argument(
            "--stalled-after",
            type=float,
            default=600.0,
            help="with --in-slices: queue a slice again after this many seconds without progress",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        config = services.match_config(**({"model_name": options["model"]} if options["model"] else {}))
        started = time.monotonic()

        def say(text: str) -> None:
            self.stdout.write(f"[{time.monotonic() - started:5.1f}s] {text}")
            self.stdout.flush()

        if options["in_slices"]:
            say(f"1/2 unpacking the embedding model {config.model_name} in {config.cache_dir}…")
            ensure_model_files(config.model_name, config.cache_dir)
            say("2/2 pre-filter table: queued in slices on the cpu worker, behind people's work…")
            self._wait_for_slices(config.model_name, options["stalled_after"], say)
            say(f"{config.model_name}: ready in {config.cache_dir}")
            return
        say(f"1/2 loading the embedding model {config.model_name} (unpacked in {config.cache_dir} on first use)…")
        matcher = services.get_matcher(config)
        say("2/2 pre-filter table (one vector per vocabulary token; computed once, then read from disk)…")
        shown = [-1]

        def progress(done: int, total: int) -> None:
            tenth = done * 10 // total
            if tenth > shown[0]:
                shown[0] = tenth
                say(f"    pre-filter table {done * 100 // total:3d}% ({done:,} / {total:,} tokens)")

        table = static_vectors(matcher.model, config.model_name, config.cache_dir, progress=progress)
        say(f"{config.model_name}: ready in {config.cache_dir} (pre-filter table {table.shape[0]} tokens)")

    def _wait_for_slices(self, model_name: str, stalled_after: float, say: Any) -> None:
        path = static_table_path(model_name, services.match_config(model_name=model_name).cache_dir)
        warmup.table_warmup_start(model_name=model_name)
        last, moved = -1, time.monotonic()
        while not path.exists():
            progress = warmup.table_warmup_progress(model_name=model_name)
            done = progress.done if progress else 0
            if done != last:
                last, moved = done, time.monotonic()
                if progress and progress.total:
                    say(
                        f"    pre-filter table {done * 100 // progress.total:3d}% ({done:,} / {progress.total:,} tokens)"
                    )
            elif time.monotonic() - moved > stalled_after:
                say(f"    no progress for {stalled_after:.0f} s (a lost worker?): queuing a slice again")
                warmup.table_warmup_start(model_name=model_name)
                moved = time.monotonic()
            time.sleep(2)
