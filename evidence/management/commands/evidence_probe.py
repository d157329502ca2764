"""Run RETRIEVE + MATCH for one URL synchronously and print one JSON object (for operators)."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from evidence import services
from evidence.pipeline import retrieve_and_match


class Command(BaseCommand):
    help = "Fetch, extract, chunk and match one URL against a post; prints JSON. Exit 0 whenever it ran."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("url")
        parser.add_argument("--post", required=True, help="the post text to match passages against")
        parser.add_argument("--strategy", choices=["prefilter", "exhaustive"], default=None)
        parser.add_argument("--model", default=None, help="all-mpnet-base-v2, all-MiniLM-L6-v2 or a model folder")
        parser.add_argument("--timeout", type=float, default=None, help="total fetch deadline in seconds")

    def handle(self, *args: Any, **options: Any) -> None:
        post = options["post"].strip()
        if not post:
            raise CommandError("--post must not be empty")
        overrides: dict[str, object] = {}
        if options["strategy"]:
            overrides["strategy"] = options["strategy"]
        if options["model"]:
            overrides["model_name"] = options["model"]
        try:
            matcher = services.get_matcher(services.match_config(**overrides))
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        policy = services.fetch_policy()
        if options["timeout"]:
            policy = replace(policy, total_timeout=options["timeout"])
        result = retrieve_and_match(
            options["url"], post, matcher=matcher, policy=policy, min_words=settings.EVIDENCE_MIN_WORDS
        )
        self.stdout.write(json.dumps(result.summary(), ensure_ascii=False))
