"""Candidate inputs (pure): the random subset and order of eligible notes each candidate is written
from, and the per-note rating summaries the prompt and the extractive baseline carry."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from crowdnotes_site.lib.llm.steps.supernote import MergeSource, SourceNote
from crowdnotes_site.lib.text_rules import strip_urls

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


def ordered_subsets_count(n_notes: int) -> int:
    """How many ordered subsets of size 2..n the notes have (n!/(n-k)! summed over k)."""
    total, ways = 0, n_notes
    for k in range(2, n_notes + 1):
        ways *= n_notes - k + 1
        total += ways
    return total


def sample_subsets(
    n_notes: int, n_candidates: int, rng: np.random.Generator, *, distinct: bool = False
) -> list[list[int]]:
    """For each candidate, a random subset (size 2..n) of the note indexes in a random order.
    `distinct`: no ordered subset twice, so at most `ordered_subsets_count(n)` of them (a
    deterministic writer, such as the offline merge, would only repeat a candidate)."""
    if n_notes < MIN_SUBSET:
        raise ValueError("a Supernote needs at least two source notes")
    wanted = min(n_candidates, ordered_subsets_count(n_notes)) if distinct else n_candidates
    out: list[list[int]] = []
    seen: set[tuple[int, ...]] = set()
    while len(out) < wanted:
        size = int(rng.integers(MIN_SUBSET, n_notes + 1))
        subset = [int(i) for i in rng.permutation(n_notes)[:size]]
        if distinct:
            if tuple(subset) in seen:
                continue
            seen.add(tuple(subset))
        out.append(subset)
    return out


def pick(notes: Sequence[NoteSummary], subset: Sequence[int]) -> list[NoteSummary]:
    return [notes[i] for i in subset]


_NON_WORD = re.compile(r"[^a-z0-9]+")


def normalized_text(text: str) -> str:
    """A candidate's text for deduplication: lower case, punctuation and spacing ignored (links
    keep their letters, so a different link set is a different candidate)."""
    return _NON_WORD.sub(" ", text.lower()).strip()


def copied_source(text: str, sources: Sequence[tuple[int, str]]) -> int | None:
    """The pk of the source note whose text (links aside) the candidate repeats, if any: a copy of
    one note is that note again, not a merge."""
    key = normalized_text(strip_urls(text))
    return next((pk for pk, source in sources if key and normalized_text(strip_urls(source)) == key), None)


def first_of_each_text(texts: Sequence[str]) -> dict[int, int]:
    """index -> index of the first text with the same normalized text, for each repeated text
    (empty texts are not candidates and are left out)."""
    first: dict[str, int] = {}
    repeats: dict[int, int] = {}
    for i, text in enumerate(texts):
        key = normalized_text(text)
        if not key:
            continue
        if key in first:
            repeats[i] = first[key]
        else:
            first[key] = i
    return repeats
