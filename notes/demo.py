"""Builds the demo: real health posts and notes from public Community Notes data, demo users, simulated raters.

Everything created here is marked `is_demo` (posts, notes) or named `demo-*` (accounts, raters).
"""

from __future__ import annotations

import csv
import html
import random
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import transaction

from crowdnotes_site.lib.text_rules import find_urls, strip_urls
from notes.models import Note, Participant, Post, Rating, RatingLevel
from notes.roles import ADMIN, CONTRIBUTOR, RATER
from notes.services import participant_for_user, post_text_hash

DEMO_PASSWORD = "crowdnotes-demo"  # noqa: S105 - published demo login, demo data only
DEMO_USERS = {"demo-contributor": [CONTRIBUTOR], "demo-rater": [RATER], "demo-admin": [ADMIN, CONTRIBUTOR, RATER]}
# A post is in the demo when its text and its note both name a health subject and together name
# at least two (broad words like "health", "doctor" or "drug" let in politics and ride-sharing).
HEALTH_WORDS = re.compile(
    r"vaccin|covid|coronavirus|virus|cancer|vitamin|ivermectin|\bmasks?\b|pfizer|moderna|autism|\bflu\b|influenza"
    r"|ozempic|polio|measles|mrna|miscarr|myocarditis|pandemic|vaers|disease",
    re.IGNORECASE,
)
# Posts that mention a health word in passing but are about elections or the economy.
NOT_HEALTH_WORDS = re.compile(r"impeach|unemploy|\bjobs\b|\belection", re.IGNORECASE)


def is_health_post(post_text: str, note_text: str) -> bool:
    subjects = {m.lower() for m in HEALTH_WORDS.findall(f"{post_text} {note_text}")}
    return (
        bool(HEALTH_WORDS.search(post_text) and HEALTH_WORDS.search(note_text))
        and len(subjects) >= 2
        and not NOT_HEALTH_WORDS.search(post_text)
    )


def _plain(text: str) -> str:
    """The scraped text holds HTML entities (&quot;, &amp;) and CSV-doubled quotes; templates
    escape on output, so the stored text must be plain."""
    return re.sub(r'""', '"', html.unescape(text))


# Every NEAR_THRESHOLD_EVERY-th demo note starts with only NEAR_THRESHOLD_RATINGS Helpful ratings
# (alternating camps): below the 5 a status needs, so it shows Needs More Ratings until rated more.
NEAR_THRESHOLD_EVERY, NEAR_THRESHOLD_RATINGS = 6, 4


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
            text, author = _clean_post_text(_plain(row.get("tweet_text") or ""))
            summary = re.sub(r"\s+", " ", _plain(row.get("summary") or "")).strip()
            if not text or not summary or not is_health_post(text, summary):
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
def demo_load(*, source: Path, n_posts: int = 25, n_raters: int = 14, seed: int = 7) -> dict[str, int]:
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
    loaded_at = datetime.now(tz=UTC)
    for index, demo in enumerate(read_demo_notes(source, n_posts)):
        near = index % NEAR_THRESHOLD_EVERY == 0
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
                # Near-threshold notes are dated at load time: older ones would be locked in
                # their status by the scorer's 14-day rule, and could never change in the demo.
                "created_at": loaded_at - timedelta(hours=1) if near else demo.created,
                "is_demo": True,
            },
        )
        counts["notes"] += created
        if near:
            # Near the threshold: liked by both camps but rated by too few raters for a status yet,
            # so a handful of new Helpful ratings from both camps makes it Currently Rated Helpful.
            for k, (rater, _camp) in enumerate(raters[:NEAR_THRESHOLD_RATINGS]):
                rated_at = note.created_at + timedelta(minutes=10 + k)
                _, created = Rating.objects.get_or_create(
                    note=note, rater=rater, defaults={"level": RatingLevel.HELPFUL, "created_at": rated_at}
                )
                counts["ratings"] += created
            continue
        # Each note has a hidden quality and slant; camp members rate it accordingly, with noise.
        quality, slant = rng.uniform(-0.3, 0.9), rng.uniform(-0.4, 0.4)
        for rater, camp in rng.sample(raters, k=rng.randint(9, min(14, len(raters)))):
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
