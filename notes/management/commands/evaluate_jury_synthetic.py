"""`manage.py evaluate_jury_synthetic [--seed N] [--posts P] --json`: the jury's Precision@1 against the
best note on synthetic data with a known truth."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from crowdnotes_site.lib.communitynotes.research import jury_sample as se
from crowdnotes_site.lib.communitynotes.supernotes import evaluation


class Command(BaseCommand):
    help = "Precision@1 of the simulated jury against the best note, on synthetic data (a known truth)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument("--posts", type=int, default=60, help="posts to generate")
        parser.add_argument("--ratings", type=int, default=60_000, help="ratings to generate")
        parser.add_argument("--notes-per-post", type=int, default=4)
        parser.add_argument("--jurors", type=int, default=200)
        parser.add_argument("--epochs", type=int, default=6)
        parser.add_argument(
            "--ensemble", type=int, default=se.Setting.ensemble,
            help="PHMs trained with different seeds, their per-rater probabilities averaged",
        )  # fmt: skip
        parser.add_argument("--draws", type=int, default=se.Setting.draws, help="jury draws per candidate")
        parser.add_argument("--json", action="store_true")

    def handle(self, *args: Any, **options: Any) -> None:
        result = evaluation.evaluate_synthetic(
            seed=options["seed"], n_ratings=options["ratings"], posts=options["posts"],
            notes_per_post=options["notes_per_post"], jury_size=options["jurors"], epochs=options["epochs"],
            members=options["ensemble"], draws=options["draws"],
        )  # fmt: skip
        out = asdict(result)
        out.pop("calibration")
        if options["json"]:
            self.stdout.write(json.dumps(out))
        else:
            for key, value in out.items():
                self.stdout.write(f"{key}: {value}")
