"""Train the local helpfulness judge from crowd-labelled notes and report held-out metrics."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from crowdnotes_site.lib import status as note_status
from crowdnotes_site.lib.llm import classifier as clf
from crowdnotes_site.lib.llm.steps import judges
from crowdnotes_site.lib.text_rules import find_urls
from evidence.embedding import encoder
from judging.models import JudgeRun

DEFAULT_DATA = settings.SHARED_DATA_DIR / "communitynotes"


def _app_notes() -> list[clf.LabelledNote]:
    """The app's own notes the scorer rated Helpful / Not Helpful."""
    helpful, not_helpful = note_status.CURRENTLY_RATED_HELPFUL, note_status.CURRENTLY_RATED_NOT_HELPFUL
    note_model = JudgeRun._meta.get_field("note").related_model  # notes.Note (notes sits above judging)
    rows = note_model._default_manager.filter(status__in=[helpful, not_helpful]).values_list("pk", "text", "status")
    return [clf.LabelledNote(f"app:{pk}", text, status == helpful, "app") for pk, text, status in rows]


def _heuristic(text: str) -> bool:
    return bool(judges.helpfulness_baseline(post="", note=text, urls=find_urls(text)).value)


class Command(BaseCommand):
    help = "Train the helpfulness classifier (sentence embeddings + logistic regression) on crowd labels."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--data-dir", type=Path, default=DEFAULT_DATA, help="public Community Notes samples")
        parser.add_argument(
            "--with-ratio-labels",
            action="store_true",
            help="add 2021 notes labelled by the early Birdwatch ratio rule from raw ratings (weaker labels)",
        )
        parser.add_argument("--no-app-notes", action="store_true", help="ignore the app's own scored notes")
        parser.add_argument("--output-dir", type=Path, default=None, help="default: HELPFULNESS_CLASSIFIER_DIR")
        parser.add_argument("--embedding-model", default="all-MiniLM-L6-v2")
        parser.add_argument("--test-size", type=float, default=0.25)
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument("--json", action="store_true", help="print the metrics as JSON")

    def handle(self, *args: Any, **opts: Any) -> None:
        data_dir: Path = opts["data_dir"]
        if not data_dir.is_dir():
            raise CommandError(f"no Community Notes data at {data_dir}: pass --data-dir")
        examples = [] if opts["no_app_notes"] else _app_notes()
        examples += clf.load_status_labelled_notes(data_dir)
        if opts["with_ratio_labels"]:
            examples += clf.load_ratio_labelled_notes(data_dir)
        try:
            model, metrics = clf.train(
                examples,
                embed=encoder(opts["embedding_model"]),
                embedding_model=opts["embedding_model"],
                test_size=opts["test_size"],
                seed=opts["seed"],
                baselines={"majority (always helpful)": lambda t: True, "heuristic baseline judge": _heuristic},
            )
        except ValueError as exc:
            raise CommandError(f"cannot train: {exc}") from exc
        target = clf.save(model, opts["output_dir"] or Path(settings.HELPFULNESS_CLASSIFIER_DIR))
        if opts["json"]:
            self.stdout.write(json.dumps({"version": model.version, "path": str(target), **model.metadata["metrics"]}))
            return
        m = metrics
        self.stdout.write(f"model {model.version} saved to {target}")
        self.stdout.write(
            f"examples: {m.n_examples} ({m.n_helpful} helpful, {m.n_not_helpful} not helpful); "
            f"train {m.n_train}, held-out {m.n_test}"
        )
        self.stdout.write(f"held-out macro-F1 {m.macro_f1:.3f}, macro-accuracy {m.macro_accuracy:.3f}")
        self.stdout.write(f"5-fold CV macro-F1 {m.cv_macro_f1_mean:.3f} ± {m.cv_macro_f1_std:.3f}")
        for name, value in m.baselines_macro_f1.items():
            self.stdout.write(f"  for comparison, {name}: held-out macro-F1 {value:.3f}")
