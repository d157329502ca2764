"""`manage.py train_jury_real`: train the Supernote jury on the whole real Community Notes folder
(every post with a truth, every 2021 rating) and save it under JURY_REAL_DIR, where `jury_pick`
reads it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from crowdnotes_site.lib.communitynotes.research.real_jury import train_and_save


class Command(BaseCommand):
    help = "Train the Supernote jury on the whole real Community Notes folder and save it under JURY_REAL_DIR."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--folder", default=None, help="the real folder (default COMMUNITYNOTES_REAL_DIR)")

    def handle(self, *args: Any, **options: Any) -> None:
        folder = Path(options["folder"] or settings.COMMUNITYNOTES_REAL_DIR)
        try:
            target, meta = train_and_save(folder, Path(settings.JURY_REAL_DIR))
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(f"Saved {target}: {meta['trained_on']}; prior: {meta['prior']}; {meta['jurors']} jurors.")
