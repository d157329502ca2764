"""A tiny folder in the layout of the real Community Notes folder (its README's columns), written by a test."""

from __future__ import annotations

import gzip
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from crowdnotes_site.lib.communitynotes.data.real import (
    NOTES_COLUMNS,
    NOTES_FILE,
    STATUSES_COLUMNS,
    STATUSES_FILE,
)
from crowdnotes_site.lib.xids import X_EPOCH_MS

NMR, CRH, CRNH = "NEEDS_MORE_RATINGS", "CURRENTLY_RATED_HELPFUL", "CURRENTLY_RATED_NOT_HELPFUL"
HOUR = timedelta(hours=1)
DAY = timedelta(days=1)
README = """# Real Community Notes data

Known limits: texts of notes written from 2023-10 to 2024-10 are rare; a status observed
mid-month for a note written days before is young (use `statusMature`).

| file | rows |
"""


def ms(when: datetime) -> int:
    return int(when.timestamp() * 1000)


def x_id(when: datetime, seq: int = 0) -> str:
    """An X id (post or note) whose time is `when`."""
    return str(((ms(when) - X_EPOCH_MS) << 22) + seq)


def at(year: int, month: int = 1, day: int = 1, hour: int = 0) -> datetime:
    return datetime(year, month, day, hour, tzinfo=UTC)


def write(folder: Path, notes: list[dict[str, Any]], statuses: list[dict[str, Any]], readme: str = README) -> Path:
    """`notes.tsv`, `statuses.tsv.gz` and README.md; a row's missing columns are empty."""
    folder.mkdir(parents=True, exist_ok=True)
    lines = ["\t".join(NOTES_COLUMNS)] + ["\t".join(str(r.get(c, "")) for c in NOTES_COLUMNS) for r in notes]
    (folder / NOTES_FILE).write_text("\n".join(lines) + "\n", encoding="utf-8")
    lines = ["\t".join(STATUSES_COLUMNS)] + ["\t".join(str(r.get(c, "")) for c in STATUSES_COLUMNS) for r in statuses]
    with gzip.open(folder / STATUSES_FILE, "wt", encoding="utf-8") as fh:
        fh.write("\n".join(lines) + "\n")
    (folder / "README.md").write_text(readme, encoding="utf-8")
    return folder


def note(created: datetime, post: str, seq: int, **cells: Any) -> dict[str, Any]:
    """A notes.tsv row: a note written at `created` on `post`, with text unless `summary` is given."""
    row: dict[str, Any] = {
        "noteId": x_id(created, seq),
        "tweetId": post,
        "createdAtMillis": ms(created),
        "summary": f"Real note {seq}: the claim is wrong, see https://example.org/{seq}",
    }
    row.update(cells)
    return row


def status(
    created: datetime, seq: int, value: str, observed_after: timedelta | None, source: str = "travisbrown/birdwatch"
) -> dict[str, Any]:
    """A statuses.tsv.gz row: `value` observed `observed_after` the note was written (None: no status)."""
    return {
        "noteId": x_id(created, seq),
        "tweetId": "",
        "createdAtMillis": ms(created),
        "misleading": "true",
        "status": value,
        "statusAtMillis": "" if observed_after is None else ms(created + observed_after),
        "statusSource": source if value else "",
    }


def figure_statuses() -> list[dict[str, object]]:
    """Final statuses of 2023 and 2025 notes: mature, young, each status, one without."""
    old, new = at(2023, 3, 1), at(2025, 6, 1)
    return [
        status(old, 1, NMR, 30 * DAY),
        status(old, 2, NMR, 30 * DAY),
        status(old, 3, NMR, 30 * DAY),
        status(old, 4, CRH, 30 * DAY),
        status(new, 1, NMR, 2 * DAY),  # young: observed two days after the note
        status(new, 2, NMR, 3 * DAY),  # young
        status(new, 3, NMR, 20 * DAY, "vulonviing/cross-constituency-aggregation-community-notes"),
        status(new, 4, CRH, 20 * DAY),
        status(new, 5, CRNH, 15 * DAY),
        status(new, 6, "", None),  # no status found: counted, left out
    ]


def figure_notes() -> list[dict[str, object]]:
    """2025 notes shown as Helpful 2, 4, 6, 8 and 10 h after they were written, one shown before it, one
    never shown, one without a post, and one of 2024."""
    post = x_id(at(2025, 5, 1))
    shown = [note(at(2025, 5, 2), post, i, helpfulShownAtMillis=ms(at(2025, 5, 2) + h * HOUR), ratingsCount=9)
             for i, h in enumerate((2, 4, 6, 8, 10), start=1)]  # fmt: skip
    return [
        *shown,
        note(at(2025, 5, 3), post, 6, helpfulShownAtMillis=ms(at(2025, 5, 2)), ratingsCount=3),  # before the note
        note(at(2025, 5, 3), post, 7, ratingsCount=2),  # recorded, never shown as Helpful
        note(at(2025, 5, 3), "", 8),  # a note without a post, not recorded by the explorer
        note(at(2024, 5, 3), x_id(at(2024, 5, 1)), 9, helpfulShownAtMillis=ms(at(2024, 5, 4))),  # another year
    ]
