"""Give imported posts their text: look up, 100 ids a request, the posts that have an X id but no text."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from notes.models import Post
from notes.services import post_text_supply
from xnotes import rules
from xnotes.budget import RateLimited
from xnotes.client import LOOKUP_BATCH, XClient
from xnotes.models import XPost


@dataclass
class HydrateStats:
    requests: int = 0
    looked_up: int = 0
    hydrated: int = 0
    not_found: int = 0
    skipped: int = 0

    def as_dict(self) -> dict[str, int]:
        return dict(self.__dict__)


def posts_without_text() -> Any:
    """Posts with an X id but no text (what hydrating looks up; the writer page counts them)."""
    return Post.objects.filter(text_available=False, external_id__regex=r"^[0-9]{1,19}$")


def hydrate_candidates(*, limit: int, now: dt.datetime | None = None) -> tuple[list[Post], int]:
    """Posts with an X id but no text, oldest first, leaving out those X did not return within
    X_NOT_FOUND_RETRY_DAYS (their count is the second value)."""
    now = now or timezone.now()
    recent_error = Q(xpost__lookup_error_at__gte=now - dt.timedelta(days=settings.X_NOT_FOUND_RETRY_DAYS))
    # Found before but left without text (its text is another post's, which holds it): never again.
    done = Q(xpost__hydrated_at__isnull=False)
    skipped = posts_without_text().filter(recent_error | done).count()
    posts = list(posts_without_text().exclude(recent_error).exclude(done).order_by("id")[:limit])
    return posts, skipped


def hydrate_posts(*, client: XClient, limit: int, on_rate_limit: Callable[[RateLimited], None] | None = None,
                  stats: HydrateStats | None = None,
                  on_batch: Callable[[HydrateStats], None] | None = None) -> HydrateStats:  # fmt: skip
    """Look up every post that has an X id but no text, 100 ids a request. Found: the text and
    time are stored and the post becomes draftable (and is classified). Not returned: X's error
    title is stored and the post is skipped for X_NOT_FOUND_RETRY_DAYS. RateLimited propagates
    (the task re-queues itself) unless `on_rate_limit` waits (the command). `on_batch` is called
    after each stored batch (the task's progress)."""
    stats = stats or HydrateStats()
    posts, stats.skipped = hydrate_candidates(limit=limit)
    for start in range(0, len(posts), LOOKUP_BATCH):
        batch = posts[start : start + LOOKUP_BATCH]
        by_id = {p.external_id: p for p in batch}
        before = client.requests
        while True:
            try:
                payload = client.posts_lookup(list(by_id))
                break
            except RateLimited as limited:
                stats.requests += client.requests - before
                before = client.requests
                if on_rate_limit is None:
                    raise
                on_rate_limit(limited)
        stats.requests += client.requests - before
        stats.looked_up += len(batch)
        now = timezone.now()
        errors = rules.lookup_errors(payload)
        with transaction.atomic():
            for parsed in rules.parse_posts(payload):
                post = by_id.get(parsed.x_id)
                if post is None or not parsed.text:
                    continue
                post = post_text_supply(post=post, text=parsed.text)
                if post.pk == by_id[parsed.x_id].pk and post.posted_at is None and parsed.created_at:
                    Post.objects.filter(pk=post.pk).update(posted_at=parsed.created_at)
                XPost.objects.update_or_create(
                    x_id=parsed.x_id,
                    defaults={"post": by_id[parsed.x_id], "author_x_id": parsed.author_id, "lang": parsed.lang,
                              "hydrated_at": now, "lookup_error": "", "lookup_error_at": None},
                )  # fmt: skip
                stats.hydrated += 1
            for x_id, title in errors.items():
                if x_id not in by_id:
                    continue
                XPost.objects.update_or_create(
                    x_id=x_id, defaults={"post": by_id[x_id], "lookup_error": title, "lookup_error_at": now}
                )
                stats.not_found += 1
        if on_batch is not None:
            on_batch(stats)
    return stats
