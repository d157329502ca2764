from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from crowdnotes_site.lib.communitynotes.research import jury_download as de
from crowdnotes_site.lib.communitynotes.research import jury_sample as se
from crowdnotes_site.lib.communitynotes.research import phm_training as dt
from crowdnotes_site.lib.communitynotes.supernotes import evaluation, phm
from evidence.embedding import MINILM
from notes.supernotes.services import embedder

SAMPLE = settings.SHARED_DATA_DIR / "communitynotes" / "colin-fraser"
REFERENCE = settings.SHARED_DATA_DIR / "communitynotes" / "shiruken" / "scoredNotes_2023-02-18.tsv"


class Command(BaseCommand):
    help = (
        "Precision@1 of the simulated jury against the best note: --synthetic (known truth) or --sample (the "
        "public colin-fraser 2021 notes and ratings, posts grouped by tweetId, folds by post, two truths, beside "
        "one-line rules, over several seeds), or --download FOLDER (a whole download after research_download: its "
        "scored notes as the truth, the scorer and the PHM fitted without the held-out posts). --store keeps the "
        "--sample table for the Supernotes evaluation page."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        which = parser.add_mutually_exclusive_group(required=True)
        which.add_argument("--synthetic", action="store_true")
        which.add_argument("--sample", action="store_true")
        which.add_argument(
            "--download", type=Path, default=None, metavar="FOLDER",
            help="a download folder after `manage.py research_download FOLDER`",
        )  # fmt: skip
        parser.add_argument("--seed", type=int, default=None, help="one seed (--sample: instead of --seeds)")
        parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4], help="--sample: the seeds")
        parser.add_argument(
            "--posts", type=int, default=None, help="at most this many posts (default: 60 synthetic, all sample)"
        )
        parser.add_argument("--ratings", type=int, default=60_000, help="--synthetic: ratings to generate")
        parser.add_argument("--notes-per-post", type=int, default=4, help="--synthetic")
        parser.add_argument("--jurors", type=int, default=200)
        parser.add_argument("--epochs", type=int, default=None, help="default: 6 synthetic; --sample: at most 20")
        parser.add_argument("--notes", default=str(SAMPLE / "notes-00000.tsv"), help="--sample: notes TSV")
        parser.add_argument(
            "--ratings-file", default=str(SAMPLE / "ratings-00000.tsv"), help="--sample: ratings TSV or folder"
        )
        parser.add_argument(
            "--reference", default=str(REFERENCE), help="--sample: the full-data truth (scoredNotes TSV; '' for none)"
        )
        parser.add_argument(
            "--folds", type=int, default=None,
            help="posts split into this many held-out folds (default 5 --sample; 1 --download: all posts held out at once)",
        )  # fmt: skip
        parser.add_argument(
            "--embedder", default=None,
            help=f"{MINILM} (the --sample default) or {phm.HASHING} (no model; the --download default)",
        )  # fmt: skip
        parser.add_argument(
            "--cache-dir", default=str(settings.MODEL_CACHE_DIR / "jury-embeddings"),
            help="--sample: where the notes' embedding vectors are kept between runs",
        )  # fmt: skip
        parser.add_argument(
            "--groups", default=",".join(se.ALL_GROUPS),
            help=f"--sample: note feature groups beside the embedding (of {', '.join(se.ALL_GROUPS)}; '' for none)",
        )  # fmt: skip
        parser.add_argument("--no-embedding", action="store_true", help="--sample: the features without the embedding")
        parser.add_argument(
            "--ensemble", type=int, default=se.Setting.ensemble,
            help="PHMs (per fold with --sample) trained with different seeds, their per-rater probabilities averaged",
        )  # fmt: skip
        parser.add_argument("--draws", type=int, default=se.Setting.draws, help="jury draws per candidate")
        parser.add_argument(
            "--ablation", action="store_true", help="--sample: also each input group left out, and each alone"
        )
        parser.add_argument(
            "--per-post", action="store_true", help="--sample --json: every held-out post (one seed: --seed S)"
        )
        parser.add_argument(
            "--store", nargs="?", const=str(settings.JURY_EVALUATION_FILE), default=None,
            help="--sample: write the table (JSON) where the Supernotes evaluation page reads it "
            "(default JURY_EVALUATION_FILE)",
        )  # fmt: skip
        rule, sample_rule = de.PostRule(), dt.SampleRule()
        parser.add_argument(
            "--max-posts",
            type=int,
            default=rule.max_posts,
            help=f"--download: posts evaluated (default {rule.max_posts:,})",
        )
        parser.add_argument(
            "--posts-seed", type=int, default=rule.seed, help="--download: the seed of the posts' draw (not --seeds)"
        )
        parser.add_argument("--max-notes", type=int, default=sample_rule.max_notes, help="--download: the sample rule")
        parser.add_argument(
            "--max-ratings", type=int, default=sample_rule.max_ratings, help="--download: the sample rule"
        )
        parser.add_argument("--json", action="store_true")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["synthetic"]:
            result = evaluation.evaluate_synthetic(
                seed=options["seed"] or 0, n_ratings=options["ratings"], posts=options["posts"] or 60,
                notes_per_post=options["notes_per_post"], jury_size=options["jurors"], epochs=options["epochs"] or 6,
                members=options["ensemble"], draws=options["draws"],
            )  # fmt: skip
            out = asdict(result)
            out.pop("calibration")
            if options["json"]:
                self.stdout.write(json.dumps(out))
            else:
                for key, value in out.items():
                    self.stdout.write(f"{key}: {value}")
            return
        if options["download"] is not None:
            self._download(options)
            return
        self._sample(options)

    def _download(self, options: dict[str, Any]) -> None:
        unsupported = [flag for flag, key in (("--ablation", "ablation"), ("--store", "store"), ("--posts", "posts"),
                                              ("--no-embedding", "no_embedding")) if options[key]]  # fmt: skip
        if unsupported or options["groups"] != ",".join(se.ALL_GROUPS):
            raise CommandError(
                f"--download takes neither {', '.join(unsupported) or '--groups'} (its inputs are train_phm "
                "--download's; --max-posts caps the posts)"
            )
        name = options["embedder"] or phm.HASHING
        try:
            model_embed = embedder(name)
        except Exception as exc:  # an unknown or missing model
            raise CommandError(f"Cannot load the embedder {name!r}: {exc}") from exc
        cache = Path(options["cache_dir"]) if options["cache_dir"] and name != phm.HASHING else None

        def embed(texts: Sequence[str]) -> np.ndarray:
            return se.cached_embedding(texts, model_embed, name, cache)

        seeds = [options["seed"]] if options["seed"] is not None else options["seeds"]
        if options["per_post"] and len(seeds) != 1:
            raise CommandError("--per-post lists one seed's picks: give --seed S.")
        opts = de.Options(
            folds=options["folds"] or 1,
            jury_size=options["jurors"], epochs=options["epochs"] or 4, max_notes=options["max_notes"],
            max_ratings=options["max_ratings"],
        )  # fmt: skip
        say = self.stderr.write
        try:
            posts = de.load_posts(
                options["download"], de.PostRule(options["max_posts"], options["posts_seed"]), embed=embed,
                embedder=name, say=say,
            )  # fmt: skip
            if not posts.posts:
                raise CommandError(f"{options['download']}: no post with >= 2 candidate notes ({posts.counts})")
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

    def _sample(self, options: dict[str, Any]) -> None:
        options["embedder"] = options["embedder"] or MINILM
        options["folds"] = options["folds"] or 5
        try:
            embed = embedder(options["embedder"])
        except Exception as exc:  # an unknown or missing model
            raise CommandError(f"Cannot load the embedder {options['embedder']!r}: {exc}") from exc
        groups = tuple(g for g in options["groups"].split(",") if g)
        unknown = set(groups) - set(se.ALL_GROUPS)
        if unknown:
            raise CommandError(f"Unknown feature groups {sorted(unknown)}; known: {', '.join(se.ALL_GROUPS)}")
        seeds = [options["seed"]] if options["seed"] is not None else options["seeds"]
        if options["per_post"] and len(seeds) != 1:
            raise CommandError("--per-post lists one seed's picks: give --seed S.")
        sample = se.load_sample(
            options["notes"], options["ratings_file"], options["reference"] or None, embed=embed,
            embedder=options["embedder"], cache_dir=Path(options["cache_dir"]) if options["cache_dir"] else None,
        )  # fmt: skip
        if options["ensemble"] < 1 or options["draws"] < 1:
            raise CommandError("--ensemble and --draws need at least 1.")
        setting = se.Setting(
            groups=groups, embedding=not options["no_embedding"], epochs=options["epochs"] or 20,
            ensemble=options["ensemble"], draws=options["draws"],
        )  # fmt: skip

        def runs_for(s: se.Setting) -> list[se.SeedRun]:
            return [
                se.run_seed(sample, seed=seed, folds=options["folds"], setting=s, jury_size=options["jurors"],
                            max_posts=options["posts"])
                for seed in seeds
            ]  # fmt: skip

        runs = runs_for(setting)
        summary = se.summarise(sample, runs, setting)
        out: dict[str, Any] = {"summary": summary}
        if options["ablation"]:
            out["ablation"] = [
                se.ablation_row(s, summary if s == setting else se.summarise(sample, runs_for(s), s))
                for s in se.ablation_settings(setting)
            ]
        if options["per_post"]:
            out["seed"] = seeds[0]
            out["posts"] = se.per_post(sample, runs[0])
        if options["store"]:
            stored = {
                "measured_at": timezone.now().isoformat(timespec="seconds"),
                "command": _command_line(options, seeds),
                **{k: v for k, v in out.items() if k != "posts"},
            }
            path = Path(options["store"])
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(stored, indent=1))
        if options["json"]:
            self.stdout.write(json.dumps(out))
            return
        for line in se.table_lines(summary):
            self.stdout.write(line)
        if "ablation" in out:
            self.stdout.write("")
            for line in se.ablation_lines(out["ablation"]):
                self.stdout.write(line)


def _command_line(options: dict[str, Any], seeds: list[int]) -> str:
    """The command that reproduces the stored table (the data files named when they are not the defaults)."""
    groups = options["groups"] or "''"
    parts = [
        "python manage.py evaluate_jury --sample", "--seeds " + " ".join(map(str, seeds)),
        f"--embedder {options['embedder']}", f"--folds {options['folds']}", f"--jurors {options['jurors']}",
        f"--groups {groups}",
    ]  # fmt: skip
    parts += ["--no-embedding"] * options["no_embedding"] + ["--ablation"] * options["ablation"]
    if options["posts"]:
        parts.append(f"--posts {options['posts']}")
    if options["epochs"]:
        parts.append(f"--epochs {options['epochs']}")
    if options["ensemble"] != se.Setting.ensemble:
        parts.append(f"--ensemble {options['ensemble']}")
    if options["draws"] != se.Setting.draws:
        parts.append(f"--draws {options['draws']}")
    if options["notes"] != str(SAMPLE / "notes-00000.tsv"):
        parts.append(f"--notes {options['notes']}")
    if options["ratings_file"] != str(SAMPLE / "ratings-00000.tsv"):
        parts.append(f"--ratings-file {options['ratings_file']}")
    return " ".join(parts) + " --store"
