from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from notes.living.demo import living_demo_lines


class Command(BaseCommand):
    help = (
        "Living notes demo (load_demo runs it too): note requests on three demo posts, and three suggestions on "
        "the demo note with most ratings, two of them revised by a real revision run (judges and jury decide), "
        "one left pending. Runs the revision inline (LLM if configured, else the offline baseline). Idempotent."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        for line in living_demo_lines(wait_for_jury=False):
            self.stdout.write(line)
