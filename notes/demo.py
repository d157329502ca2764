"""Builds the demo: real health posts and notes from public Community Notes data, demo users, simulated raters.

Everything created here is marked `is_demo` (posts, notes) or named `demo-*` (accounts, raters).
"""

from __future__ import annotations

import csv
import random
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import transaction

from notes.models import Note, Participant, Post, Rating, RatingLevel
from notes.roles import ADMIN, CONTRIBUTOR, RATER
from notes.services import participant_for_user, post_text_hash
from notes.text_rules import find_urls, strip_urls

DEMO_PASSWORD = "crowdnotes-demo"  # noqa: S105 - published demo login, demo data only
DEMO_USERS = {"demo-contributor": [CONTRIBUTOR], "demo-rater": [RATER], "demo-admin": [ADMIN, CONTRIBUTOR, RATER]}
HEALTH_WORDS = re.compile(
    r"vaccin|covid|virus|cancer|vitamin|ivermectin|\bmask|diet|disease|doctor|health|drug|pfizer|moderna|autism|\bflu\b|ozempic",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class DemoNote:
    post_text: str
    author_handle: str
    note_id: str
    note_text: str
    classification: str
    created: datetime


def _clean_post_text(raw: str) -> tuple[str, str]:
    """The sample stores a scraped tweet card; keep the handle and the body lines."""
    lines = [line.strip() for line in raw.splitlines() if line.strip()]
    handle = next((line[1:] for line in lines if line.startswith("@")), "")
    skip = re.compile(r"^(@\S+|·|Follow|See the latest COVID-19 information on X|Read \d.*|[\d.,]+K?|.* · .*\d{4})$")
    body = [line for line in lines[1:] if not skip.match(line)]
    return " ".join(body)[:1000], handle[:100]


def read_demo_notes(path: Path, limit: int) -> list[DemoNote]:
    rows: list[DemoNote] = []
    with path.open(newline="", encoding="utf-8") as handle:
        for row in csv.DictReader(handle):
            if not HEALTH_WORDS.search(row.get("tweet_text") or ""):
                continue
            text, author = _clean_post_text(row["tweet_text"])
            summary = re.sub(r"\s+", " ", row.get("summary") or "").strip()
            if not text or not summary:
                continue
            millis = int(float(row.get("createdAtMillis") or 0))
            rows.append(
                DemoNote(
                    post_text=text,
                    author_handle=author,
                    note_id=f"demo-{row['noteAuthorParticipantId'][:12]}-{millis}",
                    note_text=summary,
                    classification=row.get("classification") or Note.Classification.MISLEADING,
                    created=datetime.fromtimestamp(millis / 1000, tz=UTC) if millis else datetime.now(tz=UTC),
                )
            )
    posts_seen: dict[str, int] = {}
    picked: list[DemoNote] = []
    for demo in rows:
        if len(posts_seen) >= limit and demo.post_text not in posts_seen:
            continue
        posts_seen[demo.post_text] = posts_seen.get(demo.post_text, 0) + 1
        picked.append(demo)
    return picked


def _ensure_user(username: str, roles: list[str]) -> Participant:
    user, created = get_user_model().objects.get_or_create(username=username, defaults={"is_staff": ADMIN in roles})
    if created:
        user.set_password(DEMO_PASSWORD)
        user.save()
    user.groups.set(Group.objects.filter(name__in=roles))
    return participant_for_user(user=user)


@transaction.atomic
def demo_load(*, source: Path, n_posts: int = 25, n_raters: int = 40, seed: int = 7) -> dict[str, int]:
    """Load (or refresh) the demo. Idempotent: running it twice creates nothing twice."""
    for username, roles in DEMO_USERS.items():
        _ensure_user(username, roles)
    rng = random.Random(seed)
    authors = [Participant.objects.get_or_create(external_id=f"demo-author-{i}")[0] for i in range(8)]
    # Simulated raters in two camps that usually disagree (factor -1 / +1), as on the real platform.
    raters = [
        (Participant.objects.get_or_create(external_id=f"demo-rater-{i:02d}")[0], -1.0 if i % 2 else 1.0)
        for i in range(n_raters)
    ]
    counts = {"posts": 0, "notes": 0, "ratings": 0}
    posts: dict[str, Post] = {}
    for demo in read_demo_notes(source, n_posts):
        post = posts.get(demo.post_text)
        if post is None:
            post, created = Post.objects.get_or_create(
                text_hash=post_text_hash(demo.post_text),
                is_demo=True,
                defaults={"text": demo.post_text, "author_handle": demo.author_handle, "created_at": demo.created},
            )
            posts[demo.post_text] = post
            counts["posts"] += created
        note, created = Note.objects.get_or_create(
            external_id=demo.note_id,
            defaults={
                "post": post,
                "text": strip_urls(demo.note_text, web_only=True),
                "evidence_urls": find_urls(demo.note_text, web_only=True),
                "classification": demo.classification,
                "author": rng.choice(authors),
                "created_at": demo.created,
                "is_demo": True,
            },
        )
        counts["notes"] += created
        # Each note has a hidden quality and slant; camp members rate it accordingly, with noise.
        quality, slant = rng.uniform(-0.3, 0.6), rng.uniform(-0.6, 0.6)
        for rater, camp in rng.sample(raters, k=rng.randint(6, min(18, len(raters)))):
            score = quality + camp * slant + rng.gauss(0, 0.25)
            level = (
                RatingLevel.HELPFUL
                if score > 0.35
                else RatingLevel.SOMEWHAT_HELPFUL
                if score > 0.1
                else RatingLevel.NOT_HELPFUL
            )
            # Real ratings arrive within hours of a note; the scorer's rater-reputation step relies on it.
            rated_at = note.created_at + timedelta(minutes=rng.randint(5, 24 * 60))
            _, created = Rating.objects.get_or_create(
                note=note, rater=rater, defaults={"level": level, "created_at": rated_at}
            )
            counts["ratings"] += created
    for note in Note.objects.filter(is_demo=True):
        note.num_ratings = note.ratings.count()
        note.save(update_fields=["num_ratings"])
    return counts
