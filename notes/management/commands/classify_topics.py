"""Classify posts into the seven health topics or "not health" (LLM when configured, else the
offline baseline) and store Post.topic / Post.topic_method."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from notes.analytics.topics import posts_classify_topics
from notes.models import Post


class Command(BaseCommand):
    help = "Store the health topic of posts without one (or of every post with --all)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--all", action="store_true", help="reclassify posts that already have a topic")
        parser.add_argument("--limit", type=int, default=0)

    def handle(self, *args: Any, **opts: Any) -> None:
        posts = Post.objects.order_by("pk")
        if not opts["all"]:
            posts = posts.filter(topic="")
        if opts["limit"]:
            posts = posts[: opts["limit"]]
        counts = posts_classify_topics(posts.iterator())
        self.stdout.write(", ".join(f"{k}: {v}" for k, v in counts.items()))
