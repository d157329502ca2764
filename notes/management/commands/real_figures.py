"""The source study's figures measured on the real Community Notes folder, for the research page."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from crowdnotes_site.lib.communitynotes.data import real
from crowdnotes_site.lib.communitynotes.research import real_figures


class Command(BaseCommand):
    help = (
        "Never-left-Needs-More-Ratings, Helpful and Not Helpful shares by year (all notes and mature ones) and "
        "the 2025 note -> first shown as Helpful delay, from the real Community Notes folder; prints the table "
        "and writes the JSON file /analytics/research/ shows."
    )
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--folder", type=Path, default=None, help="the real folder (default: COMMUNITYNOTES_REAL_DIR)"
        )
        parser.add_argument(
            "--out", type=Path, default=None, help="the figures file (default: VAR_DIR/research/real_figures.json)"
        )
        parser.add_argument("--json", action="store_true", help="print the figures as JSON instead of the table")

    def handle(self, *args: Any, folder: Path | None, out: Path | None, **opts: Any) -> None:
        folder = folder or Path(settings.COMMUNITYNOTES_REAL_DIR)
        out = out or real_figures.figures_path(settings.VAR_DIR)
        readme = folder / "README.md"
        try:
            data = real_figures.figures(
                real.read_notes(folder),
                real.read_statuses(folder),
                folder=folder,
                readme=readme.read_text(encoding="utf-8") if readme.exists() else "",
                now=timezone.now(),
            )
        except real.RealDataError as exc:
            raise CommandError(str(exc)) from exc
        real_figures.write(out, data)
        if opts["json"]:
            self.stdout.write(json.dumps(data, sort_keys=True))
        else:
            for line in real_figures.table_lines(data):
                self.stdout.write(line)
        self.stderr.write(f"figures written to {out} (shown on /analytics/research/)")
