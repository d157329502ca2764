from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from evidence.embedding import MINILM
from notes.supernotes import evaluation, phm
from notes.supernotes.services import embedder

SAMPLE = settings.SHARED_DATA_DIR / "communitynotes" / "colin-fraser"


class Command(BaseCommand):
    help = (
        "Precision@1 of the simulated jury against the empirically best note: --synthetic (known truth) or "
        "--sample (the public colin-fraser 2021 notes and ratings, posts grouped by tweetId, k-fold held out)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        which = parser.add_mutually_exclusive_group(required=True)
        which.add_argument("--synthetic", action="store_true")
        which.add_argument("--sample", action="store_true")
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument(
            "--posts", type=int, default=None, help="at most this many posts (default: 60 synthetic, all sample)"
        )
        parser.add_argument("--ratings", type=int, default=60_000, help="--synthetic: ratings to generate")
        parser.add_argument("--notes-per-post", type=int, default=4, help="--synthetic")
        parser.add_argument("--jurors", type=int, default=200)
        parser.add_argument("--epochs", type=int, default=6)
        parser.add_argument("--notes", default=str(SAMPLE / "notes-00000.tsv"), help="--sample: notes TSV")
        parser.add_argument(
            "--ratings-file", default=str(SAMPLE / "ratings-00000.tsv"), help="--sample: ratings TSV or folder"
        )
        parser.add_argument("--folds", type=int, default=5, help="--sample: posts split into this many held-out folds")
        parser.add_argument(
            "--embedder", default=MINILM, help=f"--sample: {MINILM} (default) or {phm.HASHING} (no model)"
        )
        parser.add_argument("--per-post", action="store_true", help="--sample --json: include every post's outcome")
        parser.add_argument("--json", action="store_true")

    def handle(self, *args: Any, **options: Any) -> None:
        out: dict[str, Any]
        if options["synthetic"]:
            result = evaluation.evaluate_synthetic(
                seed=options["seed"], n_ratings=options["ratings"], posts=options["posts"] or 60,
                notes_per_post=options["notes_per_post"], jury_size=options["jurors"], epochs=options["epochs"],
            )  # fmt: skip
            out = asdict(result)
            out.pop("calibration")
        else:
            try:
                embed = embedder(options["embedder"])
            except Exception as exc:  # an unknown or missing model
                raise CommandError(f"Cannot load the embedder {options['embedder']!r}: {exc}") from exc
            sample = evaluation.evaluate_sample(
                options["notes"], options["ratings_file"], embed=embed, embedder=options["embedder"],
                folds=options["folds"], max_posts=options["posts"], jury_size=options["jurors"],
                epochs=options["epochs"], seed=options["seed"],
            )  # fmt: skip
            out = asdict(sample)
            if not options["per_post"]:
                out.pop("posts")
        if options["json"]:
            self.stdout.write(json.dumps(out))
            return
        for key, value in out.items():
            if key != "posts":
                self.stdout.write(f"{key}: {value}")
