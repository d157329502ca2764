from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from notes.supernotes import evaluation


class Command(BaseCommand):
    help = "Precision@1 of the simulated jury against the empirically best note (synthetic population)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--synthetic", action="store_true")
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument("--posts", type=int, default=60)
        parser.add_argument("--ratings", type=int, default=60_000)
        parser.add_argument("--notes-per-post", type=int, default=4)
        parser.add_argument("--jurors", type=int, default=200)
        parser.add_argument("--json", action="store_true")

    def handle(self, *args: Any, **options: Any) -> None:
        if not options["synthetic"]:
            raise CommandError("Only --synthetic is implemented (see README: Supernotes, not done).")
        result = evaluation.evaluate_synthetic(
            seed=options["seed"], n_ratings=options["ratings"], posts=options["posts"],
            notes_per_post=options["notes_per_post"], jury_size=options["jurors"],
        )  # fmt: skip
        out = asdict(result)
        if options["json"]:
            out.pop("calibration")
            self.stdout.write(json.dumps(out))
            return
        for key, value in out.items():
            if key != "calibration":
                self.stdout.write(f"{key}: {value}")
