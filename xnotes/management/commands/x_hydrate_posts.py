"""`manage.py x_hydrate_posts [--limit N] --json`"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from xnotes import budget
from xnotes.management.commands._common import client_or_error, emit, x_answers_checked
from xnotes.services import hydrate


class Command(BaseCommand):
    help = (
        "Look up the text of posts that have an X id but no text, 100 ids a request; posts X does not return "
        "are skipped for X_NOT_FOUND_RETRY_DAYS. Prints one JSON object: requests, looked_up, hydrated, not_found, skipped."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument(
            "--limit", type=int, default=None, help="at most this many posts (default X_HYDRATE_BATCH_LIMIT)"
        )
        parser.add_argument("--json", action="store_true", help="print the JSON object (the only output format)")

    def handle(self, *args: Any, **options: Any) -> None:
        limit = options["limit"]
        if limit is not None and limit < 1:
            raise CommandError(f"--limit must be at least 1, got {limit}")
        client = client_or_error()
        with x_answers_checked():
            stats = hydrate.hydrate_posts(
                client=client, limit=limit or settings.X_HYDRATE_BATCH_LIMIT, on_rate_limit=budget.ResetWaiter()
            )
        emit(self, stats.as_dict())
