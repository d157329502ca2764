"""Streaming readers and writers for the public Community Notes TSV downloads (no ORM).

Columns are found by header name, so every schema version reads: old notes carry
`participantId` instead of `noteAuthorParticipantId`; old v1 ratings carry helpful/notHelpful
(0/1) instead of `helpfulnessLevel`; ratings may be split over several files in a folder.
Readers yield typed rows or `Skipped` records (line number and reason); nothing is held in
memory beyond one row.
"""

from __future__ import annotations

import csv
import html
import io
import sys
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from crowdnotes_site.lib import status as names
from crowdnotes_site.lib.communitynotes.data import files as download_file
from crowdnotes_site.lib.communitynotes.scoring.scorer import NOT_HELPFUL_TAGS as NOT_HELPFUL_TAG_COLUMNS

csv.field_size_limit(sys.maxsize)

HELPFUL = "HELPFUL"
SOMEWHAT_HELPFUL = "SOMEWHAT_HELPFUL"
NOT_HELPFUL = "NOT_HELPFUL"
LEVEL_VALUES = {HELPFUL: 1.0, SOMEWHAT_HELPFUL: 0.5, NOT_HELPFUL: 0.0}
NOT_MISLEADING = "NOT_MISLEADING"
MISLEADING = "MISINFORMED_OR_POTENTIALLY_MISLEADING"
STATUSES = set(names.SHOWN)

# Rating columns that are answers, not tags, although their names start like tags.
_NOT_TAGS = {"helpful", "notHelpful", "helpfulnessLevel", "helpfulNum"}


@dataclass(frozen=True)
class Skipped:
    path: str
    line: int
    reason: str


@dataclass(frozen=True)
class NoteRow:
    note_id: int
    author_id: str
    created_at_ms: int
    tweet_id: str
    classification: str
    summary: str
    trustworthy_sources: bool | None
    is_media_note: bool | None = None
    is_collaborative_note: bool | None = None


@dataclass(frozen=True)
class RatingRow:
    note_id: int
    rater_id: str
    created_at_ms: int
    level: str
    tags: frozenset[str] = frozenset()

    @property
    def value(self) -> float:
        return LEVEL_VALUES[self.level]


@dataclass(frozen=True)
class StatusHistoryRow:
    note_id: int
    author_id: str
    created_at_ms: int
    first_non_nmr_ms: int | None
    first_non_nmr_status: str
    current_status_ms: int | None
    current_status: str
    most_recent_non_nmr_ms: int | None
    most_recent_non_nmr_status: str
    locked_status: str = ""


Row = TypeVar("Row")


_EXAMPLES = 20  # skipped lines a ReadReport keeps as examples


@dataclass
class ReadReport:
    """Counts for a read: rows read and skipped (by reason, with a few examples)."""

    read: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    examples: list[Skipped] = field(default_factory=list)

    def add_skip(self, skip: Skipped) -> None:
        self.skipped[skip.reason] += 1
        if len(self.examples) < _EXAMPLES:
            self.examples.append(skip)

    def merge(self, later: ReadReport) -> None:
        """Add the counts of a read that came after this one (examples stay the first ones)."""
        self.read += later.read
        self.skipped.update(later.skipped)
        self.examples.extend(later.examples[: max(_EXAMPLES - len(self.examples), 0)])

    def rows(self, items: Iterable[Row | Skipped]) -> Iterator[Row]:
        """Pass rows through, recording skips."""
        for item in items:
            if isinstance(item, Skipped):
                self.add_skip(item)
            else:
                self.read += 1
                yield item


def tsv_files(path: str | Path) -> list[Path]:
    """A file, or every *.tsv file in a folder (sorted, so reads are deterministic)."""
    p = Path(path)
    if p.is_dir():
        return sorted(f for f in p.iterdir() if f.suffix == ".tsv" and f.is_file())
    return [p]


def _records(path: Path) -> Iterator[tuple[int, dict[str, str] | None]]:
    """(line number, {header: value}) per data row; None when the field count is wrong. `path`:
    a TSV or X's zip of it (download_file)."""
    with download_file.open_data(path) as raw, io.TextIOWrapper(raw, encoding="utf-8", newline="") as fh:
        reader = csv.reader(fh, delimiter="\t", quoting=csv.QUOTE_NONE)
        header = next(reader, None)
        if header is None:
            return
        yield from _keyed(reader, header, 2)


def _keyed(
    reader: Iterator[list[str]], header: list[str], first_line: int
) -> Iterator[tuple[int, dict[str, str] | None]]:
    header = [h.strip().lstrip("\ufeff") for h in header]
    width = len(header)
    for line_no, fields in enumerate(reader, start=first_line):
        if not fields:
            continue
        if len(fields) != width:
            yield line_no, None
            continue
        yield line_no, dict(zip(header, fields, strict=True))


def _text_records(text: str, header: list[str], first_line: int) -> Iterator[tuple[int, dict[str, str] | None]]:
    """_records of a block of whole data lines (a file's text after its header, in parts)."""
    reader = csv.reader(io.StringIO(text, newline=""), delimiter="\t", quoting=csv.QUOTE_NONE)
    yield from _keyed(reader, header, first_line)


def _int(value: str | None) -> int | None:
    if value is None or value.strip() == "":
        return None
    try:
        return int(float(value)) if ("." in value or "e" in value.lower()) else int(value)
    except ValueError:
        return None


def _flag(value: str | None) -> bool | None:
    if value is None or value.strip() == "":
        return None
    return value.strip() in {"1", "1.0", "True", "true"}


def _first(rec: dict[str, str], *names: str) -> str | None:
    for name in names:
        if name in rec and rec[name] != "":
            return rec[name]
    return None


@dataclass(frozen=True)
class _Record:
    """A data row whose noteId reads, with where it stands (for the reader's own skips)."""

    file: str
    line: int
    rec: dict[str, str]
    note_id: int

    def skip(self, reason: str) -> Skipped:
        return Skipped(self.file, self.line, reason)


def _note_records(path: str | Path) -> Iterator[_Record | Skipped]:
    """Every data row of the file(s) at `path`; Skipped for a wrong field count or a bad noteId."""
    for file in tsv_files(path):
        yield from _with_note_id(str(file), _records(file))


def _with_note_id(file: str, records: Iterable[tuple[int, dict[str, str] | None]]) -> Iterator[_Record | Skipped]:
    for line, rec in records:
        if rec is None:
            yield Skipped(file, line, "wrong number of fields")
            continue
        note_id = _int(rec.get("noteId"))
        if note_id is None:
            yield Skipped(file, line, "bad noteId")
            continue
        yield _Record(file, line, rec, note_id)


def read_notes_text(file: str, header: list[str], text: str, first_line: int) -> Iterator[NoteRow | Skipped]:
    """read_notes of a block of whole lines of `file` (its header given; the block's first line
    is line `first_line`): the same rows and skips, so a large file can be read in parts."""
    return _notes_of(_with_note_id(file, _text_records(text, header, first_line)))


def read_status_history_text(
    file: str, header: list[str], text: str, first_line: int
) -> Iterator[StatusHistoryRow | Skipped]:
    """read_status_history of a block of whole lines (see read_notes_text)."""
    return _status_of(_with_note_id(file, _text_records(text, header, first_line)))


def read_notes(path: str | Path) -> Iterator[NoteRow | Skipped]:
    return _notes_of(_note_records(path))


def _notes_of(records: Iterable[_Record | Skipped]) -> Iterator[NoteRow | Skipped]:
    for r in records:
        if isinstance(r, Skipped):
            yield r
            continue
        author = _first(r.rec, "noteAuthorParticipantId", "participantId")
        if not author:
            yield r.skip("missing author id")
            continue
        created = _int(r.rec.get("createdAtMillis"))
        if created is None:
            yield r.skip("bad createdAtMillis")
            continue
        classification = (r.rec.get("classification") or "").strip()
        if classification not in {MISLEADING, NOT_MISLEADING}:
            yield r.skip("unknown classification")
            continue
        yield NoteRow(
            note_id=r.note_id,
            author_id=author,
            created_at_ms=created,
            tweet_id=(r.rec.get("tweetId") or "").strip(),
            classification=classification,
            # The public files store the text HTML-escaped (&quot;, &amp;); templates escape on output.
            summary=html.unescape(r.rec.get("summary") or ""),
            trustworthy_sources=_flag(r.rec.get("trustworthySources")),
            is_media_note=_flag(r.rec.get("isMediaNote")),
            is_collaborative_note=_flag(r.rec.get("isCollaborativeNote")),
        )


@dataclass(frozen=True)
class NoteTimeRow:
    """What the delay analytics need of a notes-file row (any layout)."""

    note_id: int
    created_at_ms: int  # 0 when the file has none
    tweet_id: str


def read_note_times(path: str | Path) -> Iterator[NoteTimeRow | Skipped]:
    """noteId, createdAtMillis and tweetId of every note row, read by header name; unlike
    read_notes it keeps rows whose author or classification would not import."""
    for r in _note_records(path):
        if isinstance(r, Skipped):
            yield r
            continue
        created = _int(r.rec.get("createdAtMillis"))
        yield NoteTimeRow(r.note_id, created if created and created > 0 else 0, (r.rec.get("tweetId") or "").strip())


def _rating_level(rec: dict[str, str]) -> str | None:
    """helpfulnessLevel when present; else the v1 helpful / notHelpful answer."""
    level = (rec.get("helpfulnessLevel") or "").strip()
    if level in LEVEL_VALUES:
        return level
    if _flag(rec.get("notHelpful")):
        return NOT_HELPFUL
    if _flag(rec.get("helpful")):
        return HELPFUL
    return None


def _is_tag(column: str) -> bool:
    """A rating column that is a reason tag (helpful*/notHelpful*), not an answer."""
    return (column.startswith("helpful") or column.startswith("notHelpful")) and column not in _NOT_TAGS


def read_ratings(path: str | Path) -> Iterator[RatingRow | Skipped]:
    for r in _note_records(path):
        if isinstance(r, Skipped):
            yield r
            continue
        rater = _first(r.rec, "raterParticipantId", "participantId")
        if not rater:
            yield r.skip("missing rater id")
            continue
        created = _int(r.rec.get("createdAtMillis"))
        if created is None:
            yield r.skip("bad createdAtMillis")
            continue
        level = _rating_level(r.rec)
        if level is None:
            yield r.skip("no helpfulness answer")
            continue
        tags = frozenset(k for k, v in r.rec.items() if v in ("1", "1.0") and _is_tag(k))
        yield RatingRow(r.note_id, rater, created, level, tags)


@dataclass
class RatingColumns:
    """Ratings as parallel lists (the fast path for scoring files, no per-row objects)."""

    note_id: list[int] = field(default_factory=list)
    rater_id: list[str] = field(default_factory=list)
    created_at_ms: list[int] = field(default_factory=list)
    value: list[float] = field(default_factory=list)
    incorrect: list[bool] = field(default_factory=list)
    any_not_helpful_tag: list[bool] = field(default_factory=list)
    not_helpful_tags: list[int] = field(default_factory=list)  # bit k: NOT_HELPFUL_TAGS[k]


def read_rating_columns(path: str | Path, report: ReadReport) -> RatingColumns:
    """Same rows and skip reasons as read_ratings, about three times faster."""
    cols = RatingColumns()
    for chunk in iter_rating_columns(path, report):
        for name in RatingColumns.__dataclass_fields__:
            getattr(cols, name).extend(getattr(chunk, name))
    return cols


@dataclass(frozen=True)
class _RatingLayout:
    """Where a ratings file keeps what the scorer reads (column positions from its header)."""

    width: int
    note: int | None
    rater: int | None
    time: int | None
    level: int | None
    helpful: int | None
    not_helpful: int | None
    incorrect: int | None
    nh_tags: tuple[int, ...]
    tag_bits: tuple[tuple[int, int], ...]

    @classmethod
    def from_header(cls, header: list[str]) -> _RatingLayout:
        pos = {h.strip(): i for i, h in enumerate(header)}
        return cls(
            width=len(header),
            note=pos.get("noteId"),
            rater=pos.get("raterParticipantId", pos.get("participantId")),
            time=pos.get("createdAtMillis"),
            level=pos.get("helpfulnessLevel"),
            helpful=pos.get("helpful"),
            not_helpful=pos.get("notHelpful"),
            incorrect=pos.get("notHelpfulIncorrect"),
            nh_tags=tuple(i for h, i in pos.items() if h.startswith("notHelpful") and _is_tag(h)),
            tag_bits=tuple((pos[t], 1 << k) for k, t in enumerate(NOT_HELPFUL_TAG_COLUMNS) if t in pos),
        )


_ONES = frozenset({"1", "1.0"})
# One parsed rating: note id, rater id, createdAtMillis, value, incorrect tag, any not-helpful
# tag, not-helpful tag bits.
_RatingTuple = tuple[int, str, int, float, bool, bool, int]


def _parse_rating_line(line: str, lay: _RatingLayout) -> _RatingTuple | str | None:
    """One data line (without its line end): the rating, a skip reason, or None (blank line)."""
    f = line.split("\t")
    if len(f) != lay.width:
        return "wrong number of fields" if line.strip() else None
    try:
        note_id = int(f[lay.note])  # type: ignore[index]
    except (TypeError, ValueError):
        return "bad noteId"
    if not -(2**63) <= note_id < 2**63:  # ids are 64-bit (the database column too)
        return "bad noteId"
    rater = f[lay.rater] if lay.rater is not None else ""
    if not rater:
        return "missing rater id"
    created = _int(f[lay.time]) if lay.time is not None else None
    if created is None:
        return "bad createdAtMillis"
    level = f[lay.level].strip() if lay.level is not None else ""
    if level in LEVEL_VALUES:
        value = LEVEL_VALUES[level]
    elif lay.not_helpful is not None and f[lay.not_helpful] in _ONES:
        value = 0.0
    elif lay.helpful is not None and f[lay.helpful] in _ONES:
        value = 1.0
    else:
        return "no helpfulness answer"
    return (
        note_id,
        rater,
        created,
        value,
        lay.incorrect is not None and f[lay.incorrect] in _ONES,
        any(f[i] in _ONES for i in lay.nh_tags),
        sum(bit for i, bit in lay.tag_bits if f[i] in _ONES),
    )


def _read_header(fh: IO[str]) -> _RatingLayout | None:
    header = fh.readline().rstrip("\r\n").lstrip("\ufeff").split("\t")
    return None if header == [""] else _RatingLayout.from_header(header)


def iter_rating_columns(path: str | Path, report: ReadReport, chunk_rows: int = 1_000_000) -> Iterator[RatingColumns]:
    """read_rating_columns in chunks of at most `chunk_rows` ratings, so a caller can turn each
    chunk into compact arrays and memory stays flat in the file size."""
    cols = RatingColumns()
    for file in tsv_files(path):
        with download_file.open_data(file) as raw, io.TextIOWrapper(raw, encoding="utf-8", newline="") as fh:
            lay = _read_header(fh)
            if lay is None:
                continue
            for line_no, line in enumerate(fh, start=2):
                row = _parse_rating_line(line.rstrip("\r\n"), lay)
                if row is None:
                    continue
                if isinstance(row, str):
                    report.add_skip(Skipped(str(file), line_no, row))
                    continue
                report.read += 1
                cols.note_id.append(row[0])
                cols.rater_id.append(row[1])
                cols.created_at_ms.append(row[2])
                cols.value.append(row[3])
                cols.incorrect.append(row[4])
                cols.any_not_helpful_tag.append(row[5])
                cols.not_helpful_tags.append(row[6])
                if len(cols.value) >= chunk_rows:
                    yield cols
                    cols = RatingColumns()
    if cols.value:
        yield cols


# ---------------------------------------------------------------- vectorised ratings reader


@dataclass
class RatingArrays:
    """A block of ratings as compact arrays (iter_rating_arrays), in file order."""

    note_id: np.ndarray  # int64
    rater_keys: list[str]  # the block's distinct rater ids, in order of first appearance
    rater_code: np.ndarray  # int32 index into rater_keys, per rating
    created_at_ms: np.ndarray  # int64
    value: np.ndarray  # float32 (0, 0.5, 1: exact)
    incorrect: np.ndarray  # bool
    any_not_helpful_tag: np.ndarray  # bool
    not_helpful_tags: np.ndarray  # uint16, bit k: NOT_HELPFUL_TAGS[k]


_LEVEL_BYTES = tuple((np.frombuffer(k.encode(), np.uint8), v) for k, v in LEVEL_VALUES.items())
# The golden-ratio multiplier of _distinct_keys' row hash: a grouping key whose collisions are
# checked, so any fast hash serves (not the stable sample hash mix64 of download_training).
_HASH_MUL = np.uint64(0x9E3779B97F4A7C15)


def _arrays_from_rows(rows: list[_RatingTuple]) -> RatingArrays:
    """The slow path's rows as a block (rater keys by first appearance)."""
    keys: dict[str, int] = {}
    codes = np.fromiter((keys.setdefault(r[1], len(keys)) for r in rows), dtype=np.int32, count=len(rows))
    return RatingArrays(
        note_id=np.array([r[0] for r in rows], dtype=np.int64),
        rater_keys=list(keys),
        rater_code=codes,
        created_at_ms=np.array([r[2] for r in rows], dtype=np.int64),
        value=np.array([r[3] for r in rows], dtype=np.float32),
        incorrect=np.array([r[4] for r in rows], dtype=bool),
        any_not_helpful_tag=np.array([r[5] for r in rows], dtype=bool),
        not_helpful_tags=np.array([r[6] for r in rows], dtype=np.uint16),
    )


def _digits(a: np.ndarray, s: np.ndarray, e: np.ndarray, most: int) -> tuple[np.ndarray, np.ndarray]:
    """Fields a[s:e] read as non-negative decimal integers of 1..`most` digits (int64, ok mask).
    Anything else (signs, spaces, decimals, overflow) is not ok and goes to the slow path."""
    length = e - s
    ok = np.zeros(len(s), dtype=bool)
    out = np.zeros(len(s), dtype=np.int64)
    for n_digits in np.unique(length).tolist():
        if not 1 <= n_digits <= most:
            continue
        rows = np.flatnonzero(length == n_digits)
        start = s[rows]
        val = np.zeros(len(rows), dtype=np.uint64)
        good = np.ones(len(rows), dtype=bool)
        for k in range(n_digits):
            d = a[start + k].astype(np.uint64) - np.uint64(48)  # wraps below '0'
            good &= d <= 9
            val = val * np.uint64(10) + d
        good &= val <= np.uint64(2**63 - 1)
        ok[rows] = good
        out[rows] = val.astype(np.int64)
    return out, ok


def _is_one(a: np.ndarray, s: np.ndarray, e: np.ndarray) -> np.ndarray:
    """Fields equal to "1" or "1.0" (the readers' truthy flags)."""
    length = e - s
    c0 = a[s]
    return (c0 == 49) & ((length == 1) | ((length == 3) & (a[s + 1] == 46) & (a[s + 2] == 48)))


def _equals(a: np.ndarray, s: np.ndarray, e: np.ndarray, word: np.ndarray) -> np.ndarray:
    rows = np.flatnonzero((e - s) == len(word))
    for k, byte in enumerate(word.tolist()):
        rows = rows[a[s[rows] + k] == byte]
    hit = np.zeros(len(s), dtype=bool)
    hit[rows] = True
    return hit


def _distinct_keys(matrix: np.ndarray) -> tuple[list[str], np.ndarray]:
    """Distinct rows of a NUL-padded byte matrix (width a multiple of 8): keys in order of first
    appearance and each row's code. Rows are hashed to uint64 for a fast sort; a hash collision
    (checked) falls back to sorting the bytes themselves."""
    words = matrix.view(np.uint64)
    h = words[:, 0].copy()
    for j in range(1, words.shape[1]):
        h = (h ^ (h >> np.uint64(29))) * _HASH_MUL ^ words[:, j]
    _, first, inv = np.unique(h, return_index=True, return_inverse=True)
    if words.shape[1] > 1 and np.any(matrix[first[inv]] != matrix):
        strings = matrix.view(f"S{matrix.shape[1]}").ravel()
        _, first, inv = np.unique(strings, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    rank = np.empty(len(order), dtype=np.int32)
    rank[order] = np.arange(len(order), dtype=np.int32)
    keys = [b.decode("ascii") for b in matrix[first[order]].view(f"S{matrix.shape[1]}").ravel().tolist()]
    return keys, rank[inv.ravel()]


@dataclass(frozen=True)
class _Lines:
    """Where the lines and the tab-separated fields of a block of whole lines are (byte offsets
    into `a`, the block padded so that a field may be read 3 bytes ahead)."""

    a: np.ndarray
    starts: np.ndarray
    ends: np.ndarray
    tabs: np.ndarray
    first_tab: np.ndarray  # per line, the index in `tabs` of its first tab
    right_width: np.ndarray  # per line, whether it has exactly `width` fields
    width: int

    @classmethod
    def of(cls, block: bytes, width: int) -> _Lines:
        a = np.frombuffer(block + b"\n\0\0\0", dtype=np.uint8)
        ends = np.flatnonzero(a[: len(block) + 1] == 10)
        if len(block) and block[-1:] == b"\n":
            ends = ends[:-1]  # the padding newline closes nothing
        starts = np.empty(len(ends), dtype=np.int64)
        starts[0:1] = 0
        starts[1:] = ends[:-1] + 1
        tabs = np.flatnonzero(a[: len(block)] == 9)
        first_tab = np.searchsorted(tabs, starts)
        right_width = np.searchsorted(tabs, ends) - first_tab == width - 1
        return cls(a, starts, ends, tabs, first_tab, right_width, width)

    def fields(self, lines: np.ndarray) -> Callable[[int], tuple[np.ndarray, np.ndarray]]:
        """(starts, ends) of field k on each of `lines` (all of the right width)."""
        ft = self.first_tab[lines]
        last = self.width - 1

        def field(k: int) -> tuple[np.ndarray, np.ndarray]:
            s = self.starts[lines] if k == 0 else self.tabs[ft + (k - 1)] + 1
            e = self.ends[lines] if k == last else self.tabs[ft + k]
            return s, e

        return field


def _copy_fields(out: np.ndarray, a: np.ndarray, s: np.ndarray, e: np.ndarray) -> None:
    """Each field a[s:e] into its row of `out`, left-aligned (the rest stays zero); `out` is at
    least as wide as the longest field."""
    length = e - s
    for k in range(out.shape[1]):
        on = length > k
        if not on.any():
            break
        out[:, k] = a.take(s + k, mode="clip") * on


def _parse_block(block: bytes, lay: _RatingLayout, file: str, first_line: int, report: ReadReport) -> RatingArrays:
    """Parse whole lines of ASCII text without CR or NUL (the caller checks) with numpy; lines
    the strict vectorised checks do not accept go through _parse_rating_line, so every row reads
    exactly as on the line-by-line path, in file order."""
    located = _Lines.of(block, lay.width)
    a, starts, ends = located.a, located.starts, located.ends
    lines = np.flatnonzero(located.right_width)
    field = located.fields(lines)
    assert lay.note is not None and lay.rater is not None and lay.time is not None
    note_id, ok = _digits(a, *field(lay.note), 19)
    created, ok_t = _digits(a, *field(lay.time), 18)
    ok &= ok_t
    rs, re_ = field(lay.rater)
    ok &= re_ > rs
    value = np.full(len(lines), np.nan, dtype=np.float32)
    if lay.level is not None:
        ls, le = field(lay.level)
        for word, v in _LEVEL_BYTES:
            value[_equals(a, ls, le, word)] = v
        empty = le == ls
    else:
        empty = np.ones(len(lines), dtype=bool)
    if lay.not_helpful is not None:
        value[empty & np.isnan(value) & _is_one(a, *field(lay.not_helpful))] = 0.0
    if lay.helpful is not None:
        value[empty & np.isnan(value) & _is_one(a, *field(lay.helpful))] = 1.0
    ok &= ~np.isnan(value)
    # Lines the strict checks refuse read one by one (same rows and skip reasons as ever).
    fast = np.zeros(len(starts), dtype=bool)
    fast[lines[ok]] = True
    slow_rows: list[_RatingTuple] = []
    slow_at: list[int] = []
    for i in np.flatnonzero(~fast).tolist():
        row = _parse_rating_line(block[starts[i] : ends[i]].decode("ascii"), lay)
        if row is None:
            continue
        if isinstance(row, str):
            report.add_skip(Skipped(file, first_line + i, row))
            continue
        slow_rows.append(row)
        slow_at.append(i)
    n_fast = int(ok.sum())
    report.read += n_fast + len(slow_rows)
    sel = np.flatnonzero(ok)
    inc = _is_one(a, *field(lay.incorrect))[sel] if lay.incorrect is not None else np.zeros(n_fast, dtype=bool)
    any_nh = np.zeros(n_fast, dtype=bool)
    for col in lay.nh_tags:
        any_nh |= _is_one(a, *field(col))[sel]
    tag_mask = np.zeros(n_fast, dtype=np.uint16)
    for col, bit in lay.tag_bits:
        tag_mask[_is_one(a, *field(col))[sel]] |= np.uint16(bit)
    rs, re_ = rs[sel], re_[sel]
    slow_ids = [r[1].encode("ascii") for r in slow_rows]
    width = max(int((re_ - rs).max(initial=1)), max((len(b) for b in slow_ids), default=1))
    width = -(-width // 8) * 8
    matrix = np.zeros((n_fast + len(slow_rows), width), dtype=np.uint8)
    _copy_fields(matrix[:n_fast], a, rs, re_)
    for j, raw in enumerate(slow_ids):
        matrix[n_fast + j, : len(raw)] = np.frombuffer(raw, dtype=np.uint8)
    out_note = np.concatenate([note_id[sel], np.array([r[0] for r in slow_rows], dtype=np.int64)])
    out_time = np.concatenate([created[sel], np.array([r[2] for r in slow_rows], dtype=np.int64)])
    out_value = np.concatenate([value[sel], np.array([r[3] for r in slow_rows], dtype=np.float32)])
    out_inc = np.concatenate([inc, np.array([r[4] for r in slow_rows], dtype=bool)])
    out_nh = np.concatenate([any_nh, np.array([r[5] for r in slow_rows], dtype=bool)])
    out_tags = np.concatenate([tag_mask, np.array([r[6] for r in slow_rows], dtype=np.uint16)])
    if slow_rows:  # back into file order
        order = np.argsort(np.concatenate([lines[sel], np.array(slow_at, dtype=np.int64)]), kind="stable")
        matrix = matrix[order]
        out_note, out_time, out_value = out_note[order], out_time[order], out_value[order]
        out_inc, out_nh, out_tags = out_inc[order], out_nh[order], out_tags[order]
    keys, codes = _distinct_keys(matrix) if len(matrix) else ([], np.zeros(0, dtype=np.int32))
    return RatingArrays(out_note, keys, codes, out_time, out_value, out_inc, out_nh, out_tags)


def iter_rating_arrays(
    path: str | Path, report: ReadReport, block_bytes: int = 8 << 20, workers: int = 2
) -> Iterator[RatingArrays]:
    """The rows of iter_rating_columns (same values, skips and order) as array blocks of about
    `block_bytes` of text each, parsed with numpy in `workers` threads (numpy releases the GIL,
    so blocks parse side by side on several cores). Blocks come out in file order and at most
    `workers` + 1 are held at once, so memory is a few times one block, whatever the file size.
    A block with a CR, a NUL or a non-ASCII byte, or a header without noteId, rater or
    createdAtMillis, is read line by line from there on instead (the exact same rules)."""
    with ThreadPoolExecutor(max_workers=workers) as pool:
        for file in tsv_files(path):
            with download_file.open_data(file) as raw:
                header_line = raw.readline()
                if b"\r" in header_line.rstrip(b"\r\n"):  # a lone CR ends the header line
                    with download_file.reopened_at(file, raw, 0) as again:
                        text = io.TextIOWrapper(again, encoding="utf-8", newline="")
                        lay = _read_header(text)
                        if lay is not None:
                            yield from _blocks_line_by_line(text, lay, str(file), 2, report)
                    continue
                header = header_line.decode("utf-8").rstrip("\r\n").lstrip("\ufeff").split("\t")
                if header == [""]:
                    continue
                lay = _RatingLayout.from_header(header)
                offset, line_no = len(header_line), 2
                vectorised = None not in (lay.note, lay.rater, lay.time)
                # Blocks being parsed, oldest first, each with its own report (merged in order,
                # so skip examples and counts are those of a sequential read).
                pending: deque[tuple[Future[RatingArrays], ReadReport]] = deque()
                carry = b""
                while vectorised:
                    chunk = raw.read(block_bytes)
                    block = carry + chunk
                    carry = b""
                    if chunk:
                        cut = block.rfind(b"\n") + 1
                        if cut == 0:
                            carry = block
                            continue
                        block, carry = block[:cut], block[cut:]
                    if not block:
                        break
                    if b"\r" in block or b"\0" in block or not block.isascii():
                        vectorised = False
                        break
                    own = ReadReport()
                    pending.append((pool.submit(_parse_block, block, lay, str(file), line_no, own), own))
                    line_no += block.count(b"\n") + (0 if block.endswith(b"\n") else 1)
                    offset += len(block)
                    while len(pending) > workers:
                        yield from _finished(pending, report)
                while pending:
                    yield from _finished(pending, report)
                if not vectorised:
                    with download_file.reopened_at(file, raw, offset) as rest:
                        yield from _blocks_line_by_line(
                            io.TextIOWrapper(rest, encoding="utf-8", newline=""), lay, str(file), line_no, report
                        )


def _finished(pending: deque[tuple[Future[RatingArrays], ReadReport]], report: ReadReport) -> Iterator[RatingArrays]:
    """The oldest pending block once parsed (nothing if it holds no rating); its report merged."""
    future, own = pending.popleft()
    blk = future.result()
    report.merge(own)
    if len(blk.value):
        yield blk


def _blocks_line_by_line(
    text: IO[str], lay: _RatingLayout, file: str, line_no: int, report: ReadReport
) -> Iterator[RatingArrays]:
    """The rest of a file read line by line (universal newlines, UTF-8), as iter_rating_columns."""
    rows: list[_RatingTuple] = []
    for line in text:
        row = _parse_rating_line(line.rstrip("\r\n"), lay)
        if isinstance(row, str):
            report.add_skip(Skipped(file, line_no, row))
        elif row is not None:
            report.read += 1
            rows.append(row)
            if len(rows) >= 1_000_000:
                yield _arrays_from_rows(rows)
                rows = []
        line_no += 1
    if rows:
        yield _arrays_from_rows(rows)


def read_status_history(path: str | Path) -> Iterator[StatusHistoryRow | Skipped]:
    return _status_of(_note_records(path))


def _status_of(records: Iterable[_Record | Skipped]) -> Iterator[StatusHistoryRow | Skipped]:
    for r in records:
        if isinstance(r, Skipped):
            yield r
            continue
        current = (r.rec.get("currentStatus") or "").strip()
        # Old dumps leave currentStatus empty for notes never scored; keep those rows.
        if current and current not in STATUSES:
            yield r.skip("unknown currentStatus")
            continue

        def ms(name: str, rec: dict[str, str] = r.rec) -> int | None:
            value = _int(rec.get(name))
            return None if value is None or value < 0 else value

        yield StatusHistoryRow(
            note_id=r.note_id,
            author_id=_first(r.rec, "noteAuthorParticipantId", "participantId") or "",
            created_at_ms=ms("createdAtMillis") or 0,
            first_non_nmr_ms=ms("timestampMillisOfFirstNonNMRStatus"),
            first_non_nmr_status=(r.rec.get("firstNonNMRStatus") or "").strip(),
            current_status_ms=ms("timestampMillisOfCurrentStatus"),
            current_status=current,
            most_recent_non_nmr_ms=ms("timestampMillisOfLatestNonNMRStatus")
            or ms("timestampMillisOfMostRecentNonNMRStatus"),
            most_recent_non_nmr_status=(r.rec.get("mostRecentNonNMRStatus") or "").strip(),
            locked_status=(r.rec.get("lockedStatus") or "").strip(),
        )


@dataclass(frozen=True)
class ScoredNoteRow:
    note_id: int
    num_ratings: int
    intercept: float | None
    factor: float | None
    status: str
    extra: tuple[str, ...] = ()  # values of the extra columns given to write_scored_notes


@dataclass(frozen=True)
class ScoredNoteReference:
    """A row of the reference's scored notes output (any of its versions)."""

    note_id: int
    intercept: float | None
    factor: float | None
    status: str
    num_ratings: int | None


def _float(value: str | None) -> float | None:
    if value is None or value.strip() == "" or value.strip().lower() == "nan":
        return None
    try:
        return float(value)
    except ValueError:
        return None


def read_scored_notes(path: str | Path) -> Iterator[ScoredNoteReference | Skipped]:
    """Reference outputs: scored_notes.tsv (core*) or the older scoredNotes (note*)."""
    for r in _note_records(path):
        if isinstance(r, Skipped):
            yield r
            continue
        yield ScoredNoteReference(
            note_id=r.note_id,
            intercept=_float(_first(r.rec, "coreNoteIntercept", "noteIntercept")),
            factor=_float(_first(r.rec, "coreNoteFactor1", "noteFactor1")),
            status=_first(r.rec, "coreRatingStatus", "ratingStatus") or "",
            num_ratings=_int(r.rec.get("numRatings")),
        )


SCORED_NOTES_COLUMNS = [
    "noteId",
    "numRatings",
    "coreNoteIntercept",
    "coreNoteFactor1",
    "coreRatingStatus",
]
HELPFULNESS_COLUMNS = ["raterParticipantId", "coreRaterIntercept", "coreRaterFactor1"]


def fmt_number(value: float | None) -> str:
    """A number as the TSV writers spell it (empty for missing / NaN)."""
    return _fmt(value)


def _fmt(value: float | None) -> str:
    if value is None or value != value:  # NaN
        return ""
    return f"{value:.6g}"


def write_scored_notes(path: str | Path, rows: Iterable[ScoredNoteRow], extra_columns: Iterable[str] = ()) -> int:
    """The reference's scored-notes columns, then `extra_columns` (each row's `extra`)."""
    count = 0
    header = SCORED_NOTES_COLUMNS + list(extra_columns)
    with Path(path).open("w", encoding="utf-8", newline="") as fh:
        fh.write("\t".join(header) + "\n")
        for r in rows:
            tail = "\t" + "\t".join(r.extra) if r.extra else ""
            if tail.count("\t") != len(r.extra) or "\n" in tail:  # a value holds a tab or a newline
                tail = "".join("\t" + v.replace("\t", " ").replace("\n", " ") for v in r.extra)
            fh.write(f"{r.note_id}\t{r.num_ratings}\t{_fmt(r.intercept)}\t{_fmt(r.factor)}\t{r.status}{tail}\n")
            count += 1
    return count


def write_helpfulness_scores(path: str | Path, rows: Iterable[tuple[str, float | None, float | None]]) -> int:
    count = 0
    with Path(path).open("w", encoding="utf-8", newline="") as fh:
        fh.write("\t".join(HELPFULNESS_COLUMNS) + "\n")
        for rater_id, intercept, factor in rows:
            fh.write(f"{rater_id}\t{_fmt(intercept)}\t{_fmt(factor)}\n")
            count += 1
    return count


# ---------------------------------------------------------------- vectorised import chunks

IMPORT_LEVELS = (HELPFUL, SOMEWHAT_HELPFUL, NOT_HELPFUL)  # ImportBlock.level codes


@dataclass
class ImportBlock:
    """A block of rating lines as the importer stores them (parse_import_block), in file order."""

    note_id: np.ndarray  # int64, the noteId as a number (its text form is str(value))
    rater_keys: list[str]  # distinct rater ids, in order of first appearance
    rater_code: np.ndarray  # int32 index into rater_keys, per rating
    created_at_ms: np.ndarray  # int64
    level: np.ndarray  # int8 index into IMPORT_LEVELS
    tags: np.ndarray  # int64, bit k: tag_names[k]
    tag_names: tuple[str, ...]  # the header's tag columns, sorted by name
    wrong_fields: int  # non-blank lines with the wrong number of fields (skipped)
    no_answer: int  # lines with no helpfulness answer (skipped)


def parse_import_block(block: bytes, header: list[str]) -> ImportBlock | None:
    """The rating lines of `block` (whole lines of one file, header excluded) parsed for the
    importer by pyarrow's CSV reader (tab-separated, no quoting) and compute functions, or None
    when any line needs the importer's general rules: a byte that is not plain ASCII or is CR /
    NUL, a noteId or createdAtMillis that is not plain digits, an empty rater id, or an answer
    that is not exactly one of the three levels (or, with an empty level, a v1 helpful /
    notHelpful flag of "1" / "1.0", or both flags "0" or empty: no answer). For every line it
    accepts, the result is what the general rules give: they accept the same text with the same
    meaning. (pyarrow parses ~3x faster than the numpy field scan this replaced, and the parse
    was the import's slowest step.)"""
    names = [h.strip() for h in header]
    pos = {name: i for i, name in enumerate(names)}  # the last column of a repeated name, as the SQL path
    tag_names = tuple(sorted({n for n in names if _is_tag(n)}))
    if len(tag_names) > 62 or b"\r" in block or b"\0" in block or not block.isascii():
        return None
    lay = _RatingLayout.from_header(header)
    if lay.note is None or lay.rater is None or lay.time is None:
        return None
    wrong_fields = 0

    def wrong(row: pacsv.InvalidRow) -> str:
        nonlocal wrong_fields
        wrong_fields += bool(row.text.strip())  # lines with the wrong number of fields; blank ones silently
        return "skip"

    columns = [f"c{i}" for i in range(len(header))]  # positions, not names: a name may repeat
    col = [pa.array([], pa.string())] * len(header)
    if block.strip(b"\n"):  # (pyarrow refuses an empty file)
        table = pacsv.read_csv(
            io.BytesIO(block),
            read_options=pacsv.ReadOptions(column_names=columns, use_threads=False, block_size=len(block) + 1),
            parse_options=pacsv.ParseOptions(
                delimiter="\t", quote_char=False, escape_char=False, invalid_row_handler=wrong
            ),
            convert_options=pacsv.ConvertOptions(
                column_types=dict.fromkeys(columns, pa.string()), strings_can_be_null=False
            ),
        ).combine_chunks()
        if table.num_rows:
            col = [table.column(i).chunk(0) for i in range(len(header))]
    n = len(col[lay.note])
    note_id, ok = _arrow_digits(col[lay.note], 19)
    created, ok_t = _arrow_digits(col[lay.time], 18)
    level = np.full(n, -1, dtype=np.int8)
    if lay.level is not None:
        for code, word in enumerate(IMPORT_LEVELS):
            level[_arrow_bool(pc.equal(col[lay.level], word))] = code
        empty = _arrow_bool(pc.equal(pc.binary_length(col[lay.level]), 0))
    else:
        empty = np.ones(n, dtype=bool)
    if lay.not_helpful is not None:
        level[empty & (level < 0) & _arrow_one(col[lay.not_helpful])] = IMPORT_LEVELS.index(NOT_HELPFUL)
    if lay.helpful is not None:
        level[empty & (level < 0) & _arrow_one(col[lay.helpful])] = IMPORT_LEVELS.index(HELPFUL)
    # No answer at all (skipped, counted): no level, and each v1 flag present is "0" or empty.
    unanswered = empty & (level < 0)
    for flag in (lay.not_helpful, lay.helpful):
        if flag is not None:
            unanswered &= _arrow_bool(pc.is_in(col[flag], pa.array(["", "0"])))
    rater = col[lay.rater]
    has_rater = _arrow_bool(pc.greater(pc.binary_length(rater), 0))
    if not (ok.all() and ok_t.all() and has_rater.all() and ((level >= 0) | unanswered).all()):
        return None
    no_answer = int(np.count_nonzero(unanswered))
    kept = ~unanswered
    tags = np.zeros(n, dtype=np.int64)
    for bit, name in enumerate(tag_names):
        tags[_arrow_one(col[pos[name]])] |= np.int64(1 << bit)
    if no_answer:
        rater = rater.filter(pa.array(kept))
        note_id, created, level, tags = note_id[kept], created[kept], level[kept], tags[kept]
    encoded = pc.dictionary_encode(rater)  # the distinct ids in order of first appearance
    keys = encoded.dictionary.to_pylist()
    codes = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int32, copy=False)
    return ImportBlock(note_id, keys, codes, created, level, tags, tag_names, wrong_fields, no_answer)


def _arrow_bool(values: pa.Array) -> np.ndarray:
    return values.to_numpy(zero_copy_only=False).astype(bool, copy=False)


def _arrow_one(values: pa.Array) -> np.ndarray:
    """Fields equal to "1" or "1.0" (the readers' truthy flags)."""
    return _arrow_bool(pc.is_in(values, pa.array(["1", "1.0"])))


def _arrow_digits(values: pa.Array, most: int) -> tuple[np.ndarray, np.ndarray]:
    """Fields read as non-negative decimal integers of 1..`most` digits (int64, ok mask).
    Anything else (signs, spaces, decimals, overflow) is not ok and goes to the slow path."""
    length = pc.binary_length(values).to_numpy()
    ok = (length >= 1) & (length <= most) & _arrow_bool(pc.ascii_is_decimal(values))
    if not ok.all():
        return np.zeros(len(values), dtype=np.int64), ok  # the block goes to the general rules
    try:
        return pc.cast(values, pa.int64()).to_numpy(), ok
    except pa.ArrowInvalid:  # past 2**63 - 1
        return np.zeros(len(values), dtype=np.int64), np.zeros(len(values), dtype=bool)
