"""Delay analytics from public Community Notes files, without the database."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from crowdnotes_site.lib.communitynotes.data import tsv as cio
from crowdnotes_site.lib.communitynotes.research.delays import delays_from_rows


class Command(BaseCommand):
    help = (
        "Percentiles (25/50/75/90, hours) of post -> first note and note -> first verdict, and the "
        "share of notes that never left Needs More Ratings, from a notes file and a noteStatusHistory file."
    )
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--notes", required=True, help="notes TSV file (or folder of them)")
        parser.add_argument("--status-history", required=True, help="noteStatusHistory TSV file (or folder)")
        parser.add_argument("--json", action="store_true", help="print one JSON object (the default output)")

    def handle(self, *args: Any, **opts: Any) -> None:
        notes_read: cio.ReadReport = cio.ReadReport()
        status_read: cio.ReadReport = cio.ReadReport()
        notes = [(r.note_id, r.created_at_ms, r.tweet_id) for r in notes_read.rows(cio.read_note_times(opts["notes"]))]
        status = [
            (r.note_id, r.created_at_ms, r.first_non_nmr_ms)
            for r in status_read.rows(cio.read_status_history(opts["status_history"]))
        ]
        report = delays_from_rows(notes, status)
        self.stdout.write(json.dumps(report.as_json()))
        skipped = {**{f"notes: {k}": v for k, v in notes_read.skipped.items()},
                   **{f"status history: {k}": v for k, v in status_read.skipped.items()}}  # fmt: skip
        if skipped:
            self.stderr.write(f"skipped rows: {json.dumps(skipped)}")
