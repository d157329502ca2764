"""Candidate inputs (pure): the random subset and order of eligible notes each candidate is written
from, and the per-note rating summaries the prompt and the extractive baseline carry."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from crowdnotes_site.lib.llm.steps.supernote import MergeSource, SourceNote

DEFAULT_CANDIDATES = 100
MIN_SUBSET = 2


@dataclass
class NoteSummary:
    """One eligible note with what its raters said (counts, tags, helpful ratings per factor side)."""

    pk: int
    text: str
    helpful: int = 0
    somewhat: int = 0
    not_helpful: int = 0
    tags: dict[str, int] = field(default_factory=dict)
    helpful_left: int = 0
    helpful_right: int = 0

    def source_note(self, top_tags: int = 4) -> SourceNote:
        tags = tuple(t for t, _ in sorted(self.tags.items(), key=lambda kv: (-kv[1], kv[0]))[:top_tags])
        return SourceNote(self.text, self.helpful, self.somewhat, self.not_helpful, tags)

    def merge_source(self) -> MergeSource:
        return MergeSource(
            self.text,
            helpful_tags=sum(n for t, n in self.tags.items() if t.startswith("helpful")),
            helpful=self.helpful,
            somewhat=self.somewhat,
            not_helpful=self.not_helpful,
            helpful_left=self.helpful_left,
            helpful_right=self.helpful_right,
        )


def sample_subsets(n_notes: int, n_candidates: int, rng: np.random.Generator) -> list[list[int]]:
    """For each candidate, a random subset (size 2..n) of the note indexes in a random order."""
    if n_notes < MIN_SUBSET:
        raise ValueError("a Supernote needs at least two source notes")
    out = []
    for _ in range(n_candidates):
        size = int(rng.integers(MIN_SUBSET, n_notes + 1))
        out.append([int(i) for i in rng.permutation(n_notes)[:size]])
    return out


def pick(notes: Sequence[NoteSummary], subset: Sequence[int]) -> list[NoteSummary]:
    return [notes[i] for i in subset]
