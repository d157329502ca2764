"""Streaming readers and writers for the public Community Notes TSV downloads (no ORM): notes,
status history and the reference's scored notes (ratings: ratings.py, the one ratings parser).

Columns are found by header name, so every schema version reads: old notes carry
`participantId` instead of `noteAuthorParticipantId`; a file may be split over several in a
folder. Readers yield typed rows or `Skipped` records (line number and reason); nothing is held
in memory beyond one row.
"""

from __future__ import annotations

import csv
import html
import io
import sys
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from crowdnotes_site.lib import status as names
from crowdnotes_site.lib.communitynotes.data import files as download_file

csv.field_size_limit(sys.maxsize)

NOT_MISLEADING = "NOT_MISLEADING"
MISLEADING = "MISINFORMED_OR_POTENTIALLY_MISLEADING"
STATUSES = set(names.SHOWN)


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
