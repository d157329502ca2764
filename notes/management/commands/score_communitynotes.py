from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from crowdnotes_site.lib.communitynotes.data import scorer_input as scoring_tsv


class Command(BaseCommand):
    help = (
        "Score public Community Notes TSVs with the CrowdNotes scorer, without the database; writes "
        "scored_notes.tsv and helpfulness_scores.tsv (reference column names) into --outdir."
    )
    requires_system_checks: list[str] = []  # no database needed

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--notes", required=True, help="notes TSV")
        parser.add_argument("--ratings", required=True, help="ratings TSV or a folder of TSVs")
        parser.add_argument("--status-history", help="noteStatusHistory TSV (inertia, reputation timing)")
        parser.add_argument("--outdir", required=True)

    def handle(self, *args: Any, **options: Any) -> None:
        summary = scoring_tsv.score_files(
            notes_path=options["notes"],
            ratings_path=options["ratings"],
            status_history_path=options["status_history"],
            outdir=options["outdir"],
        )
        for key, value in summary.items():
            self.stdout.write(f"{key}: {value}")
