from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandParser
from django.db import transaction

from notes.demo import demo_supernote_queue
from notes.management.commands.load_demo import DEFAULT_SOURCE


class Command(BaseCommand):
    help = (
        "Queue one Supernote run for the demo's stuck post unless it had one (scripts/lib/warmup.sh, at the "
        "demo's first start, after train_phm); the workers run it."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--source", type=Path, default=DEFAULT_SOURCE, help="the source load_demo loaded")
        parser.add_argument("--posts", type=int, default=25)

    def handle(self, *args: Any, source: Path, posts: int, **options: Any) -> None:
        with transaction.atomic():
            post, run = demo_supernote_queue(source=source, n_posts=posts)
        if post is None:
            self.stdout.write("The demo has no stuck post: no Supernote run queued.")
        elif run is None:
            self.stdout.write(f"Post {post.pk} (the demo's stuck post) had a Supernote run already, or is not stuck.")
        else:
            self.stdout.write(f"Queued Supernote run {run.pk} for the demo's stuck post {post.pk}.")
