"""The real Community Notes folder (`shared/data/communitynotes/real/`) read once, as data.

Three files, each described in the folder's README: `notes.tsv` (notes with their text, their
post's text where a source captured it, and every truth found for them), `statuses.tsv.gz` (the
final status of every note of the download that was observed, with when) and
`ratings-2021.tsv` (a filtered subset of 2021 ratings, in the download's layout: ratings.py reads
it). Every caller receives typed rows (texts as plain text: some sources kept X's HTML) and the
truths derived here; no caller special-cases a source.

Two truths come from these rows:
- a note's *verdict*: its final status when it was mature (the note at least 14 days old when
  the status was observed) and Helpful or Not Helpful; younger statuses are mostly still
  Needs More Ratings and are not a verdict;
- a post's *best notes*, for posts with two or more notes and a truth that separates them: by the
  reference scorer's intercept (the highest wins) where two or more of its notes have one,
  otherwise by mature statuses (a Helpful note beside a mature one that is not).
"""

from __future__ import annotations

import csv
import gzip
import html
import re
import sys
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from crowdnotes_site.lib import status as names
from crowdnotes_site.lib.xids import snowflake_ms

csv.field_size_limit(sys.maxsize)

NOTES_FILE = "notes.tsv"
STATUSES_FILE = "statuses.tsv.gz"
RATINGS_FILE = "ratings-2021.tsv"
NOTES_COLUMNS = (
    "noteId",
    "tweetId",
    "createdAtMillis",
    "lang",
    "classification",
    "summary",
    "postText",
    "status",
    "statusAtMillis",
    "statusMature",
    "statusSource",
    "noteIntercept",
    "ratingsCount",
    "ratingsScore",
    "helpfulShownAtMillis",
    "helpfulRemovedAtMillis",
    "globalApproval",
    "totalVotes",
    "origin",
)
STATUSES_COLUMNS = ("noteId", "tweetId", "createdAtMillis", "misleading", "status", "statusAtMillis", "statusSource")
VERDICTS = (names.CURRENTLY_RATED_HELPFUL, names.CURRENTLY_RATED_NOT_HELPFUL)
TRUTH_INTERCEPT = "intercept"
TRUTH_STATUS = "status"


class RealDataError(ValueError):
    """A file of the folder is missing or not in the layout its README gives."""


def _int(value: str) -> int | None:
    return int(value) if value else None


def _float(value: str) -> float | None:
    return float(value) if value else None


# Some sources kept X's HTML: entities (&amp;, &quot;) and links as <a href="…">…</a> around their text.
_ANCHOR_TAG = re.compile(r"</?a\b[^>]*>", re.IGNORECASE)


def plain_text(text: str) -> str:
    """A text as a person reads it: entities decoded, link tags dropped (their text kept)."""
    return html.unescape(_ANCHOR_TAG.sub("", text)) if ("&" in text or "<" in text) else text


def _created_ms(value: str, note_id: str) -> int:
    # Some sources give no creation time: a note id is a snowflake, which encodes it.
    return int(value) if value else snowflake_ms(note_id)


@dataclass(frozen=True)
class RealNote:
    note_id: str
    post_id: str
    created_at_ms: int
    lang: str
    classification: str
    summary: str
    post_text: str
    status: str
    status_at_ms: int | None
    status_mature: bool
    status_source: str
    intercept: float | None
    ratings_count: int | None
    ratings_score: float | None
    helpful_shown_at_ms: int | None
    helpful_removed_at_ms: int | None
    global_approval: float | None
    total_votes: int | None
    origin: str

    @property
    def verdict(self) -> bool | None:
        """True (Helpful) or False (Not Helpful) for a mature verdict; None otherwise."""
        if not self.status_mature or self.status not in VERDICTS:
            return None
        return self.status == names.CURRENTLY_RATED_HELPFUL

    @property
    def year(self) -> int:
        return int(np.datetime64(self.created_at_ms, "ms").astype("datetime64[Y]").astype(int)) + 1970


def _header(path: Path, expected: Sequence[str], line: str) -> list[str]:
    header = line.rstrip("\r\n").split("\t")
    missing = [name for name in expected if name not in header]
    if missing:
        raise RealDataError(f"{path}: line 1 lacks the columns {', '.join(missing)}")
    return header


def read_notes(folder: str | Path) -> list[RealNote]:
    """Every note of `notes.tsv`, in file order."""
    path = Path(folder) / NOTES_FILE
    if not path.exists():
        raise RealDataError(f"{path}: not found (the real Community Notes folder holds notes.tsv)")
    out: list[RealNote] = []
    with path.open(encoding="utf-8", newline="") as fh:
        header = _header(path, NOTES_COLUMNS, fh.readline())
        for number, line in enumerate(fh, start=2):
            cells = line.rstrip("\r\n").split("\t")
            if len(cells) != len(header):
                raise RealDataError(f"{path}: line {number} has {len(cells)} fields, the header {len(header)}")
            row = dict(zip(header, cells, strict=True))
            try:
                out.append(
                    RealNote(
                        note_id=row["noteId"],
                        post_id=row["tweetId"],
                        created_at_ms=_created_ms(row["createdAtMillis"], row["noteId"]),
                        lang=row["lang"],
                        classification=row["classification"],
                        summary=plain_text(row["summary"]),
                        post_text=plain_text(row["postText"]),
                        status=row["status"],
                        status_at_ms=_int(row["statusAtMillis"]),
                        status_mature=row["statusMature"] == "1",
                        status_source=row["statusSource"],
                        intercept=_float(row["noteIntercept"]),
                        ratings_count=_int(row["ratingsCount"]),
                        ratings_score=_float(row["ratingsScore"]),
                        helpful_shown_at_ms=_int(row["helpfulShownAtMillis"]),
                        helpful_removed_at_ms=_int(row["helpfulRemovedAtMillis"]),
                        global_approval=_float(row["globalApproval"]),
                        total_votes=_int(row["totalVotes"]),
                        origin=row["origin"],
                    )
                )
            except ValueError as exc:
                raise RealDataError(f"{path}: line {number}: {exc}") from exc
    return out


@dataclass(frozen=True)
class Statuses:
    """`statuses.tsv.gz` as columns (1.09 M rows): ids as strings, times in ms (0 = unknown)."""

    note_id: np.ndarray
    created_at_ms: np.ndarray
    status: np.ndarray
    status_at_ms: np.ndarray
    # The repository each status came from (statusSource); None where a caller built the columns without it.
    status_source: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.note_id)

    @property
    def year(self) -> np.ndarray:
        return self.created_at_ms.astype("datetime64[ms]").astype("datetime64[Y]").astype(int) + 1970

    @property
    def mature(self) -> np.ndarray:
        """The status was observed when the note was at least 14 days old."""
        known = self.status_at_ms > 0
        return known & (self.status_at_ms - self.created_at_ms >= MATURE_AFTER_MS)


MATURE_AFTER_MS = 14 * 24 * 3600 * 1000


def _status_lines(path: Path) -> Iterator[tuple[int, list[str]]]:
    with gzip.open(path, "rt", encoding="utf-8", newline="") as fh:
        header = _header(path, STATUSES_COLUMNS, fh.readline())
        index = [
            header.index(name) for name in ("noteId", "createdAtMillis", "status", "statusAtMillis", "statusSource")
        ]
        for number, line in enumerate(fh, start=2):
            cells = line.rstrip("\r\n").split("\t")
            if len(cells) != len(header):
                raise RealDataError(f"{path}: line {number} has {len(cells)} fields, the header {len(header)}")
            yield number, [cells[i] for i in index]


def read_statuses(folder: str | Path) -> Statuses:
    path = Path(folder) / STATUSES_FILE
    if not path.exists():
        raise RealDataError(f"{path}: not found (the real Community Notes folder holds statuses.tsv.gz)")
    ids: list[str] = []
    created: list[int] = []
    statuses: list[str] = []
    observed: list[int] = []
    sources: list[str] = []
    for number, (note_id, created_ms, status, status_ms, source) in _status_lines(path):
        if status and status not in names.SHOWN:
            raise RealDataError(f"{path}: line {number}: unknown status {status!r}")
        try:
            created.append(_created_ms(created_ms, note_id))
            observed.append(int(status_ms) if status_ms else 0)
        except ValueError as exc:
            raise RealDataError(f"{path}: line {number}: {exc}") from exc
        ids.append(note_id)
        statuses.append(status)
        sources.append(source)
    return Statuses(
        note_id=np.array(ids, dtype=object),
        created_at_ms=np.array(created, dtype=np.int64),
        status=np.array(statuses, dtype=object),
        status_at_ms=np.array(observed, dtype=np.int64),
        status_source=np.array(sources, dtype=object),
    )


# --- Truths -------------------------------------------------------------------------------


def verdict_notes(notes: Sequence[RealNote]) -> list[RealNote]:
    """Notes with text and a mature Helpful / Not Helpful verdict."""
    return [n for n in notes if n.summary and n.verdict is not None]


@dataclass(frozen=True)
class RealPost:
    """A post with two or more notes whose truth separates them. `notes` are the candidates the
    truth ranks (those with an intercept, or those with a mature status); `best` the indexes of
    the notes the crowd rated best (one by intercept; every Helpful one by status)."""

    post_id: str
    post_text: str
    truth: str
    notes: tuple[RealNote, ...]
    best: tuple[int, ...]


def posts_with_truth(notes: Sequence[RealNote]) -> list[RealPost]:
    by_post: dict[str, list[RealNote]] = defaultdict(list)
    for note in notes:
        if note.summary and note.post_id:
            by_post[note.post_id].append(note)
    out: list[RealPost] = []
    for post_id, group in by_post.items():
        post_text = next((n.post_text for n in group if n.post_text), "")
        with_intercept = [n for n in group if n.intercept is not None]
        if len(with_intercept) >= 2:
            top = max(n.intercept for n in with_intercept if n.intercept is not None)
            best = tuple(i for i, n in enumerate(with_intercept) if n.intercept == top)
            out.append(RealPost(post_id, post_text, TRUTH_INTERCEPT, tuple(with_intercept), best))
            continue
        mature = [n for n in group if n.status_mature and n.status]
        helpful = tuple(i for i, n in enumerate(mature) if n.status == names.CURRENTLY_RATED_HELPFUL)
        if helpful and len(helpful) < len(mature):
            out.append(RealPost(post_id, post_text, TRUTH_STATUS, tuple(mature), helpful))
    out.sort(key=lambda p: p.post_id)
    return out
