"""`manage.py x_fetch_eligible [--max-results N] [--limit N] --json`"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from xnotes import budget
from xnotes.management.commands._common import client_or_error, emit, x_answers_checked
from xnotes.services import eligible


class Command(BaseCommand):
    help = (
        "Pull posts eligible for notes from X (each stored once, by X id); waits for X's rate-limit reset when "
        "needed. Prints one JSON object: requests, pages, fetched, new, updated, rate_limited_waits, test_mode."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument(
            "--max-results", type=int, default=None, help="posts per page, 1..100 (default X_FETCH_MAX_RESULTS)"
        )
        parser.add_argument(
            "--limit", type=int, default=None, help="stop after this many posts (default: X_FETCH_PAGE_LIMIT pages)"
        )
        parser.add_argument(
            "--pages",
            type=int,
            default=None,
            help="at most this many pages (default X_FETCH_PAGE_LIMIT, or enough for --limit)",
        )
        parser.add_argument("--json", action="store_true", help="print the JSON object (the only output format)")

    def handle(self, *args: Any, **options: Any) -> None:
        max_results, limit, pages = options["max_results"], options["limit"], options["pages"]
        if max_results is not None and not 1 <= max_results <= 100:
            raise CommandError(f"--max-results must be between 1 and 100, got {max_results}")
        if limit is not None and limit < 1:
            raise CommandError(f"--limit must be at least 1, got {limit}")
        if pages is not None and pages < 1:
            raise CommandError(f"--pages must be at least 1, got {pages}")
        client = client_or_error()
        if pages is None and limit is not None:
            pages = 10_000  # as many as the limit needs
        run = eligible.fetch_run_create(max_results=max_results, page_limit=pages, post_limit=limit)
        with x_answers_checked():
            run = eligible.fetch_eligible(run=run, client=client, on_rate_limit=budget.ResetWaiter())
        if run.state == run.State.FAILED:
            raise CommandError(run.error)
        emit(self, run.summary())
