from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connection

from crowdnotes_site.dbstats import refresh_planner_statistics
from notes.analytics.services import status_history_store
from notes.communitynotes import folder as cnf
from notes.communitynotes import importer as cni
from notes.models import Note, Participant, Post, Rating


class Command(BaseCommand):
    help = (
        "Import public Community Notes TSVs: the whole download FOLDER as X publishes it (notes, every "
        "ratings shard, status history; streamed, resumable), or --notes with --ratings / --status-history. "
        "Idempotent."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "folder",
            nargs="?",
            help="the download folder (notes-*, ratings-*, noteStatusHistory-*, ...: each a .tsv or X's .zip of it)",
        )
        parser.add_argument("--notes", help="notes TSV")
        parser.add_argument("--ratings", help="ratings TSV or a folder of TSVs")
        parser.add_argument("--status-history", help="noteStatusHistory TSV")
        parser.add_argument(
            "--no-copy", action="store_true", help="ratings through the ORM in batches instead of PostgreSQL COPY"
        )
        parser.add_argument("--chunk-lines", type=int, default=cni.COPY_CHUNK_LINES, help="lines per COPY chunk")
        parser.add_argument(
            "--online",
            action="store_true",
            help="keep ratings readable and writable during the import (slower: per-row key checks, no table lock)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        report = cni.ImportReport()
        if options["folder"]:
            if options["notes"] or options["ratings"] or options["status_history"] or options["no_copy"]:
                raise CommandError("give the download FOLDER, or --notes with --ratings / --status-history, not both")
            if connection.vendor != "postgresql":
                raise CommandError("the whole-folder import needs PostgreSQL (COPY)")
            try:
                cnf.import_folder(
                    options["folder"], report, chunk_lines=options["chunk_lines"], progress=self.stderr.write,
                    exclusive=not options["online"],
                )  # fmt: skip
            except cnf.DownloadError as exc:
                raise CommandError(
                    f"{exc} (nothing of that file was imported; fix it and run the import again)"
                ) from exc
        else:
            if not options["notes"]:
                raise CommandError("give the download FOLDER, or --notes (with --ratings / --status-history)")
            self._files(report, options)
        refresh_planner_statistics(Post, Note, Participant, Rating)
        for line in report.lines():
            self.stdout.write(line)

    def _files(self, report: cni.ImportReport, options: dict[str, Any]) -> None:
        cni.import_notes(options["notes"], report)
        if options["ratings"]:
            if connection.vendor == "postgresql" and not options["no_copy"]:
                # Streams, resumes after an interruption, prints a progress line per chunk.
                cni.import_ratings_copy(
                    options["ratings"],
                    report,
                    chunk_lines=options["chunk_lines"],
                    progress=self.stderr.write,
                    exclusive=not options["online"],
                )
            else:
                cni.import_ratings(options["ratings"], report)
        if options["status_history"]:
            cni.import_status_history(options["status_history"], report)
            # Every row, also of notes not imported: the delays page's note -> verdict figures.
            stored, _ = status_history_store(options["status_history"])
            report.counts["status history rows kept for delay analytics"] += stored
