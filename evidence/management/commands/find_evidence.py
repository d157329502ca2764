"""`manage.py find_evidence --post TEXT [--tau N] [--cutoff ISO_DATE] [--single-query] [--rank-order] --json`"""

from __future__ import annotations

import json
from datetime import date
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from evidence.search.services import find_evidence


def _iso_date(value: str) -> date:
    try:
        return date.fromisoformat(value[:10])
    except ValueError:
        raise CommandError(f"--cutoff must be an ISO date (YYYY-MM-DD), got {value!r}") from None


class Command(BaseCommand):
    help = (
        "Queries → search → pool → utility selection on the configured backends, without writing a draft; "
        "prints one JSON object: queries, pool_size, chosen (url, title, reason, category, producer), warnings."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--post", required=True, help="the post's text")
        parser.add_argument("--tau", type=int, default=None, help="sources to choose (default SEARCH_TAU)")
        parser.add_argument("--cutoff", default=None, help="only documents published before this date")
        parser.add_argument("--single-query", action="store_true", help="ablation: one query, not diverse ones")
        parser.add_argument("--rank-order", action="store_true", help="ablation: search rank order, no utility judge")
        parser.add_argument("--json", action="store_true", help="print the JSON object (the only output format)")

    def handle(self, *args: Any, **options: Any) -> None:
        post = (options["post"] or "").strip()
        if not post:
            raise CommandError("--post must not be empty")
        tau = options["tau"]
        if tau is not None and tau < 1:
            raise CommandError("--tau must be at least 1")
        cutoff = _iso_date(options["cutoff"]) if options["cutoff"] else None
        try:
            state = find_evidence(
                post_text=post,
                tau=tau,
                cutoff=cutoff,
                single_query=options["single_query"],
                rank_order=options["rank_order"],
            )
        except ValueError as exc:  # misconfiguration (an unknown backend, a malformed prior)
            raise CommandError(str(exc)) from exc
        self.stdout.write(json.dumps(state.summary(), ensure_ascii=False, indent=2 if not options["json"] else None))
