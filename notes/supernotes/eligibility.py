"""Which posts are stuck (pure): at least two notes calling the post misleading that are all still
Needs More Ratings. A post with a note already rated Helpful is not stuck."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from crowdnotes_site.lib import status as names

MISLEADING = "MISINFORMED_OR_POTENTIALLY_MISLEADING"
MIN_NOTES = 2


@dataclass(frozen=True)
class NoteState:
    classification: str
    status: str
    origin: str = "human"


def eligible_notes(notes: Sequence[NoteState]) -> list[int]:
    """Indexes of the notes a Supernote may merge: misleading-classified, Needs More Ratings, not
    themselves Supernotes."""
    return [
        i
        for i, n in enumerate(notes)
        if n.classification == MISLEADING and n.status == names.NEEDS_MORE_RATINGS and n.origin != "supernote"
    ]


def is_stuck(notes: Sequence[NoteState]) -> bool:
    """≥ 2 eligible notes and no note of the post rated Helpful."""
    if any(n.status == names.CURRENTLY_RATED_HELPFUL for n in notes):
        return False
    return len(eligible_notes(notes)) >= MIN_NOTES
