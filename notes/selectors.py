from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

import numpy as np
from django.conf import settings
from django.db import connection
from django.db.models import (
    BigIntegerField,
    BooleanField,
    Case,
    Count,
    Exists,
    ExpressionWrapper,
    F,
    FloatField,
    Func,
    Max,
    OuterRef,
    Prefetch,
    Q,
    QuerySet,
    TextField,
    Value,
    When,
)
from django.db.models.functions import MD5, Cast, Least
from django.shortcuts import get_object_or_404
from django.utils import timezone

from crowdnotes_site.lib.memo import content_key
from crowdnotes_site.lib.scoring import pgcopy, scoring
from crowdnotes_site.queue import outbox_key, outbox_waiting
from evidence.models import Snippet
from evidence.search.selectors import automation_running
from evidence.snippets import snippet_is_confirmed, snippet_refining, snippets_ahead
from judging.models import PreflightCheck
from judging.selectors import judging_for_notes
from notes.models import (
    TEXT_ALL,
    TEXT_FILTER_CHOICES,
    TEXT_WITH,
    TEXT_WITHOUT,
    DraftJob,
    Note,
    NoteStatus,
    NoteStatusChange,
    Participant,
    Post,
    Rating,
    RatingLevel,
    ScoringRun,
    filter_by_text,
    text_filter,
)

__all__ = ["TEXT_ALL", "TEXT_FILTER_CHOICES", "TEXT_WITH", "TEXT_WITHOUT", "text_filter"]

if TYPE_CHECKING:
    from django.contrib.auth.models import AnonymousUser, User

# The reference counts a rating towards its rater's reputation only if it came within 48 h of the
# note (before the public data download could reveal outcomes). Here raters never see other
# ratings or scores before rating, and "made before the note's latest status" still applies, so
# the window is dropped: with it, ratings of notes older than two days would never count.
APP_SCORING_CONFIG = scoring.ScoringConfig(valid_rating_window_ms=None)


HOME_PAGE_SIZE = 20


@dataclass(frozen=True)
class HomePage:
    posts: list[Post]
    page: int
    has_next: bool
    # Imported posts without text left out by the default filter (0 when the filter shows them).
    hidden_without_text: int = 0

    def content_key(self) -> str:
        """A digest of every value the post list shows (posts, their notes in order, the pager):
        the key of its cached rendering, so a cached list is never older than its data."""
        rows = [
            (
                post.pk, post.text, post.text_available, post.external_id, post.author_handle, post.posted_at,
                post.created_at, post.topic, post.is_demo, [(n.pk, n.text, n.status) for n in post.notes.all()],
            )
            for post in self.posts
        ]  # fmt: skip
        return content_key(self.page, self.has_next, self.hidden_without_text, rows)


def posts_for_home(*, page: int = 1, topic: str = "", text: str = TEXT_WITH, size: int = HOME_PAGE_SIZE) -> HomePage:
    """One page of posts, newest first, with their notes. The page counts the prefetched notes (a
    COUNT annotation would group every post and note of the table before the limit), and reads one
    row past the page to know whether an older page exists (no COUNT of the whole table)."""
    # Only what the page shows of a note: no author join, and none of the scorer's stored fields
    # (rules JSON, explanation text) to read and decode for every note of 20 posts.
    notes = Note.objects.only("id", "post_id", "text", "status", "created_at").order_by("-created_at")
    base = Post.objects.filter(topic=topic) if topic else Post.objects.all()
    hidden = base.without_text().count() if text == TEXT_WITH else 0
    posts = filter_by_text(base, text)
    start = (page - 1) * size
    rows = list(
        posts.prefetch_related(Prefetch("notes", queryset=notes)).order_by("-created_at", "-pk")[
            start : start + size + 1
        ]
    )
    return HomePage(posts=rows[:size], page=page, has_next=len(rows) > size, hidden_without_text=hidden)


# How often the draft page asks for news (htmx), and reloads itself without JavaScript: every
# second while sources are processed or the draft is written (the contributor is waiting), every
# 3 s while only the refine task runs (the contributor is reading the first passage).
POLL_WAITING_S, POLL_READING_S, NOSCRIPT_REFRESH_S = 1, 3, 3


@dataclass(frozen=True)
class DraftGate:
    """Whether a draft may be requested (and a note submitted), and if not, why not; and when
    the draft page should look again."""

    can_draft: bool
    reasons: list[str]
    # Every snippet of the draft, in order, with its source and passage (the page lists these).
    snippets: list[Snippet]
    confirmed: list[Snippet]
    pending_review: list[Snippet]
    processing: list[Snippet]
    # Ready and unreviewed, while the refine task still compares the passages the pre-filter skipped.
    refining: list[Snippet] = field(default_factory=list)
    # CrowdNotes is still looking for evidence ("find evidence for me").
    finding: bool = False
    # Seconds until the page polls again (None: nothing is running), and the no-JS refresh.
    poll_seconds: int | None = None
    refresh_seconds: int | None = None
    # Some of this draft's work is stored in the outbox but the broker has not taken it yet.
    queue_waiting: bool = False
    # Queued snippet id -> how many sources' turns on the CPU queue come before it.
    ahead: dict[int, int] = field(default_factory=dict)
    # Ready snippets whose best passage is below EVIDENCE_RELEVANCE_FLOOR: "this page may not
    # address the post" (a mark, never a block), and the floor itself.
    weak: set[int] = field(default_factory=set)
    floor: float = 0.0

    @property
    def urls(self) -> list[str]:
        """The evidence links the note will carry: the confirmed sources, in order."""
        return [s.url for s in self.confirmed]


def draft_gate(*, job: DraftJob) -> DraftGate:
    snippets = list(job.snippets.select_related("passage", "source"))
    processing = [s for s in snippets if s.state not in (Snippet.State.READY, Snippet.State.FAILED)]
    ready = [s for s in snippets if s.state == Snippet.State.READY]
    confirmed = [s for s in ready if snippet_is_confirmed(s)]
    rejected = [s for s in ready if s.confirmation == Snippet.Confirmation.REJECTED]
    pending = [s for s in ready if s not in confirmed and s not in rejected]
    refining = [s for s in pending if snippet_refining(s)]
    finding = automation_running(job=job)
    reasons: list[str] = []
    missing = job.post.text_missing_reason()
    if missing:
        reasons.append(f'No draft: {missing}. Paste the post\'s text from "Write a note on this post" first.')
    if finding:
        reasons.append("CrowdNotes is still looking for evidence: wait for its proposals.")
    if processing:
        reasons.append(f"{len(processing)} source(s) are still being processed: wait for them or remove them.")
    if pending:
        reasons.append(f"Review every snippet first: {len(pending)} still need your confirm or reject.")
    if not confirmed and not finding:
        reasons.append("Confirm at least one snippet that supports the context you want to add.")
    waiting = bool(processing) or finding or job.state == DraftJob.State.DRAFTING
    queue_waiting = False
    if processing or job.state == DraftJob.State.DRAFTING:
        keys = [outbox_key("evidence.tasks.snippet_process", [s.pk]) for s in processing]
        keys.append(outbox_key("notes.tasks.draft_generate", [job.pk]))
        queue_waiting = bool(outbox_waiting(keys))
    floor = settings.EVIDENCE_RELEVANCE_FLOOR
    weak = {s.pk for s in ready if floor > 0 and s.similarity is not None and s.similarity < floor}
    return DraftGate(
        weak=weak,
        floor=floor,
        ahead=snippets_ahead(snippets=processing),
        queue_waiting=queue_waiting,
        can_draft=not reasons,
        reasons=reasons,
        snippets=snippets,
        confirmed=confirmed,
        pending_review=pending,
        processing=processing,
        refining=refining,
        finding=finding,
        poll_seconds=POLL_WAITING_S if waiting else (POLL_READING_S if refining else None),
        refresh_seconds=NOSCRIPT_REFRESH_S if waiting else None,
    )


def submitted_note(*, job: DraftJob) -> Note | None:
    """The note a draft became (None while it is not submitted)."""
    return Note.objects.filter(draft_job=job).order_by("pk").first()


def preflight_of(*, job: DraftJob, check_id: int) -> PreflightCheck | None:
    """A pre-flight of this draft (by its owner), or None."""
    return PreflightCheck.objects.filter(pk=check_id, draft_job=job, requested_by_id=job.contributor_id).first()


def participant_of(*, user: User | AnonymousUser) -> Participant | None:
    """The viewer's scoring identity (None for anonymous visitors and users who never had one)."""
    if not user.is_authenticated:
        return None
    return Participant.objects.filter(user=user).first()


def drafts_for_user(*, user: User) -> QuerySet[DraftJob]:
    return (
        DraftJob.objects.filter(contributor=user)
        .exclude(state__in=DraftJob.CLOSED_STATES)
        .select_related("post")
        .order_by("-updated_at")
    )


def notes_for_user(*, user: User) -> QuerySet[Note]:
    return Note.objects.filter(author__user=user).select_related("post").order_by("-created_at")


# --- Ratings and scoring ---------------------------------------------------------------------


def rating_queue(*, participant: Participant, limit: int = 20, text: str = TEXT_WITH) -> list[Note]:
    """The first `limit` notes of `rating_queue_queryset`."""
    return list(rating_queue_queryset(participant=participant, text=text)[:limit])


def rating_queue_hidden(*, participant: Participant) -> int:
    """How many notes of this rater's queue are on imported posts without text (hidden by default)."""
    return rating_queue_queryset(participant=participant, text=TEXT_WITHOUT).order_by().count()


def rating_queue_queryset(*, participant: Participant, text: str = TEXT_WITH) -> QuerySet[Note]:
    """Notes this rater can rate next, most needed first.

    Notes that still need ratings, not written and not yet rated by this rater. A note lacking
    raters from this rater's side (the sign of their factor) comes first, then notes lacking
    either side (for raters without a factor yet), then notes with fewer ratings, newest first.
    The side counts are the note's stored counters (the last scoring's, plus ratings made since:
    `services.rating_submit`), so the page reads at most `limit` notes through one of the
    partial indexes of `Note.Meta`, whatever the number of ratings (a test checks the plan).
    """
    first: Least | F
    if participant.rater_factor is None:
        first = Least("neg_side_ratings", "pos_side_ratings")
    else:
        first = F("neg_side_ratings") if participant.rater_factor < 0 else F("pos_side_ratings")
    notes = (
        Note.objects.filter(status=NoteStatus.NEEDS_MORE_RATINGS)
        .exclude(author=participant)
        .exclude(Exists(Rating.objects.filter(note=OuterRef("pk"), rater=participant)))
        .select_related("post")
    )
    notes = filter_by_text(notes, text, prefix="post__")
    return notes.order_by(first, "num_ratings", "-created_at", "-pk")


def note_for_rating(*, note_id: int, participant: Participant) -> tuple[Note, Rating | None]:
    """The note with its post, and only this rater's own rating (never anybody else's)."""
    note = get_object_or_404(Note.objects.select_related("post"), pk=note_id)
    own = Rating.objects.filter(note=note, rater=participant).first()
    return note, own


@dataclass
class ScoringInputs:
    """Database rows as scorer arrays (crowdnotes_site/lib/scoring/scoring.py)."""

    note_pks: np.ndarray
    participant_pks: np.ndarray
    ratings: scoring.Ratings
    meta: scoring.NotesMeta
    previous_status: list[str]
    previous_intercept: list[float | None]
    previous_factor: list[float | None]
    previous_num_ratings: list[int]
    previous_rater: dict[int, tuple[float | None, float | None]]
    previous_explanation_md5: list[str | None] = field(default_factory=list)  # hex MD5 of score_explanation
    previous_sides: list[tuple[int, int]] = field(default_factory=list)  # (neg_side_ratings, pos_side_ratings)


# Stored status string -> the scorer's outcome code (the inverse of the scorer's names).
_STATUS_CODE: dict[str, int] = {name: code for code, name in scoring.STATUS_NAMES.items()}
_LEVEL_VALUE: dict[str, float] = {
    RatingLevel.HELPFUL: 1.0,
    RatingLevel.SOMEWHAT_HELPFUL: 0.5,
    RatingLevel.NOT_HELPFUL: 0.0,
}


def scoring_inputs(*, now: datetime, lock_after_days: float | None) -> ScoringInputs:
    """Read every note, participant and rating into arrays (streamed in chunks). Of each note's
    stored explanation only its MD5 is read: the rescoring compares, it never shows it."""
    people = list(Participant.objects.order_by("pk").values_list("pk", "rater_intercept", "rater_factor"))
    participant_pks = np.array([p[0] for p in people], dtype=np.int64)
    person = {pk: i for i, pk in enumerate(participant_pks.tolist())}
    last_non_nmr = dict(
        NoteStatusChange.objects.exclude(status=NoteStatus.NEEDS_MORE_RATINGS)
        .values("note_id")
        .annotate(last=Max("changed_at"))
        .values_list("note_id", "last")
    )
    rows = (
        Note.objects.order_by("pk")
        .annotate(explanation_md5=MD5("score_explanation"))
        .values_list(
            "pk", "author_id", "created_at", "classification", "status", "intercept", "factor", "num_ratings",
            "scored_at", "explanation_md5", "neg_side_ratings", "pos_side_ratings",
        )
        .iterator(chunk_size=10_000)
    )  # fmt: skip
    ms = _millis
    names: dict[str, str] = {}  # one string object per distinct status
    pks: list[int] = []
    created: list[int] = []
    scored: list[bool] = []
    not_misleading: list[bool] = []
    author: list[int] = []
    last_ms: list[int] = []
    statuses: list[str] = []
    intercepts: list[float | None] = []
    factors: list[float | None] = []
    counts: list[int] = []
    digests: list[str | None] = []
    sides: list[tuple[int, int]] = []
    for pk, author_id, created_at, classification, status, intercept, factor, n, scored_at, md5, neg, pos in rows:
        pks.append(pk)
        created.append(ms(created_at))
        scored.append(scored_at is not None)
        not_misleading.append(classification == Note.Classification.NOT_MISLEADING)
        author.append(person.get(author_id, -1) if author_id else -1)
        last_ms.append(ms(last_non_nmr[pk]) if pk in last_non_nmr else -1)
        statuses.append(names.setdefault(status, status))
        intercepts.append(intercept)
        factors.append(factor)
        counts.append(n)
        digests.append(md5)
        sides.append((neg, pos))
    note_pks = np.array(pks, dtype=np.int64)
    del pks
    now_ms = ms(now)
    created_ms = np.array(created, dtype=np.int64)
    previous = np.array([_STATUS_CODE.get(st, scoring.NO_STATUS) for st in statuses], dtype=np.int64)
    locked = None
    if lock_after_days is not None:
        # A status older than the lock age stays; only notes already scored have one to keep.
        old = (now_ms - created_ms > lock_after_days * scoring.DAY_MS) & np.array(scored, dtype=bool)
        locked = np.where(old, previous, scoring.NO_STATUS)
    meta = scoring.NotesMeta(
        n_notes=len(note_pks),
        not_misleading=np.array(not_misleading, dtype=bool),
        created_at_ms=created_ms,
        author=np.array(author, dtype=np.int64),
        previous_status=previous,
        last_non_nmr_status_ms=np.array(last_ms, dtype=np.int64),
        locked_status=locked,
    )
    if connection.vendor == "postgresql":
        ratings = _rating_arrays_copy(participant_pks, note_pks)
    else:
        ratings = _rating_arrays(person, {pk: i for i, pk in enumerate(note_pks.tolist())})
    return ScoringInputs(
        note_pks=note_pks,
        participant_pks=participant_pks,
        ratings=ratings,
        meta=meta,
        previous_status=statuses,
        previous_intercept=intercepts,
        previous_factor=factors,
        previous_num_ratings=counts,
        previous_rater={p[0]: (p[1], p[2]) for p in people},
        previous_explanation_md5=digests,
        previous_sides=sides,
    )


def scored_ratings() -> QuerySet[Rating]:
    """The ratings the scorer reads: of a revised note (issue 36), only those of its current
    version. A replaced version's ratings are kept apart as RetiredRating and never read here; a
    Rating row of an older version (or without one, i.e. of version 1) left on a revised note, e.g.
    by a re-run import, is left out too: it rated a text the note no longer shows."""
    revised = Note.objects.filter(current_version__number__gt=1)
    return Rating.objects.filter(
        ~Q(note_id__in=revised.values("pk")) | Q(version_id__in=revised.values("current_version_id"))
    )


# The same rule as scored_ratings() for the binary COPY (constants only, no input).
_REVISED_NOTES_SQL = (
    "SELECT n.{column} FROM notes_note n JOIN notes_noteversion v ON v.id = n.current_version_id WHERE v.number > 1"
)
_SCORED_RATING_SQL = (
    f"(r.note_id NOT IN ({_REVISED_NOTES_SQL.format(column='id')}) "
    f"OR r.version_id IN ({_REVISED_NOTES_SQL.format(column='current_version_id')}))"
)


def _rating_arrays(person: dict[int, int], index: dict[int, int]) -> scoring.Ratings:
    """All ratings as arrays. Tag flags and the value are computed by the database (as text, so
    SQLite works too) to avoid decoding every rating's JSON in Python."""
    tags = Cast("tags", TextField())
    query = (
        scored_ratings()
        .alias(tags_text=tags)
        .annotate(
            value=Case(
                *(When(level=level, then=Value(v)) for level, v in _LEVEL_VALUE.items()), output_field=FloatField()
            ),
            incorrect=ExpressionWrapper(Q(tags_text__contains='"notHelpfulIncorrect"'), output_field=BooleanField()),
            any_nh=ExpressionWrapper(Q(tags_text__contains='"notHelpful'), output_field=BooleanField()),
            created_ms=EpochMillis("created_at"),
            # The not-helpful tags as the scorer's bit mask (tag-outlier filter).
            nh_bits=sum(
                (
                    Case(When(tags_text__contains=f'"{tag}"', then=Value(bit)), default=Value(0))
                    for tag, bit in scoring.TAG_BIT.items()
                ),
                start=Value(0),
            ),
        )
        .values_list("rater_id", "note_id", "value", "incorrect", "any_nh", "created_ms", "nh_bits")
    )
    with connection.cursor() as cursor:
        sql, params = query.query.sql_with_params()
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    rater, note, value, incorrect, any_nh, created, nh_bits = zip(*rows, strict=True) if rows else ((),) * 7
    n = len(rows)
    return scoring.Ratings(
        rater=np.fromiter((person[u] for u in rater), dtype=np.int64, count=n),
        note=np.fromiter((index[i] for i in note), dtype=np.int64, count=n),
        value=np.asarray(value, dtype=np.float64),
        created_at_ms=np.asarray(created, dtype=np.int64),
        incorrect_tag=np.asarray(incorrect, dtype=bool),
        any_not_helpful_tag=np.asarray(any_nh, dtype=bool),
        not_helpful_tags=np.asarray(nh_bits, dtype=np.uint16),
    )


# One row of `COPY (…) TO STDOUT (FORMAT binary)` for _RATINGS_COPY_SQL (crowdnotes_site/lib/scoring/pgcopy.py; no
# NULLs: every column is COALESCEd).
_COPY_ROW = pgcopy.row_dtype(
    (("rater", ">i8"), ("note", ">i8"), ("value", ">f8"), ("incorrect", "u1"), ("any_nh", "u1"),
     ("created_ms", ">i8"), ("nh_bits", ">i4"))
)  # fmt: skip


def _ratings_copy_sql() -> str:
    level = " ".join(f"WHEN '{level}' THEN {v}" for level, v in _LEVEL_VALUE.items())
    bits = " + ".join(f"(CASE WHEN r.tags ? '{tag}' THEN {bit} ELSE 0 END)" for tag, bit in scoring.TAG_BIT.items())
    # Only constants of this module enter the SQL (levels, tag names), never input.
    return (
        "COPY (SELECT r.rater_id::int8, r.note_id::int8, "  # noqa: S608
        f"COALESCE(CASE r.level {level} END, 0.0)::float8, "
        "COALESCE(r.tags::text LIKE '%\"notHelpfulIncorrect\"%', false), "
        "COALESCE(r.tags::text LIKE '%\"notHelpful%', false), "
        "FLOOR(EXTRACT(EPOCH FROM r.created_at) * 1000)::int8, "
        f"COALESCE({bits}, 0)::int4 "
        f"FROM notes_rating r WHERE {_SCORED_RATING_SQL}) TO STDOUT (FORMAT binary)"
    )


def _rating_arrays_copy(participant_pks: np.ndarray, note_pks: np.ndarray) -> scoring.Ratings:
    """All ratings as arrays straight from PostgreSQL's binary COPY: fixed-width rows decoded by
    numpy, no Python object per rating. The stream is decoded in slices of ~1 M rows into the
    scorer's compact columns (23 bytes per rating), so the raw rows (68 bytes each) are never
    all in memory at once."""
    columns: list[dict[str, np.ndarray]] = []
    buffer = bytearray()
    header_left = len(pgcopy.HEADER)
    with connection.cursor() as cursor, cursor.copy(_ratings_copy_sql()) as copy:  # type: ignore[attr-defined]
        for block in copy:
            buffer += block
            if header_left and len(buffer) >= header_left:
                del buffer[:header_left]
                header_left = 0
            if not header_left and len(buffer) >= _COPY_SLICE_BYTES:
                n = len(buffer) // _COPY_ROW.itemsize
                columns.append(_decode_rating_rows(bytes(buffer[: n * _COPY_ROW.itemsize]), participant_pks, note_pks))
                del buffer[: n * _COPY_ROW.itemsize]
    n = max(len(buffer) - len(pgcopy.TRAILER), 0) // _COPY_ROW.itemsize
    columns.append(_decode_rating_rows(bytes(buffer[: n * _COPY_ROW.itemsize]), participant_pks, note_pks))
    del buffer
    return scoring.Ratings(**{name: np.concatenate([c[name] for c in columns]) for name in columns[0]})


_COPY_SLICE_BYTES = 1_000_000 * _COPY_ROW.itemsize


def _decode_rating_rows(data: bytes, participant_pks: np.ndarray, note_pks: np.ndarray) -> dict[str, np.ndarray]:
    """Whole binary COPY rows -> the scorer's columns. Ids -> scorer indices: both pk arrays
    are sorted (ordered by pk)."""
    rows = np.frombuffer(data, dtype=_COPY_ROW)
    return {
        "rater": np.searchsorted(participant_pks, rows["rater"].astype(np.int64)).astype(np.int32),
        "note": np.searchsorted(note_pks, rows["note"].astype(np.int64)).astype(np.int32),
        "value": rows["value"].astype(np.float64),
        "created_at_ms": rows["created_ms"].astype(np.int64),
        "incorrect_tag": rows["incorrect"].astype(bool),
        "any_not_helpful_tag": rows["any_nh"].astype(bool),
        "not_helpful_tags": rows["nh_bits"].astype(np.uint16),
    }


class EpochMillis(Func):
    """Milliseconds since the epoch, floored like int(dt.timestamp() * 1000); parsing 10^6
    timestamps in Python would take longer than scoring them."""

    output_field = BigIntegerField()

    def as_postgresql(self, compiler: Any, connection: Any, **extra: Any) -> Any:
        template = "FLOOR(EXTRACT(EPOCH FROM %(expressions)s) * 1000)::bigint"
        return self.as_sql(compiler, connection, template=template, **extra)

    def as_sqlite(self, compiler: Any, connection: Any, **extra: Any) -> Any:
        template = "CAST((julianday(%(expressions)s) - 2440587.5) * 86400000.0 + 0.5 AS INTEGER)"
        return self.as_sql(compiler, connection, template=template, **extra)


def _millis(value: datetime) -> int:
    return int(value.timestamp() * 1000)


# --- The scoring page ------------------------------------------------------------------------


@dataclass(frozen=True)
class ScoringOverview:
    """What the admin scoring page shows: recent runs, the last finished one and its status
    changes, the asked-for run still pending, and when the schedule runs next."""

    runs: list[ScoringRun]
    last: ScoringRun | None
    changes: list[NoteStatusChange]
    pending: ScoringRun | None
    interval_s: float
    next_run_at: datetime | None
    poll_seconds: int | None
    checked_at: datetime | None = None  # when this overview was read (the page says how fresh it is)

    @property
    def overdue(self) -> bool:
        """The next scheduled run should have started (a grace of SCORING_OVERDUE_S) but has not."""
        return bool(
            self.next_run_at
            and self.checked_at
            and self.pending is None
            and (self.checked_at - self.next_run_at).total_seconds() > SCORING_OVERDUE_S
        )


SCORING_POLL_S = 2
# With nothing pending the page still re-reads itself, so a scheduled run and its "next run" are never
# shown stale for long; a scheduled run later than the grace is shown as overdue.
SCORING_IDLE_POLL_S = 20
SCORING_OVERDUE_S = 30


def scoring_overview(*, limit: int = 10) -> ScoringOverview:
    from django.conf import settings

    runs = list(ScoringRun.objects.select_related("requested_by")[:limit])
    last = ScoringRun.objects.filter(state=ScoringRun.State.DONE).order_by("-finished_at", "-id").first()
    changes: list[NoteStatusChange] = []
    if last is not None and last.started_at is not None:
        changes = list(
            NoteStatusChange.objects.filter(changed_at=last.started_at).select_related("note").order_by("note_id")[:50]
        )
    pending = ScoringRun.objects.filter(state__in=[ScoringRun.State.QUEUED, ScoringRun.State.RUNNING]).first()
    interval_s = float(settings.CELERY_BEAT_SCHEDULE["score-notes"]["schedule"])  # type: ignore[arg-type]
    last_scheduled = ScoringRun.objects.filter(trigger=ScoringRun.Trigger.SCHEDULE).order_by("-created_at").first()
    from datetime import timedelta

    next_run_at = last_scheduled.created_at + timedelta(seconds=interval_s) if last_scheduled else None
    return ScoringOverview(
        runs=runs,
        last=last,
        changes=changes,
        pending=pending,
        interval_s=interval_s,
        next_run_at=next_run_at,
        poll_seconds=SCORING_POLL_S if pending else SCORING_IDLE_POLL_S,
        checked_at=timezone.now(),
    )


# --- Why a note has its status ---------------------------------------------------------------


@dataclass(frozen=True)
class SideCount:
    label: str
    ratings: int
    helpful: int  # Helpful or Somewhat helpful
    not_helpful: int


@dataclass(frozen=True)
class StatusExplanation:
    """The crowd status of a note in plain words, from the last scoring run's output: the note's
    intercept and factor, and its ratings counted per rater side (the sign of each rater's factor)."""

    status_label: str
    n_ratings: int
    sides: list[SideCount]
    unscored_raters: int
    intercept: float | None
    factor: float | None
    scored_at: datetime | None
    reasons: list[str]
    # The scorer's own stored reason (crowdnotes_site/lib/scoring/scoring_explain.py, without model numbers), when scored.
    scorer_reason: str = ""


def status_explanation(*, note: Note, config: scoring.ScoringConfig | None = None) -> StatusExplanation:
    """Derived from the stored scorer output only (the scoring engineer's per-note explanation,
    when stored by the scorer, replaces `reasons`)."""
    cfg = config or APP_SCORING_CONFIG
    helpful_q = Q(level__in=[RatingLevel.HELPFUL, RatingLevel.SOMEWHAT_HELPFUL])
    counts = Rating.objects.filter(note=note).aggregate(
        neg=Count("pk", filter=Q(rater__rater_factor__lt=0)),
        neg_h=Count("pk", filter=Q(rater__rater_factor__lt=0) & helpful_q),
        pos=Count("pk", filter=Q(rater__rater_factor__gte=0)),
        pos_h=Count("pk", filter=Q(rater__rater_factor__gte=0) & helpful_q),
        unscored=Count("pk", filter=Q(rater__rater_factor__isnull=True)),
        total=Count("pk"),
    )
    sides = [
        SideCount("raters with a negative factor", counts["neg"], counts["neg_h"], counts["neg"] - counts["neg_h"]),
        SideCount("raters with a positive factor", counts["pos"], counts["pos_h"], counts["pos"] - counts["pos_h"]),
    ]
    total = counts["total"]
    reasons: list[str] = []
    if total < cfg.min_ratings_for_status:
        missing = cfg.min_ratings_for_status - total
        reasons.append(
            f"{total} rating{'s' if total != 1 else ''} so far; a status needs at least "
            f"{cfg.min_ratings_for_status}: {missing} more."
        )
    if counts["unscored"]:
        reasons.append(
            f"{counts['unscored']} rating{'s' if counts['unscored'] != 1 else ''} come from raters the scorer has no "
            f"factor for yet (a rater needs {cfg.min_ratings_per_rater} ratings to be placed on a side)."
        )
    scored_sides = [s for s in sides if s.ratings]
    if len(scored_sides) == 1:
        other = sides[1] if scored_sides[0] is sides[0] else sides[0]
        reasons.append(
            f"All {scored_sides[0].ratings} placed ratings come from {scored_sides[0].label}: "
            f"needs raters from the other side ({other.label})."
        )
    if note.intercept is None:
        reasons.append("Not scored yet: the scorer has not had enough ratings of this note to estimate it.")
    else:
        assert note.factor is not None
        crnh = cfg.crnh_intercept + cfg.crnh_factor_multiplier * abs(note.factor)
        if note.status == NoteStatus.NEEDS_MORE_RATINGS:
            if note.intercept < cfg.crh_intercept:
                reasons.append(
                    f"Helpfulness score {note.intercept:.3f}: Helpful needs {cfg.crh_intercept:.2f} or more "
                    f"(agreement across sides); Not Helpful needs below {crnh:.3f}."
                )
            elif abs(note.factor) > cfg.crh_max_abs_factor:
                reasons.append(
                    f"Helpfulness score {note.intercept:.3f} is high, but the factor {note.factor:.3f} says one side "
                    f"carries it (Helpful needs |factor| ≤ {cfg.crh_max_abs_factor})."
                )
            else:
                reasons.append(
                    f"Helpfulness score {note.intercept:.3f} passes {cfg.crh_intercept:.2f}, but another rule of the "
                    "scorer holds it (for example too little support from the minority side, or too many "
                    "'Incorrect' tags)."
                )
        elif note.status == NoteStatus.HELPFUL:
            reasons.append(
                f"Helpfulness score {note.intercept:.3f} ≥ {cfg.crh_intercept:.2f} with factor {note.factor:.3f}: "
                "raters from both sides found it helpful."
            )
        else:
            reasons.append(f"Helpfulness score {note.intercept:.3f} is below {crnh:.3f}: rated not helpful.")
    return StatusExplanation(
        status_label=note.get_status_display(),
        n_ratings=total,
        sides=sides,
        unscored_raters=counts["unscored"],
        intercept=note.intercept,
        factor=note.factor,
        scored_at=note.scored_at,
        reasons=reasons,
        scorer_reason=note.status_reason,
    )


@dataclass(frozen=True)
class NoteProgress:
    """A contributor's note with its judging (stage by stage) and why it has its crowd status."""

    note: Note
    judging: Any  # judging.selectors.JudgingView | None (None: never judged, e.g. imported notes)
    status: StatusExplanation


# While a judge run is queued or running, the contributor's pages ask for news this often.
JUDGING_POLL_S, JUDGING_REFRESH_S = 2, 5


@dataclass(frozen=True)
class NotesProgress:
    items: list[NoteProgress]
    poll_seconds: int | None
    refresh_seconds: int | None


def notes_progress(*, notes: list[Note]) -> NotesProgress:
    judging = judging_for_notes(notes)
    items = [NoteProgress(note=n, judging=judging.get(n.pk), status=status_explanation(note=n)) for n in notes]
    running = any(i.judging is not None and i.judging.running for i in items)
    return NotesProgress(
        items=items,
        poll_seconds=JUDGING_POLL_S if running else None,
        refresh_seconds=JUDGING_REFRESH_S if running else None,
    )


def own_note(*, user: User, note_id: int) -> Note:
    return get_object_or_404(Note.objects.select_related("post"), pk=note_id, author__user=user)
