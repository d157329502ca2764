"""Streaming readers and writers for the public Community Notes TSV downloads (no ORM).

Columns are found by header name, so every schema version reads: old notes carry
`participantId` instead of `noteAuthorParticipantId`; old v1 ratings carry helpful/notHelpful
(0/1) instead of `helpfulnessLevel`; ratings may be split over several files in a folder.
Readers yield typed rows or `Skipped` records (line number and reason); nothing is held in
memory beyond one row.
"""

from __future__ import annotations

import csv
import sys
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from notes import status as names
from notes.scoring import NOT_HELPFUL_TAGS as NOT_HELPFUL_TAG_COLUMNS

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


@dataclass
class ReadReport:
    """Counts for a read: rows read and skipped (by reason, with a few examples)."""

    read: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    examples: list[Skipped] = field(default_factory=list)

    def add_skip(self, skip: Skipped) -> None:
        self.skipped[skip.reason] += 1
        if len(self.examples) < 20:
            self.examples.append(skip)

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
    """(line number, {header: value}) per data row; None when the field count is wrong."""
    with path.open(newline="", encoding="utf-8") as fh:
        reader = csv.reader(fh, delimiter="\t", quoting=csv.QUOTE_NONE)
        header = next(reader, None)
        if header is None:
            return
        header = [h.strip().lstrip("\ufeff") for h in header]
        width = len(header)
        for line_no, fields in enumerate(reader, start=2):
            if not fields:
                continue
            if len(fields) != width:
                yield line_no, None
                continue
            yield line_no, dict(zip(header, fields, strict=True))


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
        for line, rec in _records(file):
            if rec is None:
                yield Skipped(str(file), line, "wrong number of fields")
                continue
            note_id = _int(rec.get("noteId"))
            if note_id is None:
                yield Skipped(str(file), line, "bad noteId")
                continue
            yield _Record(str(file), line, rec, note_id)


def read_notes(path: str | Path) -> Iterator[NoteRow | Skipped]:
    for r in _note_records(path):
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
            summary=r.rec.get("summary") or "",
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


def iter_rating_columns(path: str | Path, report: ReadReport, chunk_rows: int = 1_000_000) -> Iterator[RatingColumns]:
    """read_rating_columns in chunks of at most `chunk_rows` ratings, so a caller can turn each
    chunk into compact arrays and memory stays flat in the file size."""
    cols = RatingColumns()
    ones = {"1", "1.0"}
    for file in tsv_files(path):
        with file.open(encoding="utf-8", newline="") as fh:
            header = fh.readline().rstrip("\r\n").lstrip("\ufeff").split("\t")
            if header == [""]:
                continue
            pos = {h.strip(): i for i, h in enumerate(header)}
            width = len(header)
            i_note = pos.get("noteId")
            i_rater = pos.get("raterParticipantId", pos.get("participantId"))
            i_time = pos.get("createdAtMillis")
            i_level, i_help, i_nothelp = pos.get("helpfulnessLevel"), pos.get("helpful"), pos.get("notHelpful")
            i_incorrect = pos.get("notHelpfulIncorrect")
            nh_tags = [i for h, i in pos.items() if h.startswith("notHelpful") and _is_tag(h)]
            tag_bits = [(pos[t], 1 << k) for k, t in enumerate(NOT_HELPFUL_TAG_COLUMNS) if t in pos]
            for line_no, line in enumerate(fh, start=2):
                f = line.rstrip("\r\n").split("\t")
                if len(f) != width:
                    if line.strip():
                        report.add_skip(Skipped(str(file), line_no, "wrong number of fields"))
                    continue
                try:
                    note_id = int(f[i_note])  # type: ignore[index]
                except (TypeError, ValueError):
                    report.add_skip(Skipped(str(file), line_no, "bad noteId"))
                    continue
                rater = f[i_rater] if i_rater is not None else ""
                if not rater:
                    report.add_skip(Skipped(str(file), line_no, "missing rater id"))
                    continue
                created = _int(f[i_time]) if i_time is not None else None
                if created is None:
                    report.add_skip(Skipped(str(file), line_no, "bad createdAtMillis"))
                    continue
                level = f[i_level].strip() if i_level is not None else ""
                if level in LEVEL_VALUES:
                    value = LEVEL_VALUES[level]
                elif i_nothelp is not None and f[i_nothelp] in ones:
                    value = 0.0
                elif i_help is not None and f[i_help] in ones:
                    value = 1.0
                else:
                    report.add_skip(Skipped(str(file), line_no, "no helpfulness answer"))
                    continue
                report.read += 1
                cols.note_id.append(note_id)
                cols.rater_id.append(rater)
                cols.created_at_ms.append(created)
                cols.value.append(value)
                cols.incorrect.append(i_incorrect is not None and f[i_incorrect] in ones)
                cols.any_not_helpful_tag.append(any(f[i] in ones for i in nh_tags))
                cols.not_helpful_tags.append(sum(bit for i, bit in tag_bits if f[i] in ones))
                if len(cols.value) >= chunk_rows:
                    yield cols
                    cols = RatingColumns()
    if cols.value:
        yield cols


def read_status_history(path: str | Path) -> Iterator[StatusHistoryRow | Skipped]:
    for r in _note_records(path):
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
