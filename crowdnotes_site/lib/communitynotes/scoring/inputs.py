"""What the scorer reads: the ratings as parallel arrays, the notes' metadata, and the not-helpful
tags' bit layout; the chunks every step walks the ratings in."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, fields

import numpy as np

# Not-helpful tags in the public ratings layout's column order; bit k of
# Ratings.not_helpful_tags is NOT_HELPFUL_TAGS[k].
NOT_HELPFUL_TAGS = (
    "notHelpfulOther",
    "notHelpfulIncorrect",
    "notHelpfulSourcesMissingOrUnreliable",
    "notHelpfulOpinionSpeculationOrBias",
    "notHelpfulMissingKeyPoints",
    "notHelpfulOutdated",
    "notHelpfulHardToUnderstand",
    "notHelpfulArgumentativeOrBiased",
    "notHelpfulOffTopic",
    "notHelpfulSpamHarassmentOrAbuse",
    "notHelpfulIrrelevantSources",
    "notHelpfulOpinionSpeculation",
    "notHelpfulNoteNotNeeded",
)
TAG_BIT = {tag: 1 << k for k, tag in enumerate(NOT_HELPFUL_TAGS)}

# Ratings per chunk where the pipeline walks all ratings in pieces (bounded temporaries).
CHUNK = 1 << 19


def chunk_slices(n: int, size: int = CHUNK) -> Iterator[slice]:
    for lo in range(0, n, size):
        yield slice(lo, min(lo + size, n))


@dataclass
class Ratings:
    """Ratings as parallel arrays; rater indices share one index space with note authors."""

    rater: np.ndarray
    note: np.ndarray
    value: np.ndarray
    created_at_ms: np.ndarray | None = None
    incorrect_tag: np.ndarray | None = None
    any_not_helpful_tag: np.ndarray | None = None
    not_helpful_tags: np.ndarray | None = None  # uint16 bit mask per rating, see NOT_HELPFUL_TAGS

    def __post_init__(self) -> None:
        # Indices as int32 (4 bytes per rating each, not 8): 2^31 raters or notes is far beyond
        # any real data, and a larger index is refused rather than wrapped.
        self.rater = index_array(self.rater)
        self.note = index_array(self.note)
        # float32 is kept (4 bytes per rating, not 8): 0, 0.5 and 1 are exact in it, and every
        # sum or difference over values is taken in float64 (fit_mf, _note_stats), so the
        # results are those of float64 values, bit for bit.
        value = np.asarray(self.value)
        self.value = value if value.dtype == np.float32 else value.astype(np.float64)

    def keep_rows(self, keep: np.ndarray) -> None:
        """Only the rows where `keep` is true, replaced column by column: with no other reference to
        the columns, at most one column is held twice at a time (a copy would hold them all twice)."""
        for column in fields(self):
            values = getattr(self, column.name)
            if values is not None:
                setattr(self, column.name, values[keep])


def index_array(values: np.ndarray) -> np.ndarray:
    out = np.asarray(values)
    if out.dtype == np.int32:
        return out
    if len(out) and (int(out.max()) > np.iinfo(np.int32).max or int(out.min()) < np.iinfo(np.int32).min):
        raise ValueError("more than 2^31 raters or notes: indices must fit in int32")
    return out.astype(np.int32)


@dataclass
class NotesMeta:
    """Per-note metadata, indexed by note index."""

    n_notes: int
    not_misleading: np.ndarray | None = None
    created_at_ms: np.ndarray | None = None
    author: np.ndarray | None = None  # participant index or -1
    previous_status: np.ndarray | None = None  # status code or NO_STATUS
    last_non_nmr_status_ms: np.ndarray | None = None  # -1 when never rated non-NMR
    locked_status: np.ndarray | None = None  # status code or NO_STATUS
    # From a low-diligence model fitted elsewhere (NaN: no estimate); the scorer has none itself.
    low_diligence_intercept: np.ndarray | None = None

    def get(self, name: str, fill: float | int | bool, dtype: type) -> np.ndarray:
        value = getattr(self, name)
        if value is None:
            return np.full(self.n_notes, fill, dtype=dtype)
        return np.asarray(value, dtype=dtype)


def tag_names(mask: int) -> list[str]:
    return [tag for tag in NOT_HELPFUL_TAGS if mask & TAG_BIT[tag]]
