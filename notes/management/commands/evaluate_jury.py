"""`manage.py evaluate_jury --real`: the Supernote jury's Precision@1 on the real Community Notes
folder's posts (folds by post, several seeds), beside random and one-line rules
(crowdnotes_site.lib.communitynotes.research.real_jury); `--store` keeps the table for the
Supernotes evaluation page."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from crowdnotes_site.lib.communitynotes.data import real
from crowdnotes_site.lib.communitynotes.research import real_jury as rj
from crowdnotes_site.lib.communitynotes.supernotes import jury

OTHER_COMMANDS = (
    "Give --real for the real Community Notes folder; the other evaluations are evaluate_jury_synthetic "
    "(simulated ratings), evaluate_jury_sample (the public 2021 sample) and evaluate_jury_download (a download folder)."
)


def real_evaluation_file() -> Path:
    """Where `--store` writes the table and the Supernotes evaluation page reads it."""
    return Path(settings.JURY_REAL_DIR) / rj.EVALUATION_FILE


class Command(BaseCommand):
    help = (
        "Precision@1 of the Supernote jury on the real Community Notes folder's posts (--real; folds by post, "
        "several seeds), beside random and one-line rules. --store keeps the table for the Supernotes evaluation page."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--real", action="store_true", help="evaluate on the real folder (COMMUNITYNOTES_REAL_DIR)")
        parser.add_argument("--folder", default=None, help="the real folder (default COMMUNITYNOTES_REAL_DIR)")
        parser.add_argument("--seeds", type=int, default=5, help="how many seeds (0, 1, ...)")
        parser.add_argument("--folds", type=int, default=5)
        parser.add_argument("--jurors", type=int, default=jury.DEFAULT_JURY_SIZE)
        parser.add_argument("--draws", type=int, default=jury.DEFAULT_DRAWS, help="jury draws per note")
        parser.add_argument(
            "--store", nargs="?", const="", default=None,
            help="write the table (JSON) where the Supernotes evaluation page reads it (default JURY_REAL_DIR/evaluation.json)",
        )  # fmt: skip
        parser.add_argument("--json", action="store_true")

    def handle(self, *args: Any, **options: Any) -> None:
        if not options["real"]:
            raise CommandError(OTHER_COMMANDS)
        if options["seeds"] < 1 or options["folds"] < 2 or options["draws"] < 1 or options["jurors"] < 1:
            raise CommandError("--seeds, --draws and --jurors need at least 1, --folds at least 2.")
        folder = Path(options["folder"] or settings.COMMUNITYNOTES_REAL_DIR)
        try:
            data = rj.load(folder)
        except real.RealDataError as exc:
            raise CommandError(str(exc)) from exc
        if len(data.posts) < options["folds"]:
            raise CommandError(
                f"{folder}: {len(data.posts)} posts with a truth, fewer than --folds {options['folds']}."
            )
        setting = rj.Setting(jury_size=options["jurors"], draws=options["draws"], folds=options["folds"])
        runs = [rj.run_seed(data, seed=seed, setting=setting) for seed in range(options["seeds"])]
        summary = rj.summarise(data, runs, setting)
        summary["command"] = (
            f"manage.py evaluate_jury --real --seeds {options['seeds']} --folds {options['folds']} "
            f"--jurors {options['jurors']} --draws {options['draws']}"
        )
        if options["store"] is not None:
            path = Path(options["store"]) if options["store"] else real_evaluation_file()
            path.parent.mkdir(parents=True, exist_ok=True)
            stored = {"measured_at": timezone.now().isoformat(timespec="seconds"), **summary}
            path.write_text(json.dumps(stored, indent=1), encoding="utf-8")
        if options["json"]:
            self.stdout.write(json.dumps(summary))
            return
        for line in rj.table_lines(summary):
            self.stdout.write(line)
