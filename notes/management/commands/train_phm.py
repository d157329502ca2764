from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from evidence.embedding import MINILM
from notes.supernotes import phm, services


class Command(BaseCommand):
    help = "Train the personalized helpfulness model on the database's ratings, store it, print AUC and calibration."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--embedder", default=MINILM, help=f"{MINILM} (default) or {phm.HASHING} (no model)")
        parser.add_argument("--epochs", type=int, default=8)
        parser.add_argument("--max-ratings", type=int, default=None)
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument("--json", action="store_true")

    def handle(self, *args: Any, **options: Any) -> None:
        model = services.phm_train_from_db(
            embedder_name=options["embedder"], epochs=options["epochs"], max_ratings=options["max_ratings"],
            seed=options["seed"],
        )  # fmt: skip
        m = model.meta
        if options["json"]:
            self.stdout.write(json.dumps({"version": m.version, "auc": m.auc, "trained_on": m.trained_on,
                                          "n_ratings": m.n_ratings, "holdout_ratings": m.holdout_ratings,
                                          "train_seconds": m.train_seconds, "calibration": m.calibration}))  # fmt: skip
            return
        self.stdout.write(f"PHM {m.version} ({m.embedder}) trained on {m.trained_on}")
        self.stdout.write(f"{m.n_ratings} training ratings, {m.holdout_ratings} held-out ratings (other notes)")
        self.stdout.write(f"held-out AUC (helpful vs not helpful): {m.auc:.3f}; training {m.train_seconds:.1f} s")
        self.stdout.write("P(helpful) bin | count | mean predicted | observed helpful share")
        for row in m.calibration:
            self.stdout.write(f"{row['bin']} | {row['count']} | {row['mean_predicted']:.3f} | {row['observed']:.3f}")
