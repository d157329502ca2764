"""`manage.py evaluate_jury_sample`: the jury's Precision@1 on the public colin-fraser 2021 notes and
ratings (posts grouped by tweetId, folds by post, two truths), beside one-line rules, over several
seeds (crowdnotes_site.lib.communitynotes.research.jury_sample); `--store` keeps the table for the
Supernotes evaluation page."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from crowdnotes_site.lib.communitynotes.research import jury_sample as se
from crowdnotes_site.lib.communitynotes.supernotes import phm
from evidence.embedding import MINILM
from notes.management.commands._jury import add_seed_arguments, embedder_or_error, seeds_of

SAMPLE = settings.SHARED_DATA_DIR / "communitynotes" / "colin-fraser"
REFERENCE = settings.SHARED_DATA_DIR / "communitynotes" / "shiruken" / "scoredNotes_2023-02-18.tsv"
EPOCHS = 20


class Command(BaseCommand):
    help = (
        "Precision@1 of the simulated jury against the best note on the public colin-fraser 2021 notes and ratings "
        "(posts grouped by tweetId, folds by post, two truths), beside one-line rules, over several seeds. --store "
        "keeps the table for the Supernotes evaluation page."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        add_seed_arguments(parser)
        parser.add_argument("--posts", type=int, default=None, help="at most this many posts (default: all)")
        parser.add_argument("--jurors", type=int, default=200)
        parser.add_argument("--epochs", type=int, default=None, help=f"at most this many (default {EPOCHS})")
        parser.add_argument("--notes", default=str(SAMPLE / "notes-00000.tsv"), help="notes TSV")
        parser.add_argument("--ratings-file", default=str(SAMPLE / "ratings-00000.tsv"), help="ratings TSV or folder")
        parser.add_argument(
            "--reference", default=str(REFERENCE), help="the full-data truth (scoredNotes TSV; '' for none)"
        )
        parser.add_argument("--folds", type=int, default=5, help="posts split into this many held-out folds")
        parser.add_argument("--embedder", default=MINILM, help=f"{MINILM} (the default) or {phm.HASHING} (no model)")
        parser.add_argument(
            "--cache-dir", default=str(settings.MODEL_CACHE_DIR / "jury-embeddings"),
            help="where the notes' embedding vectors are kept between runs",
        )  # fmt: skip
        parser.add_argument(
            "--groups", default=",".join(se.ALL_GROUPS),
            help=f"note feature groups beside the embedding (of {', '.join(se.ALL_GROUPS)}; '' for none)",
        )  # fmt: skip
        parser.add_argument("--no-embedding", action="store_true", help="the features without the embedding")
        parser.add_argument(
            "--ensemble", type=int, default=se.Setting.ensemble,
            help="PHMs per fold trained with different seeds, their per-rater probabilities averaged",
        )  # fmt: skip
        parser.add_argument("--draws", type=int, default=se.Setting.draws, help="jury draws per candidate")
        parser.add_argument("--ablation", action="store_true", help="also each input group left out, and each alone")
        parser.add_argument(
            "--store", nargs="?", const=str(settings.JURY_EVALUATION_FILE), default=None,
            help="write the table (JSON) where the Supernotes evaluation page reads it (default JURY_EVALUATION_FILE)",
        )  # fmt: skip
        parser.add_argument("--json", action="store_true")

    def handle(self, *args: Any, **options: Any) -> None:
        embed = embedder_or_error(options["embedder"])
        groups = tuple(g for g in options["groups"].split(",") if g)
        unknown = set(groups) - set(se.ALL_GROUPS)
        if unknown:
            raise CommandError(f"Unknown feature groups {sorted(unknown)}; known: {', '.join(se.ALL_GROUPS)}")
        seeds = seeds_of(options)
        sample = se.load_sample(
            options["notes"], options["ratings_file"], options["reference"] or None, embed=embed,
            embedder=options["embedder"], cache_dir=Path(options["cache_dir"]) if options["cache_dir"] else None,
        )  # fmt: skip
        if options["ensemble"] < 1 or options["draws"] < 1:
            raise CommandError("--ensemble and --draws need at least 1.")
        setting = se.Setting(
            groups=groups, embedding=not options["no_embedding"], epochs=options["epochs"] or EPOCHS,
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
        "python manage.py evaluate_jury_sample", "--seeds " + " ".join(map(str, seeds)),
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
