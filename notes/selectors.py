from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

import numpy as np
from django.db import connection
from django.db.models import (
    BigIntegerField,
    BooleanField,
    Case,
    Count,
    ExpressionWrapper,
    FloatField,
    Func,
    Max,
    Prefetch,
    Q,
    QuerySet,
    TextField,
    Value,
    When,
)
from django.db.models.functions import Cast, Least
from django.shortcuts import get_object_or_404

from evidence.models import Snippet
from evidence.snippets import snippet_is_confirmed, snippet_refining
from notes import scoring
from notes.models import DraftJob, Note, NoteStatus, NoteStatusChange, Participant, Post, Rating, RatingLevel

if TYPE_CHECKING:
    from django.contrib.auth.models import AnonymousUser, User


def posts_for_home(*, limit: int = 50) -> QuerySet[Post]:
    notes = Note.objects.select_related("author__user").order_by("-created_at")
    return (
        Post.objects.annotate(n_notes=Count("notes"))
        .prefetch_related(Prefetch("notes", queryset=notes))
        .order_by("-created_at")[:limit]
    )


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
    from evidence.search.selectors import automation_running

    finding = automation_running(job=job)
    reasons: list[str] = []
    if finding:
        reasons.append("CrowdNotes is still looking for evidence: wait for its proposals.")
    if processing:
        reasons.append(f"{len(processing)} source(s) are still being processed: wait for them or remove them.")
    if pending:
        reasons.append(f"Review every snippet first: {len(pending)} still need your confirm or reject.")
    if not confirmed and not finding:
        reasons.append("Confirm at least one snippet that supports the context you want to add.")
    waiting = bool(processing) or finding or job.state == DraftJob.State.DRAFTING
    return DraftGate(
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


def participant_of(*, user: User | AnonymousUser) -> Participant | None:
    """The viewer's scoring identity (None for anonymous visitors and users who never had one)."""
    if not user.is_authenticated:
        return None
    return Participant.objects.filter(user=user).first()


def drafts_for_user(*, user: User) -> QuerySet[DraftJob]:
    return (
        DraftJob.objects.filter(contributor=user)
        .exclude(state=DraftJob.State.SUBMITTED)
        .select_related("post")
        .order_by("-updated_at")
    )


def notes_for_user(*, user: User) -> QuerySet[Note]:
    return Note.objects.filter(author__user=user).select_related("post").order_by("-created_at")


# --- Ratings and scoring ---------------------------------------------------------------------


def rating_queue(*, participant: Participant, limit: int = 20) -> list[Note]:
    """Notes this rater can rate next, most needed first.

    Notes that still need ratings, not written and not yet rated by this rater. A note lacking
    raters from this rater's side (the sign of their factor) comes first, then notes lacking
    either side (for raters without a factor yet), then notes with fewer ratings, newest first.
    """
    side_filter = Q(ratings__rater__rater_factor__lt=0)
    other_filter = Q(ratings__rater__rater_factor__gte=0)
    if participant.rater_factor is not None and participant.rater_factor >= 0:
        side_filter, other_filter = other_filter, side_filter
    notes = (
        Note.objects.filter(status=NoteStatus.NEEDS_MORE_RATINGS)
        .exclude(author=participant)
        .exclude(ratings__rater=participant)
        .annotate(
            n_ratings=Count("ratings"),
            n_my_side=Count("ratings", filter=side_filter),
            n_other_side=Count("ratings", filter=other_filter),
        )
        .annotate(n_min_side=Least("n_my_side", "n_other_side"))
        .select_related("post")
    )
    if participant.rater_factor is None:
        order = ["n_min_side", "n_ratings", "-created_at", "-pk"]
    else:
        order = ["n_my_side", "n_ratings", "-created_at", "-pk"]
    return list(notes.order_by(*order)[:limit])


def note_for_rating(*, note_id: int, participant: Participant) -> tuple[Note, Rating | None]:
    """The note with its post, and only this rater's own rating (never anybody else's)."""
    note = get_object_or_404(Note.objects.select_related("post"), pk=note_id)
    own = Rating.objects.filter(note=note, rater=participant).first()
    return note, own


@dataclass
class ScoringInputs:
    """Database rows as scorer arrays (notes/scoring.py)."""

    note_pks: np.ndarray
    participant_pks: np.ndarray
    ratings: scoring.Ratings
    meta: scoring.NotesMeta
    previous_status: list[str]
    previous_intercept: list[float | None]
    previous_factor: list[float | None]
    previous_num_ratings: list[int]
    previous_rater: dict[int, tuple[float | None, float | None]]


# Stored status string -> the scorer's outcome code (the inverse of the scorer's names).
_STATUS_CODE: dict[str, int] = {name: code for code, name in scoring.STATUS_NAMES.items()}
_LEVEL_VALUE: dict[str, float] = {
    RatingLevel.HELPFUL: 1.0,
    RatingLevel.SOMEWHAT_HELPFUL: 0.5,
    RatingLevel.NOT_HELPFUL: 0.0,
}


def scoring_inputs(*, now: datetime, lock_after_days: float | None) -> ScoringInputs:
    """Read every note, participant and rating into arrays (streamed in chunks)."""
    people = list(Participant.objects.order_by("pk").values_list("pk", "rater_intercept", "rater_factor"))
    participant_pks = np.array([p[0] for p in people], dtype=np.int64)
    person = {pk: i for i, pk in enumerate(participant_pks.tolist())}
    last_non_nmr = dict(
        NoteStatusChange.objects.exclude(status=NoteStatus.NEEDS_MORE_RATINGS)
        .values("note_id")
        .annotate(last=Max("changed_at"))
        .values_list("note_id", "last")
    )
    rows = list(
        Note.objects.order_by("pk").values_list(
            "pk", "author_id", "created_at", "classification", "status", "intercept", "factor", "num_ratings",
            "scored_at",
        )
    )  # fmt: skip
    note_pks = np.array([r[0] for r in rows], dtype=np.int64)
    index = {pk: i for i, pk in enumerate(note_pks.tolist())}
    ms = _millis
    now_ms = ms(now)
    created = np.array([ms(r[2]) for r in rows], dtype=np.int64)
    previous = np.array([_STATUS_CODE.get(r[4], scoring.NO_STATUS) for r in rows], dtype=np.int64)
    locked = None
    if lock_after_days is not None:
        # A status older than the lock age stays; only notes already scored have one to keep.
        old = (now_ms - created > lock_after_days * scoring.DAY_MS) & np.array(
            [r[8] is not None for r in rows], dtype=bool
        )
        locked = np.where(old, previous, scoring.NO_STATUS)
    meta = scoring.NotesMeta(
        n_notes=len(rows),
        not_misleading=np.array([r[3] == Note.Classification.NOT_MISLEADING for r in rows], dtype=bool),
        created_at_ms=created,
        author=np.array([person.get(r[1], -1) if r[1] else -1 for r in rows], dtype=np.int64),
        previous_status=previous,
        last_non_nmr_status_ms=np.array(
            [ms(last_non_nmr[r[0]]) if r[0] in last_non_nmr else -1 for r in rows], dtype=np.int64
        ),
        locked_status=locked,
    )
    ratings = _rating_arrays(person, index)
    return ScoringInputs(
        note_pks=note_pks,
        participant_pks=participant_pks,
        ratings=ratings,
        meta=meta,
        previous_status=[r[4] for r in rows],
        previous_intercept=[r[5] for r in rows],
        previous_factor=[r[6] for r in rows],
        previous_num_ratings=[r[7] for r in rows],
        previous_rater={p[0]: (p[1], p[2]) for p in people},
    )


def _rating_arrays(person: dict[int, int], index: dict[int, int]) -> scoring.Ratings:
    """All ratings as arrays. Tag flags and the value are computed by the database (as text, so
    SQLite works too) to avoid decoding every rating's JSON in Python."""
    tags = Cast("tags", TextField())
    query = (
        Rating.objects.alias(tags_text=tags)
        .annotate(
            value=Case(
                *(When(level=level, then=Value(v)) for level, v in _LEVEL_VALUE.items()), output_field=FloatField()
            ),
            incorrect=ExpressionWrapper(Q(tags_text__contains='"notHelpfulIncorrect"'), output_field=BooleanField()),
            any_nh=ExpressionWrapper(Q(tags_text__contains='"notHelpful'), output_field=BooleanField()),
            created_ms=EpochMillis("created_at"),
        )
        .values_list("rater_id", "note_id", "value", "incorrect", "any_nh", "created_ms")
    )
    with connection.cursor() as cursor:
        sql, params = query.query.sql_with_params()
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    rater, note, value, incorrect, any_nh, created = zip(*rows, strict=True) if rows else ((),) * 6
    n = len(rows)
    return scoring.Ratings(
        rater=np.fromiter((person[u] for u in rater), dtype=np.int64, count=n),
        note=np.fromiter((index[i] for i in note), dtype=np.int64, count=n),
        value=np.asarray(value, dtype=np.float64),
        created_at_ms=np.asarray(created, dtype=np.int64),
        incorrect_tag=np.asarray(incorrect, dtype=bool),
        any_not_helpful_tag=np.asarray(any_nh, dtype=bool),
    )


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
