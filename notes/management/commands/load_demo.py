from __future__ import annotations

from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from notes.demo import DEMO_PASSWORD, DEMO_USERS, demo_date_verdicts, demo_load
from notes.services import notes_rescore

DEFAULT_SOURCE = settings.SHARED_DATA_DIR / "communitynotes/aaronbergman/tweet_data_checkpoint_1_subset.csv"


class Command(BaseCommand):
    help = "Load the demo: real health posts and notes (public Community Notes data), demo users, simulated raters."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--source", type=Path, default=DEFAULT_SOURCE, help="CSV of posts with notes")
        parser.add_argument("--posts", type=int, default=25)

    def handle(self, *args: Any, source: Path, posts: int, **options: Any) -> None:
        if not source.exists():
            raise CommandError(f"Demo source not found: {source} (pass --source)")
        counts = demo_load(source=source, n_posts=posts)
        self.stdout.write(
            f"Demo loaded: {counts['posts']} new posts, {counts['notes']} new notes, {counts['ratings']} new ratings."
        )
        scoring_started = timezone.now()
        summary = notes_rescore()
        self.stdout.write(f"Scored the demo ratings: {summary}")
        redated = demo_date_verdicts(since=scoring_started)
        self.stdout.write(
            f"Dated {redated} demo status changes at their notes' last ratings (a status follows its ratings)."
        )
        for username in DEMO_USERS:
            self.stdout.write(f"  login {username} / {DEMO_PASSWORD}")
