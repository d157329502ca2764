"""The research path over a whole public download folder (crowdnotes_site.lib.communitynotes.research.run)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from crowdnotes_site.lib.communitynotes.data.columnar import DownloadError
from crowdnotes_site.lib.communitynotes.research import run as download


class Command(BaseCommand):
    help = (
        "Convert a Community Notes download folder to Parquet (once; reruns convert changed files only), "
        "score it, and write the delay table and the spike series into FOLDER/research (or --out)."
    )
    requires_system_checks: list[str] = []  # no database needed

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("folder")
        parser.add_argument("--out")
        parser.add_argument("--only", nargs="+", choices=download.STEPS, default=list(download.STEPS))

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            download.run(options["folder"], out=options["out"], only=tuple(options["only"]), say=self.stdout.write)
        except DownloadError as exc:
            raise CommandError(str(exc)) from exc
        out = Path(options["out"] or Path(options["folder"]) / "research").resolve()
        self.stdout.write(f"outputs in {out}; to show them on /analytics/research/: RESEARCH_OUTPUTS_DIR={out}")
