"""Train the helpfulness judge on the crowd's final verdicts (the real Community Notes folder),
report it on posts held out, and save it for the helpfulness stage and `judge_helpfulness`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from crowdnotes_site.lib.communitynotes.data import real
from crowdnotes_site.lib.llm import classifier as clf
from judging.services import helpfulness_classifier_train


class Command(BaseCommand):
    help = (
        "Train the helpfulness judge on the mature Helpful / Not Helpful verdicts of the real Community Notes "
        "folder; print its held-out table (folds by post) beside 'cites a URL' and 'always helpful'; save it."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--folder", type=Path, default=None, help="default: COMMUNITYNOTES_REAL_DIR")
        parser.add_argument("--output-dir", type=Path, default=None, help="default: HELPFULNESS_CLASSIFIER_DIR")
        parser.add_argument("--seeds", type=int, default=5, help="held-out evaluation seeds (0: train only)")
        parser.add_argument("--ablations", action="store_true", help="also each input left out (3 seeds each)")
        parser.add_argument("--json", action="store_true", help="print the report as JSON")

    def handle(self, *args: Any, **opts: Any) -> None:
        folder: Path = opts["folder"] or Path(settings.COMMUNITYNOTES_REAL_DIR)
        try:
            examples = clf.real_examples(real.read_notes(folder))
            report = clf.evaluate(examples, seeds=opts["seeds"]) if opts["seeds"] > 0 else None
            ablations = clf.ablations(examples) if opts["ablations"] else None
            model = helpfulness_classifier_train(
                folder=folder,
                directory=opts["output_dir"] or Path(settings.HELPFULNESS_CLASSIFIER_DIR),
                examples=examples,
            )
        except (real.RealDataError, ValueError) as exc:
            raise CommandError(f"cannot train: {exc}") from exc
        if opts["json"]:
            self.stdout.write(json.dumps({"version": model.version, "report": report, "ablations": ablations}))
            return
        self.stdout.write(
            f"model {model.version} saved: {model.metadata['n']} notes "
            f"({model.metadata['n_not_helpful']} Not Helpful), years {model.metadata['years']}"
        )
        if report:
            self.stdout.write("\n".join(clf.table_lines(report)))
        for row in ablations or []:
            self.stdout.write(
                f"{row['inputs']}: macro-F1 {row['macro_f1']:.3f}, on the notes that cite a URL {row['macro_f1_cites_url']:.3f}"
            )
