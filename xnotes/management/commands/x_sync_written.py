"""`manage.py x_sync_written --json`"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from xnotes import budget
from xnotes.management.commands._common import client_or_error, emit, x_answers_checked
from xnotes.services import written


class Command(BaseCommand):
    help = (
        "Page through notes_written and store each note's evaluator outcomes (test mode) or status (live). Prints one "
        "JSON object: requests, notes, admission (window, n, eligible and each criterion), writing_limit."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--json", action="store_true", help="print the JSON object (the only output format)")

    def handle(self, *args: Any, **options: Any) -> None:
        client = client_or_error()
        with x_answers_checked():
            stats = written.sync_written(client=client, on_rate_limit=budget.ResetWaiter())
        emit(self, {
            "requests": stats.requests, "notes": stats.notes,
            "admission": written.admission_json(written.admission_now()),
            "writing_limit": written.writing_limit_json(written.writing_limit_now()),
        })  # fmt: skip
