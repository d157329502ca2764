from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from notes import communitynotes_import as cni


class Command(BaseCommand):
    help = "Import public Community Notes TSVs (notes, ratings file or folder, status history). Idempotent."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--notes", required=True, help="notes TSV")
        parser.add_argument("--ratings", help="ratings TSV or a folder of TSVs")
        parser.add_argument("--status-history", help="noteStatusHistory TSV")

    def handle(self, *args: Any, **options: Any) -> None:
        report = cni.ImportReport()
        cni.import_notes(options["notes"], report)
        if options["ratings"]:
            cni.import_ratings(options["ratings"], report)
        if options["status_history"]:
            cni.import_status_history(options["status_history"], report)
        for line in report.lines():
            self.stdout.write(line)
