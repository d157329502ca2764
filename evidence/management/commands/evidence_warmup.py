"""Unpack and load the embedding model and build its pre-filter table, so the first snippet is not
slow. Prints each step and the table's progress (the demo runs it on first start: 1-2 minutes)."""

from __future__ import annotations

import time
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from evidence import services
from evidence.matching import static_vectors


class Command(BaseCommand):
    help = "Prepare the configured embedding model (unpack, load, distil the pre-filter table) in MODEL_CACHE_DIR."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--model", default=None, help="defaults to EMBEDDING_MODEL")

    def handle(self, *args: Any, **options: Any) -> None:
        config = services.match_config(**({"model_name": options["model"]} if options["model"] else {}))
        started = time.monotonic()

        def say(text: str) -> None:
            self.stdout.write(f"[{time.monotonic() - started:5.1f}s] {text}")
            self.stdout.flush()

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
