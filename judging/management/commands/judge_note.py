"""Run the three judges on a post and a note, synchronously, writing nothing to the database."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from crowdnotes_site.lib.text_rules import NOTE_MAX_CHARS
from judging.services import preflight_run


class Command(BaseCommand):
    help = "Judge a note (relevance -> correctness -> helpfulness) on the given evidence snippets; no DB writes."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--post", required=True, help="the post's text")
        parser.add_argument("--note", required=True, help="the note's text")
        parser.add_argument(
            "--url",
            action="extend",
            nargs="+",
            default=[],
            help=f"attached URL(s); each counts 1 for the {NOTE_MAX_CHARS}-character rule",
        )
        parser.add_argument(
            "--snippet", action="extend", nargs="+", default=[], help="evidence snippet text(s); no fetching"
        )
        parser.add_argument("--json", action="store_true", help="print one JSON object")

    def handle(self, *args: Any, **opts: Any) -> None:
        result = preflight_run(
            post_text=opts["post"], note_text=opts["note"], urls=opts["url"], snippets=opts["snippet"]
        )
        if opts["json"]:
            self.stdout.write(json.dumps(result.summary(), ensure_ascii=False))
            return
        for stage in result.stages:
            self.stdout.write(f"{stage.stage}: {stage.verdict}  [{stage.judge}]")
            if stage.reasoning:
                self.stdout.write("  " + stage.reasoning.replace("\n", "\n  "))
            if stage.error:
                self.stdout.write(f"  error: {stage.error}")
        self.stdout.write(f"helpful: {result.helpful}")
