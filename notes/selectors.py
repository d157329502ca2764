from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
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
from django.http import Http404
from django.shortcuts import get_object_or_404
from django.utils import timezone

from crowdnotes_site.lib.communitynotes.data import pgcopy
from crowdnotes_site.lib.communitynotes.scoring import scorer as scoring
from crowdnotes_site.lib.memo import content_key
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
    count_hidden,
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


def posts_for_home(
    *, page: int = 1, topic: str = "", text: str = TEXT_WITH, size: int = HOME_PAGE_SIZE,
    hidden_notes: Collection[int] = frozenset(),
) -> HomePage:  # fmt: skip
    """One page of posts, newest first, with their notes but those in `hidden_notes` (the viewer's open
    blind comparison: notes.supernotes.selectors.hidden_note_ids). The page counts the prefetched
    notes (a COUNT annotation would group every post and note of the table before the limit), and
    reads one row past the page to know whether an older page exists (no COUNT of the whole table)."""
    # Only what the page shows of a note: no author join, and none of the scorer's stored fields
    # (rules JSON, explanation text) to read and decode for every note of 20 posts.
    notes = Note.objects.only("id", "post_id", "text", "status", "created_at", "current_version_id").order_by(
        "-created_at"
    )
    if hidden_notes:
        notes = notes.exclude(pk__in=hidden_notes)
    base = Post.objects.filter(topic=topic) if topic else Post.objects.all()
    hidden = count_hidden(base.without_text()) if text == TEXT_WITH else 0
    posts = filter_by_text(base, text)
    start = (page - 1) * size
    rows = list(
        posts.prefetch_related(Prefetch("notes", queryset=notes)).order_by("-created_at", "-pk")[
            start : start + size + 1
        ]
    )
    return HomePage(posts=rows[:size], page=page, has_next=len(rows) > size, hidden_without_text=hidden)


def post_notes(*, post: Post, hidden_notes: Collection[int] = frozenset()) -> tuple[list[Note], list[int]]:
    """The notes of a post's page, newest first, with their authors, but those in `hidden_notes` (the
    viewer's open blind comparison: notes.supernotes.selectors.hidden_note_ids); and the ids of the
    post's notes left out."""
    notes = list(post.notes.select_related("author__user").order_by("-created_at"))
    return [n for n in notes if n.pk not in hidden_notes], [n.pk for n in notes if n.pk in hidden_notes]


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


def rating_queue(
    *, participant: Participant, limit: int = 20, text: str = TEXT_WITH, hidden_notes: Collection[int] = frozenset()
) -> list[Note]:
    """The first `limit` notes of `rating_queue_queryset`."""
    return list(rating_queue_queryset(participant=participant, text=text, hidden_notes=hidden_notes)[:limit])


def rating_queue_hidden(*, participant: Participant, hidden_notes: Collection[int] = frozenset()) -> int:
    """How many notes of this rater's queue are on imported posts without text (hidden by
    default), up to a cap (`count_hidden`)."""
    return count_hidden(rating_queue_queryset(participant=participant, text=TEXT_WITHOUT, hidden_notes=hidden_notes))


def rating_queue_queryset(
    *, participant: Participant, text: str = TEXT_WITH, hidden_notes: Collection[int] = frozenset()
) -> QuerySet[Note]:
    """Notes this rater can rate next, most needed first.

    Notes that still need ratings, not written and not yet rated by this rater, and not in
    `hidden_notes` (the rater's open blind comparison: notes.supernotes.selectors.hidden_note_ids). A note lacking
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
    if hidden_notes:
        notes = notes.exclude(pk__in=hidden_notes)
    notes = filter_by_text(notes, text, prefix="post__")
    return notes.order_by(first, "num_ratings", "-created_at", "-pk")


def note_for_rating(
    *, note_id: int, participant: Participant, hidden_notes: Collection[int] = frozenset()
) -> tuple[Note, Rating | None]:
    """The note with its post, and only this rater's own rating (never anybody else's); 404 for a
    note in `hidden_notes` (the rater's open blind comparison)."""
    if note_id in hidden_notes:
        raise Http404("No note here.")
    note = get_object_or_404(Note.objects.select_related("post"), pk=note_id)
    own = Rating.objects.filter(note=note, rater=participant).first()
    return note, own


@dataclass
class ScoringInputs:
    """Database rows as scorer arrays (crowdnotes_site/lib/communitynotes/scoring/scorer.py), and what each note
    and participant holds now (to write only what a rescoring changes). Compact arrays, indexed
    like note_pks / participant_pks: no Python object per note, rater or rating."""

    note_pks: np.ndarray  # int64, ascending
    participant_pks: np.ndarray  # int64, ascending
    ratings: scoring.Ratings
    meta: scoring.NotesMeta
    previous_status: np.ndarray  # int8 status code (scoring.STATUS_NAMES), NO_STATUS if none
    previous_intercept: np.ndarray  # float64, NaN: none
    previous_factor: np.ndarray  # float64, NaN: none
    previous_num_ratings: np.ndarray  # int64
    previous_sides: np.ndarray  # int64 (n, 2): neg_side_ratings, pos_side_ratings
    previous_explanation_md5: np.ndarray  # V16: MD5 digest of score_explanation (.tobytes())
    previous_rater_intercept: np.ndarray  # float64 per participant, NaN: none
    previous_rater_factor: np.ndarray  # float64 per participant, NaN: none


# Stored status string -> the scorer's outcome code (the inverse of the scorer's names).
_STATUS_CODE: dict[str, int] = {name: code for code, name in scoring.STATUS_NAMES.items()}
_LEVEL_VALUE: dict[str, float] = {
    RatingLevel.HELPFUL: 1.0,
    RatingLevel.SOMEWHAT_HELPFUL: 0.5,
    RatingLevel.NOT_HELPFUL: 0.0,
}


def scoring_inputs(*, now: datetime, lock_after_days: float | None, binary: bool | None = None) -> ScoringInputs:
    """Read every note, participant and rating into compact arrays. On PostgreSQL all three
    come as binary COPY streams decoded by numpy in slices (no Python object per row); the
    ratings fill arrays preallocated from the table's row estimate (24 bytes per rating:
    `_rating_arrays_copy`). Of each note's stored explanation only its MD5 is read: the
    rescoring compares, it never shows it. `binary=False`: the same arrays through ORM queries
    (SQLite, the embedded demo; tests compare the two)."""
    if binary is None:
        binary = connection.vendor == "postgresql"
    if binary:
        people = _concat(_copy_slices(_PEOPLE_COPY_SQL, _PEOPLE_ROW))
        notes = _concat(_copy_slices(_notes_copy_sql(), _NOTE_ROW))
    else:
        people, notes = _people_rows(), _note_rows()
    participant_pks = people["pk"].astype(np.int64)
    note_pks = notes["pk"].astype(np.int64)
    now_ms = _millis(now)
    created_ms = notes["created_ms"].astype(np.int64)
    previous = notes["status"].astype(np.int8)
    locked = None
    if lock_after_days is not None:
        # A status older than the lock age stays; only notes already scored have one to keep.
        old = (now_ms - created_ms > lock_after_days * scoring.DAY_MS) & notes["scored"].astype(bool)
        locked = np.where(old, previous.astype(np.int64), scoring.NO_STATUS)
    author = _positions(participant_pks, notes["author"].astype(np.int64))
    meta = scoring.NotesMeta(
        n_notes=len(note_pks),
        not_misleading=notes["nm"].astype(bool),
        created_at_ms=created_ms,
        author=author.astype(np.int64),
        previous_status=previous.astype(np.int64),
        last_non_nmr_status_ms=notes["last_ms"].astype(np.int64),
        locked_status=locked,
    )
    if binary:
        ratings = _rating_arrays_copy(participant_pks, note_pks)
    else:
        ratings = _rating_arrays(
            {pk: i for i, pk in enumerate(participant_pks.tolist())}, {pk: i for i, pk in enumerate(note_pks.tolist())}
        )
    return ScoringInputs(
        note_pks=note_pks,
        participant_pks=participant_pks,
        ratings=ratings,
        meta=meta,
        previous_status=previous,
        previous_intercept=notes["intercept"].astype(np.float64),
        previous_factor=notes["factor"].astype(np.float64),
        previous_num_ratings=notes["count"].astype(np.int64),
        previous_sides=np.stack([notes["neg"].astype(np.int64), notes["pos"].astype(np.int64)], axis=1),
        previous_explanation_md5=notes["md5"],
        previous_rater_intercept=people["intercept"].astype(np.float64),
        previous_rater_factor=people["factor"].astype(np.float64),
    )


def _positions(pks: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """Index of each id in the ascending `pks`, -1 where it is not there (or 0: none)."""
    at = np.searchsorted(pks, ids)
    found = at < len(pks)
    found[found] &= pks[at[found]] == ids[found]
    return np.where(found, at, -1)


# Binary COPY row layouts (crowdnotes_site/lib/communitynotes/data/pgcopy.py): every column COALESCEd, so
# rows are fixed-width and numpy decodes a slice of them at once.
_PEOPLE_ROW = pgcopy.row_dtype((("pk", ">i8"), ("intercept", ">f8"), ("factor", ">f8")))
_PEOPLE_COPY_SQL = (
    "COPY (SELECT id::int8, COALESCE(rater_intercept, 'NaN')::float8, COALESCE(rater_factor, 'NaN')::float8 "
    "FROM notes_participant ORDER BY id) TO STDOUT (FORMAT binary)"
)
_NOTE_ROW = pgcopy.row_dtype(
    (("pk", ">i8"), ("author", ">i8"), ("created_ms", ">i8"), ("nm", "u1"), ("status", ">i2"),
     ("intercept", ">f8"), ("factor", ">f8"), ("count", ">i8"), ("scored", "u1"), ("md5", "V16"),
     ("neg", ">i8"), ("pos", ">i8"), ("last_ms", ">i8"))
)  # fmt: skip


def _notes_copy_sql() -> str:
    status = " ".join(f"WHEN '{name}' THEN {code}" for name, code in _STATUS_CODE.items())
    nmr = NoteStatus.NEEDS_MORE_RATINGS.value
    # Only constants of this module enter the SQL (status names and codes), never input.
    return (
        "COPY (SELECT n.id::int8, COALESCE(n.author_id, 0)::int8, "  # noqa: S608
        "FLOOR(EXTRACT(EPOCH FROM n.created_at) * 1000)::int8, "
        f"(n.classification = '{Note.Classification.NOT_MISLEADING.value}'), "
        f"(CASE n.status {status} ELSE {scoring.NO_STATUS} END)::int2, "
        "COALESCE(n.intercept, 'NaN')::float8, COALESCE(n.factor, 'NaN')::float8, n.num_ratings::int8, "
        "(n.scored_at IS NOT NULL), decode(md5(n.score_explanation), 'hex'), "
        "n.neg_side_ratings::int8, n.pos_side_ratings::int8, "
        "COALESCE(FLOOR(EXTRACT(EPOCH FROM l.last) * 1000), -1)::int8 "
        "FROM notes_note n LEFT JOIN (SELECT note_id, max(changed_at) AS last FROM notes_notestatuschange "
        f"WHERE status <> '{nmr}' GROUP BY note_id) l ON l.note_id = n.id ORDER BY n.id) TO STDOUT (FORMAT binary)"
    )


def _copy_slices(sql: str, row: np.dtype, slice_bytes: int | None = None) -> Iterator[np.ndarray]:
    """The rows of a `COPY (…) TO STDOUT (FORMAT binary)` of fixed-width rows, as structured
    arrays of about `slice_bytes` each: the stream is never held whole."""
    size = slice_bytes or _COPY_SLICE_BYTES
    buffer = bytearray()
    header_left = len(pgcopy.HEADER)
    with connection.cursor() as cursor, cursor.copy(sql) as copy:  # type: ignore[attr-defined]
        for block in copy:
            buffer += block
            if header_left and len(buffer) >= header_left:
                del buffer[:header_left]
                header_left = 0
            if not header_left and len(buffer) >= size:
                yield _whole_rows(buffer, row, len(buffer))
    yield _whole_rows(buffer, row, max(len(buffer) - len(pgcopy.TRAILER), 0))


def _whole_rows(buffer: bytearray, row: np.dtype, available: int) -> np.ndarray:
    """The whole rows among the first `available` bytes of `buffer`, taken out of it (one copy
    of them, through a memoryview: a bytearray slice would be a second)."""
    n = available // row.itemsize * row.itemsize
    with memoryview(buffer) as view:
        data = bytes(view[:n])
    del buffer[:n]
    return np.frombuffer(data, dtype=row)


def _concat(slices: Iterator[np.ndarray]) -> np.ndarray:
    return np.concatenate(list(slices))


def _people_rows() -> np.ndarray:
    """_PEOPLE_ROW's columns through the ORM (SQLite: the embedded demo)."""
    rows = list(Participant.objects.order_by("pk").values_list("pk", "rater_intercept", "rater_factor"))
    out = np.zeros(len(rows), dtype=_values_dtype(_PEOPLE_ROW))
    for i, (pk, intercept, factor) in enumerate(rows):
        out[i] = (pk, np.nan if intercept is None else intercept, np.nan if factor is None else factor)
    return out


def _note_rows() -> np.ndarray:
    """_NOTE_ROW's columns through the ORM (SQLite: the embedded demo)."""
    last_non_nmr = dict(
        NoteStatusChange.objects.exclude(status=NoteStatus.NEEDS_MORE_RATINGS)
        .values("note_id")
        .annotate(last=Max("changed_at"))
        .values_list("note_id", "last")
    )
    rows = list(
        Note.objects.order_by("pk")
        .annotate(explanation_md5=MD5("score_explanation"))
        .values_list(
            "pk", "author_id", "created_at", "classification", "status", "intercept", "factor", "num_ratings",
            "scored_at", "explanation_md5", "neg_side_ratings", "pos_side_ratings",
        )
    )  # fmt: skip
    out = np.zeros(len(rows), dtype=_values_dtype(_NOTE_ROW))
    nan = np.nan
    for i, (pk, author, created, classification, status, intercept, factor, n, scored, md5, neg, pos) in enumerate(
        rows
    ):
        out[i] = (
            pk, author or 0, _floor_millis(created), classification == Note.Classification.NOT_MISLEADING,
            _STATUS_CODE.get(status, scoring.NO_STATUS), nan if intercept is None else intercept,
            nan if factor is None else factor, n, scored is not None, np.void(bytes.fromhex(md5 or "0" * 32)), neg, pos,
            _floor_millis(last_non_nmr[pk]) if pk in last_non_nmr else -1,
        )  # fmt: skip
    return out


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _floor_millis(value: datetime) -> int:
    """Whole milliseconds since the epoch, exact (what FLOOR(EXTRACT(EPOCH …) * 1000) gives)."""
    return (value - _EPOCH) // timedelta(milliseconds=1)


def _values_dtype(row: np.dtype) -> np.dtype:
    """The value fields of a binary COPY row layout, in native byte order (no counts, no lengths)."""
    fields: Mapping[str, Any] = row.fields or {}
    names = row.names or ()
    return np.dtype(
        [(name, fields[name][0].newbyteorder("=")) for name in names if name != "fields" and not name.endswith("_len")]
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


# One row of `COPY (…) TO STDOUT (FORMAT binary)` for _ratings_copy_sql (crowdnotes_site/lib/communitynotes/data/pgcopy.py; no
# NULLs: every column is COALESCEd). The level comes as its value in halves (0, 1, 2).
_COPY_ROW = pgcopy.row_dtype(
    (("rater", ">i8"), ("note", ">i8"), ("halves", ">i2"), ("incorrect", "u1"), ("any_nh", "u1"),
     ("created_ms", ">i8"), ("nh_bits", ">i4"))
)  # fmt: skip


def _ratings_copy_sql() -> str:
    level = " ".join(f"WHEN '{level}' THEN {round(v * 2)}" for level, v in _LEVEL_VALUE.items())
    bits = " + ".join(f"(CASE WHEN r.tags ? '{tag}' THEN {bit} ELSE 0 END)" for tag, bit in scoring.TAG_BIT.items())
    # Only constants of this module enter the SQL (levels, tag names), never input.
    return (
        "COPY (SELECT r.rater_id::int8, r.note_id::int8, "  # noqa: S608
        f"COALESCE(CASE r.level {level} END, 0)::int2, "
        "COALESCE(r.tags::text LIKE '%\"notHelpfulIncorrect\"%', false), "
        "COALESCE(r.tags::text LIKE '%\"notHelpful%', false), "
        "FLOOR(EXTRACT(EPOCH FROM r.created_at) * 1000)::int8, "
        f"COALESCE({bits}, 0)::int4 "
        f"FROM notes_rating r WHERE {_SCORED_RATING_SQL}) TO STDOUT (FORMAT binary)"
    )


# The scorer's columns of a rating, as held (24 bytes per rating).
_RATING_COLUMNS: dict[str, type[np.generic]] = {
    "rater": np.int32, "note": np.int32, "value": np.float32, "created_at_ms": np.int64,
    "incorrect_tag": np.bool_, "any_not_helpful_tag": np.bool_, "not_helpful_tags": np.uint16,
}  # fmt: skip


def _rating_count_estimate() -> int:
    """The planner's row estimate of the ratings table (kept by ANALYZE / autovacuum), or an
    exact count for a table never analysed or small enough to count at once."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT reltuples::int8 FROM pg_class WHERE oid = 'notes_rating'::regclass")
        (estimate,) = cursor.fetchone()
        if estimate < 1_000_000:
            cursor.execute("SELECT count(*) FROM notes_rating")
            (estimate,) = cursor.fetchone()
    return int(estimate)


def _rating_arrays_copy(participant_pks: np.ndarray, note_pks: np.ndarray) -> scoring.Ratings:
    """All ratings as the scorer's compact columns straight from PostgreSQL's binary COPY:
    fixed-width rows decoded by numpy a slice (250,000 rows, 15 MB) at a time into arrays
    preallocated from the table's row estimate (2 % headroom; grown by a quarter if the
    estimate was low), so memory is ~24 bytes per rating plus one slice, never a list of
    slices to concatenate. Ratings of a note or participant not in the pk arrays (created
    after they were read) are left out."""
    capacity = int(_rating_count_estimate() * 1.02) + 1024
    cols: dict[str, np.ndarray] = {name: np.empty(capacity, dtype=kind) for name, kind in _RATING_COLUMNS.items()}
    n = 0
    for rows in _copy_slices(_ratings_copy_sql(), _COPY_ROW):
        part = _decode_rating_rows(rows, participant_pks, note_pks)
        m = len(part["rater"])
        if n + m > capacity:
            capacity = max(n + m, capacity + capacity // 4)
            for name, col in cols.items():
                grown = np.empty(capacity, dtype=col.dtype)
                grown[:n] = col[:n]
                cols[name] = grown
        for name, col in cols.items():
            col[n : n + m] = part[name]
        n += m
    return scoring.Ratings(**{name: col[:n] for name, col in cols.items()})


_COPY_SLICE_BYTES = 250_000 * _COPY_ROW.itemsize  # ~15 MB of rows decoded at a time


def _decode_rating_rows(rows: np.ndarray, participant_pks: np.ndarray, note_pks: np.ndarray) -> dict[str, np.ndarray]:
    """Binary COPY rows -> the scorer's columns. Ids -> scorer indices (both pk arrays are
    ascending); a row whose note or rater is not there is dropped."""
    rater = _positions(participant_pks, rows["rater"].astype(np.int64))
    note = _positions(note_pks, rows["note"].astype(np.int64))
    keep = (rater >= 0) & (note >= 0)
    if not keep.all():
        rows, rater, note = rows[keep], rater[keep], note[keep]
    return {
        "rater": rater.astype(np.int32),
        "note": note.astype(np.int32),
        "value": rows["halves"].astype(np.float32) * np.float32(0.5),
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
    # The scorer's own stored reason (crowdnotes_site/lib/communitynotes/scoring/explain.py, without model numbers), when scored.
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
