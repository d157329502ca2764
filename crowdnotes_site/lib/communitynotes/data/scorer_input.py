"""Score public Community Notes TSV files with crowdnotes_site/lib/communitynotes/scoring/scorer.py (no database).

Preprocessing follows the reference: duplicate (note, rater) ratings keep the last one; ratings
of notes absent from the notes file (deleted notes) are dropped unless the status history has
the note; ratings of notes saying the post is NOT misleading that were written before the
not-misleading UI launch (2022-10-03) are dropped.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from crowdnotes_site.lib import status as names
from crowdnotes_site.lib.communitynotes.data import tsv as cio
from crowdnotes_site.lib.communitynotes.scoring import explain as scoring_explain
from crowdnotes_site.lib.communitynotes.scoring import scorer as scoring

NOT_MISLEADING_UI_LAUNCH_MS = 1664755200000
STATUS_CODES = {
    names.NEEDS_MORE_RATINGS: scoring.NEEDS_MORE_RATINGS,
    names.CURRENTLY_RATED_HELPFUL: scoring.CURRENTLY_RATED_HELPFUL,
    names.CURRENTLY_RATED_NOT_HELPFUL: scoring.CURRENTLY_RATED_NOT_HELPFUL,
}


# Columns after the reference's: why each note has its status (crowdnotes_site/lib/communitynotes/scoring/explain.py).
EXTRA_COLUMNS = (
    "activeRules",
    "decidedBy",
    "noteInterceptMax",
    "negFactorRatingCount",
    "posFactorRatingCount",
    "netMinHelpful",
    "tagOutliers",
    "explanation",
)


def _extra(why: scoring_explain.NoteWhy, config: scoring.ScoringConfig | None) -> tuple[str, ...]:
    return (
        ",".join(why.rules),
        why.rules[-1] if why.rules else "",
        cio.fmt_number(why.intercept_max),
        str(why.neg_count),
        str(why.pos_count),
        str(why.net_min_helpful),
        ",".join(why.tag_outliers),
        scoring_explain.explain(why, config),
    )


@dataclass
class LoadedData:
    note_ids: list[int]
    participant_ids: list[str]
    ratings: scoring.Ratings
    meta: scoring.NotesMeta
    notes_report: cio.ReadReport
    ratings_report: cio.ReadReport
    history_report: cio.ReadReport | None
    dropped: dict[str, int] = field(default_factory=dict)


class _Index:
    def __init__(self) -> None:
        self.ids: dict[object, int] = {}

    def get(self, key: object) -> int:
        idx = self.ids.get(key)
        if idx is None:
            idx = self.ids[key] = len(self.ids)
        return idx

    def keys(self) -> list[object]:
        return list(self.ids)

    def get_all(self, keys: Sequence[object]) -> np.ndarray:
        """[get(k) for k in keys] as int32: known keys in one C-level pass, new ones numbered in
        the order they come."""
        known = self.ids
        codes = [known.get(k, -1) for k in keys]
        if -1 in codes:
            codes = [c if c != -1 else self.get(k) for c, k in zip(codes, keys, strict=True)]
        return np.array(codes, dtype=np.int32)


class _NoteIndex(_Index):
    """An _Index of integer note ids with a sorted numpy copy, so that a whole block of ratings
    is looked up with one binary search per rating instead of a dict lookup per distinct id."""

    def __init__(self) -> None:
        super().__init__()
        self._sorted = np.zeros(0, dtype=np.int64)  # the ids, ascending
        self._codes = np.zeros(0, dtype=np.int32)  # their indices

    def codes(self, ids: np.ndarray) -> np.ndarray:
        """get(i) for every i in ids (int32); ids not seen before are numbered in order of first
        appearance, which assigns the same indices as calling get() per element."""
        if len(self._sorted) != len(self.ids):  # ids added through get(): copy the dict again
            keys = np.fromiter(self.ids.keys(), dtype=np.int64, count=len(self.ids))
            order = np.argsort(keys, kind="stable")
            self._sorted = keys[order]
            self._codes = np.fromiter(self.ids.values(), dtype=np.int32, count=len(self.ids))[order]
        at, hit = self._positions(ids)
        if not hit.all():
            new, first = np.unique(ids[~hit], return_index=True)
            order = np.argsort(first, kind="stable")  # numbered in order of first appearance
            new_codes = np.empty(len(new), dtype=np.int32)
            new_codes[order] = self.get_all(new[order].tolist())
            where = np.searchsorted(self._sorted, new)  # new is ascending, as np.insert needs
            self._sorted = np.insert(self._sorted, where, new)
            self._codes = np.insert(self._codes, where, new_codes)
            at, hit = self._positions(ids)
        return self._codes[at]

    def _positions(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each id's position in the sorted copy, and whether it is there."""
        if not len(self._sorted):
            return np.zeros(len(ids), dtype=np.int64), np.zeros(len(ids), dtype=bool)
        at = np.searchsorted(self._sorted, ids).clip(max=len(self._sorted) - 1)
        return at, self._sorted[at] == ids


def kept_ratings(
    note: np.ndarray,
    rater: np.ndarray,
    n_people: int,
    known: np.ndarray,
    not_misleading: np.ndarray,
    note_created_ms: np.ndarray,
) -> tuple[np.ndarray, dict[str, int]]:
    """The reference's preprocessing as a mask over ratings in file order, with the counts it
    drops: a duplicate (note, rater) pair keeps its last row; ratings of notes in neither the
    notes file nor the status history (`known`) are dropped, and so are ratings of NOT_MISLEADING
    notes created before the not-misleading UI launch."""
    keep = np.ones(len(note), dtype=bool)

    # The pair key needs 64 bits (only it does). Sorting a copy finds out whether any pair
    # repeats; only then is the (8 bytes per rating) stable order computed.
    def pairs() -> np.ndarray:  # built in place: one 8-byte array, no temporaries
        out = note.astype(np.int64)
        out *= max(n_people, 1)
        out += rater
        return out

    pair = pairs()
    pair.sort()  # in place: only whether a pair repeats is read from it
    repeats = bool(len(pair) > 1 and (pair[1:] == pair[:-1]).any())
    del pair
    if repeats:
        pair = pairs()
        order = np.argsort(pair, kind="stable")  # equal pairs stay in file order: the last is kept
        sorted_pair = pair[order]
        keep[order[:-1][sorted_pair[1:] == sorted_pair[:-1]]] = False
        del order, sorted_pair, pair
    dropped = {"duplicate rating": int(len(note) - keep.sum())}
    old_nm = not_misleading & (note_created_ms <= NOT_MISLEADING_UI_LAUNCH_MS)
    unknown_mask = keep & ~known[note]
    dropped["rating of a deleted note"] = int(unknown_mask.sum())
    old_nm_mask = keep & known[note] & old_nm[note]
    dropped["rating of a NOT_MISLEADING note from before 2022-10-03"] = int(old_nm_mask.sum())
    keep &= ~unknown_mask & ~old_nm_mask
    return keep, dropped


def load(notes_path: str | Path, ratings_path: str | Path, status_history_path: str | Path | None = None) -> LoadedData:
    """Read the TSVs (streaming) into scorer arrays."""
    notes_idx, people = _NoteIndex(), _Index()
    notes_report: cio.ReadReport = cio.ReadReport()
    in_notes: set[int] = set()
    author: dict[int, int] = {}
    created: dict[int, int] = {}
    not_misleading: dict[int, bool] = {}
    for n in notes_report.rows(cio.read_notes(notes_path)):
        i = notes_idx.get(n.note_id)
        in_notes.add(i)
        author[i] = people.get(n.author_id)
        created[i] = n.created_at_ms
        not_misleading[i] = n.classification == cio.NOT_MISLEADING
    history_report: cio.ReadReport | None = None
    in_history: set[int] = set()
    previous: dict[int, int] = {}
    last_non_nmr: dict[int, int] = {}
    locked: dict[int, int] = {}
    if status_history_path is not None:
        history_report = cio.ReadReport()
        for h in history_report.rows(cio.read_status_history(status_history_path)):
            i = notes_idx.get(h.note_id)
            in_history.add(i)
            if h.author_id and i not in author:
                author[i] = people.get(h.author_id)
            if h.created_at_ms and i not in created:
                created[i] = h.created_at_ms
            previous[i] = STATUS_CODES.get(h.current_status, scoring.NO_STATUS)
            if h.most_recent_non_nmr_ms is not None:
                last_non_nmr[i] = h.most_recent_non_nmr_ms
            if h.locked_status in STATUS_CODES:
                locked[i] = STATUS_CODES[h.locked_status]
    ratings_report: cio.ReadReport = cio.ReadReport()
    # Each block of the file becomes compact arrays at once (numpy parse, ~30 bytes per
    # rating); ids are looked up once per distinct id of the block, in order of first
    # appearance, so indices are exactly those of a per-rating lookup.
    parts: dict[str, list[np.ndarray]] = {k: [] for k in ("note", "rater", "value", "created", "inc", "nh", "tags")}
    for blk in cio.iter_rating_arrays(ratings_path, ratings_report):
        parts["note"].append(notes_idx.codes(blk.note_id))
        people_of_block = people.get_all(blk.rater_keys)
        parts["rater"].append(people_of_block[blk.rater_code])
        parts["value"].append(blk.value)
        parts["created"].append(blk.created_at_ms)
        parts["inc"].append(blk.incorrect)
        parts["nh"].append(blk.any_not_helpful_tag)
        parts["tags"].append(blk.not_helpful_tags)
        del blk

    def joined(key: str, dtype: type) -> np.ndarray:
        return np.concatenate(parts.pop(key)) if parts[key] else np.zeros(0, dtype=dtype)

    note = joined("note", np.int32)
    rater = joined("rater", np.int32)
    n_notes = len(notes_idx.ids)
    known = np.zeros(n_notes, dtype=bool)
    known[list(in_notes | in_history)] = True
    nm = np.zeros(n_notes, dtype=bool)
    created_arr = np.zeros(n_notes, dtype=np.int64)
    for i, flag in not_misleading.items():
        nm[i] = flag
    for i, ms in created.items():
        created_arr[i] = ms
    keep, dropped = kept_ratings(note, rater, len(people.ids), known, nm, created_arr)

    def arr(values: dict[int, int], fill: int) -> np.ndarray:
        out = np.full(n_notes, fill, dtype=np.int64)
        for i, v in values.items():
            out[i] = v
        return out

    ratings = scoring.Ratings(
        rater=rater[keep],
        note=note[keep],
        value=joined("value", np.float32)[keep].astype(np.float64),
        created_at_ms=joined("created", np.int64)[keep],
        incorrect_tag=joined("inc", bool)[keep],
        any_not_helpful_tag=joined("nh", bool)[keep],
        not_helpful_tags=joined("tags", np.uint16)[keep],
    )
    meta = scoring.NotesMeta(
        n_notes=n_notes,
        not_misleading=nm,
        created_at_ms=created_arr,
        author=arr(author, -1),
        previous_status=arr(previous, scoring.NO_STATUS),
        last_non_nmr_status_ms=arr(last_non_nmr, -1),
        locked_status=arr(locked, scoring.NO_STATUS) if locked else None,
    )
    note_ids = [int(k) for k in notes_idx.keys()]  # type: ignore[call-overload]
    participant_ids = [str(k) for k in people.keys()]
    return LoadedData(note_ids, participant_ids, ratings, meta, notes_report, ratings_report, history_report, dropped)


def score_files(
    *,
    notes_path: str | Path,
    ratings_path: str | Path,
    outdir: str | Path,
    status_history_path: str | Path | None = None,
    config: scoring.ScoringConfig | None = None,
) -> dict[str, object]:
    """Score the files and write scored_notes.tsv and helpfulness_scores.tsv into outdir."""
    t0 = time.perf_counter()
    data = load(notes_path, ratings_path, status_history_path)
    seconds_read = round(time.perf_counter() - t0, 3)
    return {**score_loaded(data, outdir, config), "seconds_read": seconds_read}


def score_loaded(
    data: LoadedData, outdir: str | Path, config: scoring.ScoringConfig | None = None
) -> dict[str, object]:
    """Score loaded data and write scored_notes.tsv and helpfulness_scores.tsv into outdir."""
    t1 = time.perf_counter()
    result = scoring.score(data.ratings, data.meta, len(data.participant_ids), config)
    t2 = time.perf_counter()
    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    # Notes from the notes file / status history; notes only seen in ratings were deleted.
    listed = np.zeros(data.meta.n_notes, dtype=bool)
    listed[data.meta.author >= 0] = True  # type: ignore[operator]
    listed[data.meta.created_at_ms > 0] = True  # type: ignore[operator]
    t3 = time.perf_counter()
    whys = scoring_explain.why_rows(result, np.flatnonzero(listed).tolist())
    rows = (
        cio.ScoredNoteRow(
            note_id=data.note_ids[i],
            num_ratings=why.num_ratings,
            intercept=why.intercept,
            factor=why.factor,
            status=why.status,
            extra=_extra(why, config),
        )
        for i, why in zip(np.flatnonzero(listed).tolist(), whys, strict=True)
    )
    n_notes = cio.write_scored_notes(out / "scored_notes.tsv", rows, EXTRA_COLUMNS)
    raters = np.flatnonzero(~np.isnan(result.rater_factor))
    n_raters = cio.write_helpfulness_scores(
        out / "helpfulness_scores.tsv",
        ((data.participant_ids[u], float(result.rater_intercept[u]), float(result.rater_factor[u])) for u in raters),
    )
    counts = np.bincount(result.status, minlength=3)
    return {
        "notes_read": data.notes_report.read,
        "ratings_read": data.ratings_report.read,
        "skipped": dict(data.notes_report.skipped + data.ratings_report.skipped),
        "dropped": data.dropped,
        "ratings_scored": len(data.ratings.value),
        "notes_written": n_notes,
        "raters_written": n_raters,
        "helpful": int(counts[scoring.CURRENTLY_RATED_HELPFUL]),
        "not_helpful": int(counts[scoring.CURRENTLY_RATED_NOT_HELPFUL]),
        "needs_more_ratings": int(counts[scoring.NEEDS_MORE_RATINGS]),
        "mu": result.mu,
        "seconds_score": round(t2 - t1, 3),
        "seconds_write": round(time.perf_counter() - t3, 3),
    }
