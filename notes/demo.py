"""Builds the demo: real health posts and notes from public Community Notes data, demo users, simulated raters.

Everything created here is marked `is_demo` (posts, notes) or named `demo-*` (accounts, raters).
"""

from __future__ import annotations

import csv
import html
import json
import random
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from crowdnotes_site.lib.hashing import sha256_hex
from crowdnotes_site.lib.text_rules import find_urls, strip_urls
from crowdnotes_site.lib.xids import snowflake_time
from evidence.index.services import local_copy_index
from evidence.models import EvidenceSource, Passage, Snippet
from judging.services import NotJudgeable, judge_run_request
from notes.analytics.topics import posts_classify_topics
from notes.models import (
    Note,
    NoteStatusChange,
    Participant,
    Post,
    Rating,
    RatingLevel,
    RetiredRating,
    SupernoteRun,
)
from notes.roles import ADMIN, CONTRIBUTOR, RATER
from notes.services import participant_for_user, post_text_hash
from notes.supernotes.services import SupernoteError, supernote_run_start

DEMO_PASSWORD = "crowdnotes-demo"  # noqa: S105 - published demo login, demo data only
DEMO_USERS = {"demo-contributor": [CONTRIBUTOR], "demo-rater": [RATER], "demo-admin": [ADMIN, CONTRIBUTOR, RATER]}
# Rater logins with a rating history in one of the two simulated camps (they log in as simulated raters
# demo-rater-04..07), so new ratings from both sides can be tried ("Closing the loops" in README.md).
# None of them rated the near-threshold notes (rated by demo-rater-00..03), so they can rate those.
CAMP_RATERS = {"demo-rater-a1": 4, "demo-rater-a2": 6, "demo-rater-b1": 5, "demo-rater-b2": 7}


def camp_of(index: int) -> str:
    return "B" if index % 2 else "A"


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
# The demo's stuck post (the first with at least STUCK_MIN_NOTES misleading notes): every simulated
# rater rates each of its misleading notes, and each note is liked by one camp only (camps
# alternating from note to note): each has enough ratings but stays Needs More Ratings, the case a
# Supernote is for (README "Supernotes"). Its notes are never near the threshold.
STUCK_MIN_NOTES, STUCK_QUALITY, STUCK_SLANT = 3, 0.5, 0.5


@dataclass(frozen=True)
class DemoNote:
    post_text: str
    author_handle: str
    note_id: str
    note_text: str
    classification: str
    created: datetime
    posted: datetime | None  # the post's time, from its tweet id (None when the row has none)
    # (real URL, verbatim quote) of each page the note cites, read from its local copy (the corpus demo).
    sources: tuple[tuple[str, str], ...] = ()
    weak: str = ""  # why a deliberately weak demo note is weak ("" for the others)


# The scraped card's buttons and truncation marker, which are not part of the post.
_CARD_TAIL = re.compile(r"(?:\s*(?:Reply|Copy link|Show more))+\s*$")


def _clean_post_text(raw: str) -> tuple[str, str]:
    """The sample stores a scraped tweet card; keep the handle and the body lines (without the
    card's "Reply", "Copy link" and "Show more")."""
    lines = [line.strip() for line in raw.splitlines() if line.strip()]
    handle = next((line[1:] for line in lines if line.startswith("@")), "")
    skip = re.compile(
        r"^(@\S+|·|Follow|Reply|Copy link|Show more|See the latest COVID-19 information on X|Read \d.*|[\d.,]+K?"
        r"|.* · .*\d{4})$"
    )
    body = [line for line in lines[1:] if not skip.match(line)]
    return _CARD_TAIL.sub("", " ".join(body))[:1000], handle[:100]


_STATUS_ID = re.compile(r"/status/(\d+)")


def _tweet_time(row: dict[str, str]) -> datetime | None:
    """The post's time from its X id: the tweet URL's id (exact), else the tweetId column (the
    sample rounds it through a float, which keeps the time bits)."""
    match = _STATUS_ID.search(row.get("tweet_url") or "")
    try:
        tweet_id = int(match.group(1)) if match else int(float(row.get("tweetId") or 0))
    except ValueError:
        return None
    return snowflake_time(tweet_id) if tweet_id > 0 else None


def read_demo_notes(path: Path, limit: int) -> list[DemoNote]:
    """The demo's notes: from the corpus demo file (.json, `read_corpus_demo`), or from a CSV of
    scraped posts with their public notes."""
    if path.suffix == ".json":
        return read_corpus_demo(path)[:limit] if limit else read_corpus_demo(path)
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
                    posted=_tweet_time(row),
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


# --- The corpus demo (notes/demo_corpus.json) ------------------------------------------------

DEMO_CORPUS = Path(__file__).with_name("demo_corpus.json")


def _corpus(path: Path) -> dict[str, object]:
    data = json.loads(path.read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def _when(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def corpus_note_id(key: str, k: int) -> str:
    """The external id of the k-th (from 1) note of the corpus demo's post `key`."""
    return f"demo-corpus-{key}-{k}"


def read_corpus_demo(path: Path) -> list[DemoNote]:
    """The notes of the corpus demo file: posts written for the demo, each note written from the
    local copies of the pages it cites, with the verbatim passage it rests on."""
    notes: list[DemoNote] = []
    for post in _corpus(path)["posts"]:  # type: ignore[attr-defined]
        for k, note in enumerate(post["notes"], start=1):
            urls = list(dict.fromkeys(src["url"] for src in note["sources"]))
            notes.append(
                DemoNote(
                    post_text=post["text"],
                    author_handle="",
                    note_id=corpus_note_id(post["key"], k),
                    note_text=" ".join([note["text"], *urls]),
                    classification=note.get("classification") or Note.Classification.MISLEADING,
                    created=_when(note["created"]),
                    posted=_when(post["posted"]),
                    sources=tuple((src["url"], src["quote"]) for src in note["sources"]),
                    weak=note.get("weak", ""),
                )
            )
    return notes


def corpus_posts_without_notes(path: Path) -> list[tuple[str, datetime]]:
    """(text, time) of the corpus demo's posts that have no note (the demo requests notes on them)."""
    if path.suffix != ".json":
        return []
    return [(p["text"], _when(p["posted"])) for p in _corpus(path)["posts"] if not p["notes"]]  # type: ignore[attr-defined]


@dataclass(frozen=True)
class LivingRound:
    """One revision of the demo's living note: a rater's suggestion with a quote of a real page as its
    source, and what the note's author decides if the revision is proposed."""

    rater: int  # which of the note's three demo raters suggests it
    suggestion: str
    url: str
    quote: str
    decision: str  # "accept", "decline", or "wait" (left for the author to decide)
    reason: str


@dataclass(frozen=True)
class LivingCorpus:
    note_id: str  # external id of the living note
    author: str  # the login given to its (simulated) author, who decides on its revisions
    rounds: tuple[LivingRound, ...]


def corpus_living(path: Path) -> LivingCorpus | None:
    """The corpus demo's living note and its revision rounds (None for another demo source)."""
    if path.suffix != ".json":
        return None
    living = _corpus(path).get("living")
    if not isinstance(living, dict):
        return None
    rounds = tuple(
        LivingRound(
            r["rater"],
            r["suggestion"],
            r["source"]["url"],
            r["source"]["quote"],
            r["decision"],
            r["reason"],
        )
        for r in living["revisions"]
    )
    return LivingCorpus(corpus_note_id(living["post"], 1), living["author"], rounds)


def demo_pages() -> tuple[Path, Path]:
    """The corpus of real pages (folder, manifest) the demo's notes cite."""
    from django.conf import settings

    manifest = Path(settings.EVIDENCE_LOCAL_COPIES_MANIFEST or settings.SHARED_DATA_DIR / "webpages" / "manifest.tsv")
    return manifest.parent, manifest


class QuoteNotFound(ValueError):
    """A demo source's quote is not in its page's text: the demo never shows invented text as a quote."""


def _squash(text: str) -> str:
    return re.sub(r"\s+", " ", text.replace("\u2019", "'").replace("\u201c", '"').replace("\u201d", '"'))


def quoted_passage(source: EvidenceSource, quote: str) -> tuple[Passage, int | None, int | None]:
    """The source's passage that holds the quote (verbatim, up to spaces and curly quotes), with the
    quote's span inside it when it lies within one passage. QuoteNotFound when the page's text does
    not have it."""
    wanted = _squash(quote)
    passages = list(source.passages.order_by("chunk_index"))
    for passage in passages:
        text = passage.text
        flat = _squash(text)
        at = flat.find(wanted)
        if at < 0:
            continue
        # The span in the passage's own text: _squash keeps positions when the text has no runs of spaces.
        exact = text.find(quote)
        if exact >= 0:
            return passage, exact, exact + len(quote)
        return passage, None, None
    raise QuoteNotFound(f"{source.url}: the quote is not in the page's text: {quote[:80]!r}")


def demo_attach_sources(*, note: Note, sources: tuple[tuple[str, str], ...]) -> int:
    """Give a corpus demo note the snippets it rests on: each cited page indexed from its local copy,
    the passage holding the quote, confirmed (as its writer did when writing from it). Once per note."""
    if not sources or Snippet.objects.filter(note=note).exists():
        return 0
    from django.conf import settings

    folder, manifest = demo_pages()
    made = 0
    for position, (url, quote) in enumerate(sources):
        source = local_copy_index(url=url, folder=folder, manifest=manifest,
                                  base_url=settings.EVIDENCE_LOCAL_COPIES_URL)  # fmt: skip
        passage, start, end = quoted_passage(source, quote)
        Snippet.objects.create(
            post=note.post, note=note, url=url, position=position, state=Snippet.State.READY, source=source,
            passage=passage, sentence_start=start, sentence_end=end, confirmation=Snippet.Confirmation.CONFIRMED,
            confirmed_at=timezone.now(), confirmed_text_hash=sha256_hex(passage.text),
        )  # fmt: skip
        made += 1
    return made


def stuck_post_text(demos: list[DemoNote]) -> str | None:
    """The text of the demo's stuck post: the first post with at least STUCK_MIN_NOTES misleading notes."""
    counts: dict[str, int] = {}
    for demo in demos:
        if demo.classification == Note.Classification.MISLEADING:
            counts[demo.post_text] = counts.get(demo.post_text, 0) + 1
    return next((text for text, n in counts.items() if n >= STUCK_MIN_NOTES), None)


def demo_stuck_post(*, source: Path, n_posts: int = 25) -> Post | None:
    """The demo post `demo_load` loaded as stuck (None when the source has no such post)."""
    text = stuck_post_text(read_demo_notes(source, n_posts))
    return Post.objects.filter(is_demo=True, text_hash=post_text_hash(text)).first() if text else None


def note_created(demo: DemoNote, post: Post) -> datetime:
    """The note's own time, but never before its post's (the sample's times are real, so this
    only guards a row whose tweet time is off)."""
    posted = post.posted_at or post.created_at
    return max(demo.created, posted + timedelta(minutes=1))


def demo_date_verdicts(*, since: datetime) -> int:
    """The load's rescoring gives old demo notes their first status *now*, years after their
    (simulated) ratings; a status follows its ratings, so each status change of a demo note made
    since `since` is dated at the note's last rating (at load, every rating is in by then), never
    before the note. Returns the changes re-dated."""
    changes = list(NoteStatusChange.objects.filter(note__is_demo=True, changed_at__gte=since).select_related("note"))
    last_rating = dict(
        Rating.objects.filter(note_id__in={c.note_id for c in changes})
        .values("note_id")
        .annotate(last=Max("created_at"))
        .values_list("note_id", "last")
    )
    for change in changes:
        change.changed_at = max(last_rating.get(change.note_id) or change.note.created_at, change.note.created_at)
    NoteStatusChange.objects.bulk_update(changes, ["changed_at"])
    return len(changes)


def attach_login(username: str, participant: Participant, *, role: str = RATER) -> None:
    """A login with `role` that acts as `participant` (a simulated rater with a history, or the
    living note's simulated author), unless the login already acts under another identity."""
    user, created = get_user_model().objects.get_or_create(username=username)
    if created:
        user.set_password(DEMO_PASSWORD)
        user.save()
    user.groups.set(Group.objects.filter(name=role))
    if not Participant.objects.filter(user=user).exists() and participant.user_id is None:
        participant.user = user
        participant.save(update_fields=["user"])


def _ensure_user(username: str, roles: list[str]) -> Participant:
    user, created = get_user_model().objects.get_or_create(username=username, defaults={"is_staff": ADMIN in roles})
    if created:
        user.set_password(DEMO_PASSWORD)
        user.save()
    user.groups.set(Group.objects.filter(name__in=roles))
    return participant_for_user(user=user)


@transaction.atomic
def demo_load(*, source: Path, n_posts: int = 25, n_raters: int = 14, seed: int = 5) -> dict[str, int]:
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
    for username, index in CAMP_RATERS.items():
        attach_login(username, raters[index][0])
    camp_logins = {raters[index][0] for index in CAMP_RATERS.values() if index < len(raters)}
    counts = {"posts": 0, "notes": 0, "ratings": 0, "snippets": 0}
    posts: dict[str, Post] = {}
    loaded_at = datetime.now(tz=UTC)
    stuck_seen = 0
    demos = read_demo_notes(source, n_posts)
    stuck_text = stuck_post_text(demos)
    for index, demo in enumerate(demos):
        stuck = demo.post_text == stuck_text and demo.classification == Note.Classification.MISLEADING
        near = index % NEAR_THRESHOLD_EVERY == 0 and not stuck
        post = posts.get(demo.post_text)
        if post is None:
            # A post's time is its tweet's: a note is never dated before it (see note_created).
            posted = demo.posted or demo.created
            post, created = Post.objects.get_or_create(
                text_hash=post_text_hash(demo.post_text),
                is_demo=True,
                defaults={
                    "text": demo.post_text,
                    "author_handle": demo.author_handle,
                    "posted_at": posted,
                    "created_at": posted,
                },
            )
            if post.posted_at is None:  # a demo loaded before posts had their tweet's time
                Post.objects.filter(pk=post.pk).update(posted_at=posted)
                post.posted_at = posted
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
                "created_at": loaded_at - timedelta(hours=1) if near else note_created(demo, post),
                "is_demo": True,
            },
        )
        counts["notes"] += created
        counts["snippets"] += demo_attach_sources(note=note, sources=demo.sources)
        # Ratings a revision retired (the living-notes demo) stay retired: a rerun never rates the
        # revised text with what was said of the text it replaced.
        retired = set(RetiredRating.objects.filter(version__note=note).values_list("rater_id", flat=True))
        if near:
            # Near the threshold: liked by both camps but rated by too few raters for a status yet,
            # so a handful of new Helpful ratings from both camps makes it Currently Rated Helpful.
            for k, (rater, _camp) in enumerate(raters[:NEAR_THRESHOLD_RATINGS]):
                rated_at = note.created_at + timedelta(minutes=10 + k)
                if rater.pk in retired:
                    continue
                _, created = Rating.objects.get_or_create(
                    note=note, rater=rater, defaults={"level": RatingLevel.HELPFUL, "created_at": rated_at}
                )
                counts["ratings"] += created
            continue
        # Each note has a hidden quality and slant; camp members rate it accordingly, with noise.
        if stuck:  # liked by one camp only, rated by every simulated rater
            side = 1.0 if stuck_seen % 2 == 0 else -1.0
            stuck_seen += 1
            quality, slant, jury = STUCK_QUALITY, side * STUCK_SLANT, list(raters)
        else:
            quality, slant = rng.uniform(-0.3, 0.9), rng.uniform(-0.4, 0.4)
            jury = rng.sample(raters, k=rng.randint(9, min(14, len(raters))))
        # The camp logins rate every such note: enough ratings for the scorer to place them on a side.
        jury += [raters[i] for i in CAMP_RATERS.values() if i < len(raters) and raters[i] not in jury]
        for rater, camp in jury:
            noise = rng.gauss(0, 0.25)
            # The camp logins rate as their camp typically does (no noise): a visitor who logs in as
            # one sees a history the scorer places on that camp's side (it drops erratic raters).
            score = quality + camp * slant + (0.0 if rater in camp_logins else noise)
            level = (
                RatingLevel.HELPFUL
                if score > 0.35
                else RatingLevel.SOMEWHAT_HELPFUL
                if score > 0.1
                else RatingLevel.NOT_HELPFUL
            )
            # Real ratings arrive within hours of a note; the scorer's rater-reputation step relies on it.
            rated_at = note.created_at + timedelta(minutes=rng.randint(5, 24 * 60))
            if rater.pk in retired:
                continue
            _, created = Rating.objects.get_or_create(
                note=note, rater=rater, defaults={"level": level, "created_at": rated_at}
            )
            counts["ratings"] += created
    for text, posted in corpus_posts_without_notes(source):  # posts the demo requests notes on
        _, created = Post.objects.get_or_create(
            text_hash=post_text_hash(text),
            is_demo=True,
            defaults={"text": text, "posted_at": posted, "created_at": posted},
        )
        counts["posts"] += created
    for note in Note.objects.filter(is_demo=True):
        note.num_ratings = note.ratings.count()
        note.save(update_fields=["num_ratings"])
    return counts


def demo_classify_posts() -> dict[str, int]:
    """Store the topic of every post with text that has none yet (demo posts, flagged posts; the
    LLM when configured, else the labelled keyword baseline). Posts imported without their text
    are not classified (their placeholder is not the post) and are counted as such."""
    return posts_classify_topics(Post.objects.filter(topic="").order_by("pk").iterator())


def demo_judge_notes() -> tuple[int, int]:
    """Queue the judges for every demo note not judged yet (offline baselines unless an LLM is
    configured; each decision is labelled with its judge kind). Returns (queued, already judged)."""
    queued = judged = 0
    for note in Note.objects.filter(is_demo=True).select_related("post").order_by("pk"):
        if note.judge_runs.exists():
            judged += 1
            continue
        try:
            judge_run_request(note=note)
        except NotJudgeable:
            continue
        queued += 1
    return queued, judged


def public_sample_imported() -> bool:
    """Whether the public sample's notes are in the database already (real notes, not demo)."""
    return Note.objects.filter(is_demo=False, external_id__isnull=False).exists()


# The demo's Supernote run draws its subsets and juries from this seed: the same data and jury model
# give the same run on every install (README "Supernotes" says what it shows).
DEMO_SUPERNOTE_SEED = 20240501


def demo_supernote_queue(*, source: Path, n_posts: int = 25) -> tuple[Post | None, SupernoteRun | None]:
    """Queue one Supernote run (offline unless an LLM is configured; nobody's, so it waits behind
    people's work) for the demo's stuck post, unless that post had a run already: the demo's first
    start then shows a finished run with its merged candidates and their jury scores, and a proposal
    with its blind comparison only when the jury finds a candidate that beats the post's notes.
    Returns (the stuck post, the run queued or None)."""
    post = demo_stuck_post(source=source, n_posts=n_posts)
    if post is None or post.supernote_runs.exists():
        return post, None
    try:
        return post, supernote_run_start(post=post, user=None, seed=DEMO_SUPERNOTE_SEED)
    except SupernoteError:  # no longer stuck (rated since), or a run started meanwhile
        return post, None
