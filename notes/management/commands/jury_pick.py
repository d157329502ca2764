"""`manage.py jury_pick --posts FILE --json`: for posts never seen, the note the Supernote jury picks
among each post's notes, from the jury trained on the real Community Notes folder alone (trained
and saved first when JURY_REAL_DIR holds none).

Input: JSON lines `{"post": id, "post_text": text or null, "notes": [{"noteId", "summary",
"createdAtMillis", "classification", "lang"}, ...]}`; output: one line per post
`{"post": id, "picked": noteId, "scores": {noteId: the jury's intercept}}`. Ids are opaque: they
are echoed, never looked up. A bad line stops the command with its line number, before any output."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from crowdnotes_site.lib import jsonlines
from crowdnotes_site.lib.communitynotes.data import real
from crowdnotes_site.lib.communitynotes.research import real_jury as rj

POST_KEYS = ("post", "post_text", "notes")
NOTE_KEYS = ("noteId", "summary", "createdAtMillis", "classification", "lang")


def parse_post(number: int, row: dict[str, Any]) -> tuple[Any, str, list[rj.Candidate]]:
    """(post id, post text, its notes) of one input line's object; CommandError naming the line otherwise."""
    where = f"line {number}"
    missing = [k for k in POST_KEYS if k not in row]
    if missing:
        raise CommandError(f"{where}: missing keys {', '.join(missing)}")
    if row["post_text"] is not None and not isinstance(row["post_text"], str):
        raise CommandError(f"{where}: post_text must be a string or null")
    notes = row["notes"]
    if not isinstance(notes, list) or len(notes) < 2:
        raise CommandError(f"{where}: a post needs two or more notes to pick from")
    out: list[rj.Candidate] = []
    for k, n in enumerate(notes, start=1):
        if not isinstance(n, dict):
            raise CommandError(f"{where}: note {k} is not a JSON object")
        missing = [key for key in NOTE_KEYS if key not in n]
        if missing:
            raise CommandError(f"{where}: note {k} is missing keys {', '.join(missing)}")
        if not isinstance(n["summary"], str) or not n["summary"].strip():
            raise CommandError(f"{where}: note {k} has an empty summary")
        created = n["createdAtMillis"]
        if isinstance(created, bool) or not isinstance(created, int):
            raise CommandError(f"{where}: note {k}: createdAtMillis must be an integer (milliseconds)")
        if not isinstance(n["classification"], str) or not isinstance(n["lang"] or "", str):
            raise CommandError(f"{where}: note {k}: classification and lang must be strings")
        out.append(rj.Candidate(str(n["noteId"]), n["summary"], created, n["classification"], n["lang"] or ""))
    if len({c.note_id for c in out}) < len(out):
        raise CommandError(f"{where}: two notes share a noteId")
    return row["post"], row["post_text"] or "", out


class Command(BaseCommand):
    help = (
        "For each post of a JSON-lines file, the note the Supernote jury picks among its notes and every note's "
        "score (the jury trained on the real Community Notes folder alone; trained first when none is saved)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--posts", required=True, help="JSON lines: one post and its notes a line")
        parser.add_argument("--json", action="store_true", help="one JSON line per post (the only output format)")
        parser.add_argument(
            "--folder", default=None, help="the real folder to train on (default COMMUNITYNOTES_REAL_DIR)"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        path = Path(options["posts"])
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            raise CommandError(f"{path}: cannot read it ({exc})") from exc
        # Every line is checked before any pick: a refusal leaves no partial output.
        try:
            posts = [parse_post(number, row) for number, row in jsonlines.read_objects(lines)]
        except jsonlines.JsonLinesError as exc:
            raise CommandError(str(exc)) from exc
        folder = Path(options["folder"] or settings.COMMUNITYNOTES_REAL_DIR)
        directory = Path(settings.JURY_REAL_DIR)
        try:
            if rj.load_saved(directory) is None:
                self.stderr.write(f"No saved jury in {directory}: training it on {folder} first (train_jury_real).")
            model, _meta, _trained = rj.load_or_train(folder, directory)
        except (real.RealDataError, ValueError) as exc:
            raise CommandError(f"Cannot train the jury on {folder}: {exc}") from exc
        for post, post_text, notes in posts:
            scores = rj.pick(model, post_text, notes)
            best = int(scores.argmax())
            self.stdout.write(json.dumps({
                "post": post,
                "picked": notes[best].note_id,
                "scores": {n.note_id: round(float(s), 4) for n, s in zip(notes, scores, strict=True)},
            }))  # fmt: skip
