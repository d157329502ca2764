"""Judge notes' helpfulness with the model trained on the crowd's verdicts, one JSON line a note."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from crowdnotes_site.lib import jsonlines
from crowdnotes_site.lib.communitynotes.data import real
from crowdnotes_site.lib.llm import classifier as clf
from judging.services import helpfulness_classifier, helpfulness_classifier_train

FIELDS = ("noteId", "summary")


def read_notes(lines: list[str]) -> list[tuple[str, clf.JudgedNote]]:
    """(noteId, note) per line of `{"noteId", "summary", "post_text", "lang", "classification"}`."""
    out = []
    for number, obj in jsonlines.read_objects(lines, required=FIELDS):
        note_id = obj["noteId"]
        if not isinstance(note_id, (str, int)) or isinstance(note_id, bool) or not str(note_id).strip():
            raise jsonlines.JsonLinesError(f"line {number}: 'noteId' must be a non-empty string or number")
        note = clf.JudgedNote.from_summary(
            jsonlines.text_field(number, obj, "summary", required=True),
            post_text=jsonlines.text_field(number, obj, "post_text", required=False),
            lang=jsonlines.text_field(number, obj, "lang", required=False),
            classification=jsonlines.text_field(number, obj, "classification", required=False),
        )
        out.append((str(note_id), note))
    return out


class Command(BaseCommand):
    help = (
        "Judge each note of a JSON-lines file ({noteId, summary, post_text, lang, classification}) with the "
        "helpfulness model trained on the crowd's verdicts; print {noteId, helpful, score} per line. With no "
        "saved model it trains one from the real Community Notes folder first (about a minute)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--notes", required=True, help="a JSON-lines file, or - for standard input")
        parser.add_argument("--json", action="store_true", help="JSON lines out (the output is JSON lines either way)")
        parser.add_argument("--folder", type=Path, default=None, help="training data; default: COMMUNITYNOTES_REAL_DIR")

    def handle(self, *args: Any, **opts: Any) -> None:
        try:
            if opts["notes"] == "-":
                lines = sys.stdin.read().splitlines()
            else:
                lines = Path(opts["notes"]).read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            raise CommandError(f"cannot read {opts['notes']}: {exc}") from exc
        try:
            notes = read_notes(lines)
        except jsonlines.JsonLinesError as exc:
            raise CommandError(f"{opts['notes']}: {exc}") from exc
        model = helpfulness_classifier()
        if model is None:
            folder = opts["folder"] or Path(settings.COMMUNITYNOTES_REAL_DIR)
            self.stderr.write(f"no saved helpfulness model: training one from {folder} first")
            try:
                model = helpfulness_classifier_train(folder=folder, directory=Path(settings.HELPFULNESS_CLASSIFIER_DIR))
            except (real.RealDataError, ValueError) as exc:
                raise CommandError(f"cannot train: {exc}") from exc
            self.stderr.write(f"trained and saved {model.version}")
        scores = model.predict_proba([note for _, note in notes])
        for (note_id, _), score in zip(notes, scores, strict=True):
            line = {"noteId": note_id, "helpful": score >= model.threshold, "score": round(score, 6)}
            self.stdout.write(json.dumps(line))
