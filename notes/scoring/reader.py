"""The scorer's input read from the database: ratings, notes and participants as the scorer's arrays (binary COPY, or the ORM on SQLite)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
from django.db import connection
from django.db.models import (
    BigIntegerField,
    BooleanField,
    Case,
    ExpressionWrapper,
    FloatField,
    Func,
    Max,
    Q,
    QuerySet,
    TextField,
    Value,
    When,
)
from django.db.models.functions import MD5, Cast

from crowdnotes_site.lib.communitynotes import scoring
from crowdnotes_site.lib.communitynotes.data import pgcopy
from notes.models import (
    Note,
    NoteStatus,
    NoteStatusChange,
    Participant,
    Rating,
    RatingLevel,
)


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
