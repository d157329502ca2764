from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from crowdnotes_site.lib.communitynotes.research import phm_training as download_training
from crowdnotes_site.lib.communitynotes.supernotes import phm
from evidence.embedding import MINILM
from notes.supernotes import services


class Command(BaseCommand):
    help = (
        "Train the personalized helpfulness model on the database's ratings (or, with --download FOLDER, on a "
        "stated sample of a whole public download after research_download), store it, print AUC and calibration."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--embedder", default=None,
            help=f"{MINILM} (default on the database) or {phm.HASHING} (no model; the default with --download)",
        )  # fmt: skip
        parser.add_argument("--epochs", type=int, default=None, help="8 on the database, 4 with --download")
        parser.add_argument("--max-ratings", type=int, default=None)
        parser.add_argument("--download", type=Path, default=None,
                            help="a download folder after `manage.py research_download FOLDER`")  # fmt: skip
        rule = download_training.SampleRule()
        parser.add_argument("--max-notes", type=int, default=rule.max_notes,
                            help=f"--download: notes kept (default {rule.max_notes:,})")  # fmt: skip
        parser.add_argument("--batch-size", type=int, default=4096, help="--download: ratings per step")
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument("--json", action="store_true")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["download"] is not None:
            model = self.from_download(options)
        else:
            model = services.phm_train_from_db(
                embedder_name=options["embedder"] or MINILM, epochs=options["epochs"] or 8,
                max_ratings=options["max_ratings"], seed=options["seed"],
            )  # fmt: skip
        m = model.meta
        if options["json"]:
            self.stdout.write(json.dumps({"version": m.version, "auc": m.auc, "trained_on": m.trained_on,
                                          "n_ratings": m.n_ratings, "holdout_ratings": m.holdout_ratings,
                                          "train_seconds": m.train_seconds, "calibration": m.calibration,
                                          "training_data": m.extra.get("training_data")}))  # fmt: skip
            return
        self.stdout.write(f"PHM {m.version} ({m.embedder}) trained on {m.trained_on}")
        if "training_data" in m.extra:
            self.stdout.write(f"sample rule: {m.extra['training_data']['sample_rule']}")
        self.stdout.write(f"{m.n_ratings} training ratings, {m.holdout_ratings} held-out ratings (other notes)")
        self.stdout.write(f"held-out AUC (helpful vs not helpful): {m.auc:.3f}; training {m.train_seconds:.1f} s")
        self.stdout.write("P(helpful) bin | count | mean predicted | observed helpful share")
        for row in m.calibration:
            self.stdout.write(f"{row['bin']} | {row['count']} | {row['mean_predicted']:.3f} | {row['observed']:.3f}")

    def from_download(self, options: dict[str, Any]) -> phm.PHM:
        default = download_training.SampleRule()
        rule = download_training.SampleRule(
            max_notes=options["max_notes"], max_ratings=options["max_ratings"] or default.max_ratings,
            seed=options["seed"],
        )  # fmt: skip
        name = options["embedder"] or phm.HASHING
        try:
            model = download_training.train(
                options["download"], rule, embed=services.embedder(name), embedder=name,
                epochs=options["epochs"] or 4, batch_size=options["batch_size"], say=self.stdout.write,
            )  # fmt: skip
        except download_training.DownloadError as exc:
            raise CommandError(str(exc)) from exc
        target = phm.save(model, services.phm_dir())
        self.stdout.write(f"saved {target}")
        return model
