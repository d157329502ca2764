from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connection

from crowdnotes_site.dbstats import refresh_planner_statistics
from crowdnotes_site.lib.communitynotes.data.tsv import tsv_files
from notes.communitynotes import folder as cnf
from notes.communitynotes import importer as cni
from notes.models import Note, Participant, Post, Rating


class Command(BaseCommand):
    help = (
        "Import public Community Notes TSVs: the whole download FOLDER as X publishes it (notes, every "
        "ratings shard, status history; streamed, resumable), or --notes with --ratings / --status-history "
        "(the same import of the files given, any year's layout). Idempotent."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "folder",
            nargs="?",
            help="the download folder (notes-*, ratings-*, noteStatusHistory-*, ...: each a .tsv or X's .zip of it)",
        )
        parser.add_argument("--notes", help="notes TSV")
        parser.add_argument("--ratings", help="ratings TSV or a folder of TSVs")
        parser.add_argument("--status-history", help="noteStatusHistory TSV or a folder of TSVs")
        parser.add_argument(
            "--no-copy",
            action="store_true",
            help="every chunk through the ORM instead of PostgreSQL COPY (what SQLite always gets)",
        )
        parser.add_argument("--chunk-lines", type=int, default=cni.COPY_CHUNK_LINES, help="ratings lines per chunk")
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
            files: str | cnf.FolderFiles = options["folder"]
        elif options["notes"]:
            files = cnf.FolderFiles(
                notes=[Path(options["notes"])],
                ratings=tsv_files(options["ratings"]) if options["ratings"] else [],
                status=tsv_files(options["status_history"]) if options["status_history"] else [],
            )
        else:
            raise CommandError("give the download FOLDER, or --notes (with --ratings / --status-history)")
        try:
            cnf.import_folder(
                files, report, chunk_lines=options["chunk_lines"], progress=self.stderr.write,
                exclusive=not options["online"], orm=options["no_copy"],
            )  # fmt: skip
        except cnf.DownloadError as exc:
            raise CommandError(f"{exc} (nothing of that file was imported; fix it and run the import again)") from exc
        refresh_planner_statistics(Post, Note, Participant, Rating)
        for line in report.lines():
            self.stdout.write(line)
