from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from notes.living.demo import demo_living_choice, living_demo


class Command(BaseCommand):
    help = (
        "Living notes demo (after load_demo): note requests on three demo posts, and three suggestions on the "
        "demo note with most ratings, two of them revised by a real revision run (judges and jury decide), "
        "one left pending. Runs the revision inline (LLM if configured, else the offline baseline)."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        posts, note = demo_living_choice()
        done = living_demo(request_posts=posts, note=note)
        self.stdout.write(f"{done.requests} note request(s) added.")
        if done.note is None or done.why_not:
            self.stdout.write(f"Living note: {done.why_not}.")
        if done.run is not None:
            self.stdout.write(f"Revision run {done.run.pk} of note {done.run.note_id}: {done.run.reasons}")
