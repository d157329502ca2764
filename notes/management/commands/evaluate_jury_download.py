"""`manage.py evaluate_jury_download FOLDER`: the jury's Precision@1 on a whole download after
research_download, its scored notes as the truth, the scorer and the PHM fitted without the held-out
posts (crowdnotes_site.lib.communitynotes.research.jury_download)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from crowdnotes_site.lib.communitynotes.research import jury_download as de
from crowdnotes_site.lib.communitynotes.research import jury_sample as se
from crowdnotes_site.lib.communitynotes.research import phm_training as dt
from crowdnotes_site.lib.communitynotes.supernotes import phm
from evidence.embedding import MINILM
from notes.management.commands._jury import add_seed_arguments, embedder_or_error, seeds_of


class Command(BaseCommand):
    help = (
        "Precision@1 of the simulated jury against the best note on a whole download after research_download: its "
        "scored notes as the truth, the scorer and the PHM fitted without the held-out posts."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("folder", type=Path, help="a download folder after `manage.py research_download FOLDER`")
        add_seed_arguments(parser)
        parser.add_argument("--jurors", type=int, default=200)
        parser.add_argument("--epochs", type=int, default=4)
        parser.add_argument(
            "--folds", type=int, default=1, help="posts split into this many held-out folds (1: all held out at once)"
        )
        parser.add_argument(
            "--embedder", default=phm.HASHING, help=f"{phm.HASHING} (no model; the default) or {MINILM}"
        )
        parser.add_argument(
            "--cache-dir", default=str(settings.MODEL_CACHE_DIR / "jury-embeddings"),
            help="where the notes' embedding vectors are kept between runs (not for the hashing embedding)",
        )  # fmt: skip
        rule, sample_rule = de.PostRule(), dt.SampleRule()
        parser.add_argument(
            "--max-posts", type=int, default=rule.max_posts, help=f"posts evaluated (default {rule.max_posts:,})"
        )
        parser.add_argument(
            "--posts-seed", type=int, default=rule.seed, help="the seed of the posts' draw (not --seeds)"
        )
        parser.add_argument("--max-notes", type=int, default=sample_rule.max_notes, help="the sample rule")
        parser.add_argument("--max-ratings", type=int, default=sample_rule.max_ratings, help="the sample rule")
        parser.add_argument("--json", action="store_true")

    def handle(self, *args: Any, **options: Any) -> None:
        name = options["embedder"]
        model_embed = embedder_or_error(name)
        cache = Path(options["cache_dir"]) if options["cache_dir"] and name != phm.HASHING else None

        def embed(texts: Sequence[str]) -> np.ndarray:
            return se.cached_embedding(texts, model_embed, name, cache)

        seeds = seeds_of(options)
        opts = de.Options(
            folds=options["folds"], jury_size=options["jurors"], epochs=options["epochs"],
            max_notes=options["max_notes"], max_ratings=options["max_ratings"],
        )  # fmt: skip
        say = self.stderr.write
        try:
            posts = de.load_posts(
                options["folder"], de.PostRule(options["max_posts"], options["posts_seed"]), embed=embed,
                embedder=name, say=say,
            )  # fmt: skip
            if not posts.posts:
                raise CommandError(f"{options['folder']}: no post with >= 2 candidate notes ({posts.counts})")
            evaluation_ = de.Evaluation(posts, opts, embed=embed, say=say)
            runs = [evaluation_.run_seed(seed) for seed in seeds]
        except dt.DownloadError as exc:
            raise CommandError(str(exc)) from exc
        summary = se.summarise(posts, runs, de.setting(opts))
        summary["download"] = de.describe(posts, opts, evaluation_, runs)
        out: dict[str, Any] = {"summary": summary}
        if options["per_post"]:
            out["seed"] = seeds[0]
            out["posts"] = se.per_post(posts, runs[0])
        if options["json"]:
            self.stdout.write(json.dumps(out))
            return
        for line in de.table_lines(summary):
            self.stdout.write(line)
