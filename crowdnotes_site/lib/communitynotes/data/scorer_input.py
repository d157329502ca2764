"""The scorer's input (crowdnotes_site/lib/communitynotes/scoring), and the public TSVs scored with it (no database).

Preprocessing follows the reference: duplicate (note, rater) ratings keep the last one; ratings
of notes absent from the notes file (deleted notes) are dropped unless the status history has
the note; ratings of notes saying the post is NOT misleading that were written before the
not-misleading UI launch (2022-10-03) are dropped.

One loader (`load_columns`) builds that input for every caller: the research path from the
columnar form (columnar.load), score_communitynotes from the TSVs (`load`).
"""

from __future__ import annotations

import ctypes
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from crowdnotes_site.lib import status as names
from crowdnotes_site.lib.communitynotes import scoring
from crowdnotes_site.lib.communitynotes.data import files as download_file
from crowdnotes_site.lib.communitynotes.data import ratings as cnr
from crowdnotes_site.lib.communitynotes.data import tsv as cio
from crowdnotes_site.lib.communitynotes.scoring import explain as scoring_explain

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
    """The scorer's input, and the public id of each note and participant index. The ids are
    kept as arrays and made into lists only when read (after the fit, for the outputs): while
    the scorer runs, tens of MB of Python objects would sit under its peak."""

    note_id_array: np.ndarray  # int64, the noteId of each note index
    participant_array: pa.Array  # string, the public id of each participant index
    ratings: scoring.Ratings
    meta: scoring.NotesMeta
    notes_report: cio.ReadReport
    ratings_report: cio.ReadReport
    history_report: cio.ReadReport | None
    dropped: dict[str, int] = field(default_factory=dict)

    @cached_property
    def note_ids(self) -> list[int]:
        return self.note_id_array.tolist()  # type: ignore[no-any-return]

    @cached_property
    def participant_ids(self) -> list[str]:
        return self.participant_array.to_pylist()  # type: ignore[no-any-return]

    @property
    def n_participants(self) -> int:
        return len(self.participant_array)


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


# ---------------------------------------------------------------- the loader

# The ratings as the loader reads them, from the columnar form's Parquet or straight from the
# parser: noteId int64, the rater as a dictionary column (int32 codes, the block's distinct ids
# once), createdAtMillis int64, the value as int8 halves (0, 1, 2), the tag flags and the uint16
# not-helpful tag bits.
RATING_SCHEMA = pa.schema(
    [
        ("note_id", pa.int64()),
        ("rater", pa.dictionary(pa.int32(), pa.string())),
        ("created_at_ms", pa.int64()),
        ("value2", pa.int8()),  # 2 x value: 0 Not helpful, 1 Somewhat, 2 Helpful
        ("incorrect", pa.bool_()),
        ("any_not_helpful", pa.bool_()),
        ("not_helpful_tags", pa.uint16()),
    ]
)
NOTE_COLUMNS = ("note_id", "author", "created_at_ms", "not_misleading")
STATUS_COLUMNS = ("note_id", "author", "created_at_ms", "current_status", "most_recent_non_nmr_ms", "locked_status")


def rating_batch(blk: cnr.RatingBlock) -> pa.RecordBatch:
    """A parsed block as the loader's record batch (RATING_SCHEMA)."""
    return pa.RecordBatch.from_arrays(
        [
            pa.array(blk.note_id),
            blk.rater,
            pa.array(blk.created_at_ms),
            pa.array(blk.value2),
            pa.array(blk.incorrect),
            pa.array(blk.any_not_helpful_tag),
            pa.array(blk.not_helpful_tags),
        ],
        schema=RATING_SCHEMA,
    )


def notes_table(rows: Iterable[cio.NoteRow], *, text: bool = True) -> pa.Table:
    """Notes rows as a table: NOTE_COLUMNS, and with `text` the post id and the summary too."""
    cols: dict[str, list[object]] = {k: [] for k in ("note_id", "author", "created_at_ms", "tweet_id", "nm", "summary")}
    for n in rows:
        cols["note_id"].append(n.note_id)
        cols["author"].append(n.author_id)
        cols["created_at_ms"].append(n.created_at_ms)
        cols["nm"].append(n.classification == cio.NOT_MISLEADING)
        if text:
            cols["tweet_id"].append(int(n.tweet_id) if n.tweet_id.isdigit() else 0)
            cols["summary"].append(n.summary)
    table = {
        "note_id": pa.array(cols["note_id"], pa.int64()),
        "author": pa.array(cols["author"], pa.string()),
        "created_at_ms": pa.array(cols["created_at_ms"], pa.int64()),
        "tweet_id": pa.array(cols["tweet_id"], pa.int64()),
        "not_misleading": pa.array(cols["nm"], pa.bool_()),
        "summary": pa.array(cols["summary"], pa.string()),
    }
    return pa.table(table if text else {k: table[k] for k in NOTE_COLUMNS})


def status_table(rows: Iterable[cio.StatusHistoryRow]) -> pa.Table:
    """Status-history rows as a table (-1 for a time the row lacks)."""
    names = ("note_id", "author", "created_at_ms", "first_non_nmr_ms", "first_non_nmr_status", "current_status",
             "most_recent_non_nmr_ms", "locked_status")  # fmt: skip
    cols: dict[str, list[object]] = {k: [] for k in names}
    for h in rows:
        cols["note_id"].append(h.note_id)
        cols["author"].append(h.author_id)
        cols["created_at_ms"].append(h.created_at_ms)
        cols["first_non_nmr_ms"].append(-1 if h.first_non_nmr_ms is None else h.first_non_nmr_ms)
        cols["first_non_nmr_status"].append(h.first_non_nmr_status)
        cols["current_status"].append(h.current_status)
        cols["most_recent_non_nmr_ms"].append(-1 if h.most_recent_non_nmr_ms is None else h.most_recent_non_nmr_ms)
        cols["locked_status"].append(h.locked_status)
    types = {"note_id": pa.int64(), "created_at_ms": pa.int64(), "first_non_nmr_ms": pa.int64(),
             "most_recent_non_nmr_ms": pa.int64()}  # fmt: skip
    return pa.table({k: pa.array(v, types.get(k, pa.string())) for k, v in cols.items()})


_MALLOC_TRIM = getattr(ctypes.CDLL(None), "malloc_trim", None)  # glibc's; None elsewhere


def use_returning_memory_pool() -> None:
    """Arrow's allocations from now on in jemalloc, where pyarrow has it: it gives freed memory
    back on `give_back_memory`, while the default pool (mimalloc) keeps what other threads freed
    (the parse threads'), beneath the scorer's peak (bench/README.md, "score_communitynotes")."""
    try:
        pool = pa.jemalloc_memory_pool()
    except NotImplementedError:  # a pyarrow built without it
        return
    pa.set_memory_pool(pool)


def give_back_memory() -> None:
    """Return the memory freed so far to the system. Arrow's allocator and the C library's keep
    freed blocks for their next allocations; the arrays that follow (the preallocated columns,
    the scorer's) would sit on top of them."""
    pa.default_memory_pool().release_unused()
    if _MALLOC_TRIM is not None:
        _MALLOC_TRIM(0)


def _np(col: pa.ChunkedArray | pa.Array) -> np.ndarray:
    return np.asarray(col.to_numpy(zero_copy_only=False)) if isinstance(col, pa.Array) else np.asarray(col.to_numpy())


class _RaterSpans:
    """Rater ids of the rating blocks to `people`'s indices, with the hashing done by Arrow.

    Each block has its own rater dictionary, and at the full shape most ids in a block are
    distinct: a Python dict lookup of every block's dictionary would be ~160 M lookups. Instead
    the blocks of a span of ~1 M ratings are unified into one dictionary (Arrow appends each
    block's unseen ids in that block's dictionary order, so the numbering is the one a per-block
    lookup gives), that dictionary is looked up in one Arrow array of every id numbered so far
    (`pc.index_in`, a C++ hash table), and only ids never seen before go through `people`
    (numbered in the same order)."""

    SPAN = 1 << 20

    def __init__(self, people: _Index, out: np.ndarray) -> None:
        self.people, self.out = people, out
        self.known = pa.array([str(k) for k in people.keys()], pa.string())
        self.pending: list[tuple[slice, pa.DictionaryArray]] = []
        self.rows = 0

    def add(self, sl: slice, column: pa.DictionaryArray) -> None:
        self.pending.append((sl, column))
        self.rows += len(column)
        if self.rows >= self.SPAN:
            self.flush()

    def flush(self) -> None:
        if not self.pending:
            return
        unified = pa.chunked_array([c for _sl, c in self.pending]).unify_dictionaries()
        dictionary = unified.chunk(0).dictionary
        found = pc.index_in(dictionary, value_set=self.known)
        codes = _np(found.fill_null(-1)).astype(np.int32)
        new = np.flatnonzero(codes < 0)
        if len(new):
            names = dictionary.take(pa.array(new)).to_pylist()
            codes[new] = [self.people.get(k) for k in names]
            self.known = pa.concat_arrays([self.known, pa.array(names, pa.string())])
        for (sl, _c), chunk in zip(self.pending, unified.chunks, strict=True):
            self.out[sl] = codes[_np(chunk.indices)]
        self.pending, self.rows = [], 0
        give_back_memory()  # the span's blocks and dictionaries


def _status_codes(col: pa.ChunkedArray) -> np.ndarray:
    return np.array([STATUS_CODES.get(s, scoring.NO_STATUS) for s in col.to_pylist()], dtype=np.int64)


def load_columns(
    notes: Iterable[pa.Table],
    status: Iterable[pa.Table],
    ratings: Iterable[pa.RecordBatch],
    most_ratings: int,
    *,
    reports: tuple[cio.ReadReport, cio.ReadReport, cio.ReadReport | None],
) -> LoadedData:
    """The scorer's input from notes tables (NOTE_COLUMNS), status-history tables
    (STATUS_COLUMNS) and rating batches (RATING_SCHEMA), read in that order: ids numbered in
    order of first appearance (notes, status history, ratings), the reference's preprocessing
    (`kept_ratings`), compact dtypes (int32 indices, float32 values). The ratings fill arrays
    preallocated for `most_ratings` (the Parquet footers' row count, or the files' line count),
    one batch at a time: no text and no per-rating Python object is ever held. `reports`: the
    notes', the ratings' and the status history's reads (the ratings' may fill as the batches
    are read)."""
    notes_idx, people = _NoteIndex(), _Index()
    n_cols: dict[str, list[np.ndarray]] = {"i": [], "author": [], "created": [], "nm": []}
    for t in notes:
        n_cols["i"].append(notes_idx.codes(_np(t["note_id"]).astype(np.int64)))
        n_cols["author"].append(people.get_all(t["author"].to_pylist()))
        n_cols["created"].append(_np(t["created_at_ms"]))
        n_cols["nm"].append(_np(t["not_misleading"]))
    h_cols: dict[str, list[np.ndarray]] = {k: [] for k in ("i", "author", "created", "prev", "last", "locked")}
    for t in status:
        h_cols["i"].append(notes_idx.codes(_np(t["note_id"]).astype(np.int64)))
        h_cols["author"].append(np.array(t["author"].to_pylist(), dtype=object))
        h_cols["created"].append(_np(t["created_at_ms"]))
        h_cols["prev"].append(_status_codes(t["current_status"]))
        h_cols["last"].append(_np(t["most_recent_non_nmr_ms"]))
        h_cols["locked"].append(_status_codes(t["locked_status"]))

    n_notes = len(notes_idx.ids)  # listed notes; notes only rated are added after the ratings
    author = np.full(n_notes, -1, dtype=np.int64)
    created_arr = np.zeros(n_notes, dtype=np.int64)
    nm = np.zeros(n_notes, dtype=bool)
    known = np.zeros(n_notes, dtype=bool)
    previous = np.full(n_notes, scoring.NO_STATUS, dtype=np.int64)
    last_non_nmr = np.full(n_notes, -1, dtype=np.int64)
    locked = np.full(n_notes, scoring.NO_STATUS, dtype=np.int64)
    has_created = np.zeros(n_notes, dtype=bool)
    for i, a, c, m in zip(n_cols["i"], n_cols["author"], n_cols["created"], n_cols["nm"], strict=True):
        author[i], created_arr[i], nm[i], known[i], has_created[i] = a, c, m, True, True
    # The status history fills what the notes file lacks (author, creation: the first row that
    # has one) and gives the status columns (the last row wins).
    for i, a, c, prev, last, lock in zip(*h_cols.values(), strict=True):
        known[i] = True
        for k in np.flatnonzero(author[i] < 0).tolist():  # deleted notes only: few
            if author[i[k]] < 0 and a[k]:
                author[i[k]] = people.get(a[k])
        for k in np.flatnonzero(~has_created[i] & (c > 0)).tolist():
            if not has_created[i[k]]:
                created_arr[i[k]], has_created[i[k]] = c[k], True
        previous[i] = prev
        has_last = last >= 0
        last_non_nmr[i[has_last]] = last[has_last]
        has_lock = lock != scoring.NO_STATUS
        locked[i[has_lock]] = lock[has_lock]

    give_back_memory()  # what reading the notes and the status history left
    note: np.ndarray = np.empty(most_ratings, dtype=np.int32)
    rater: np.ndarray = np.empty(most_ratings, dtype=np.int32)
    value: np.ndarray = np.empty(most_ratings, dtype=np.float32)
    created: np.ndarray = np.empty(most_ratings, dtype=np.int64)
    inc: np.ndarray = np.empty(most_ratings, dtype=bool)
    nh: np.ndarray = np.empty(most_ratings, dtype=bool)
    tags: np.ndarray = np.empty(most_ratings, dtype=np.uint16)
    at = 0
    raters = _RaterSpans(people, rater)
    for batch in ratings:
        n = batch.num_rows
        sl = slice(at, at + n)
        note[sl] = notes_idx.codes(_np(batch.column("note_id")))
        raters.add(sl, batch.column("rater"))
        value[sl] = _np(batch.column("value2")).astype(np.float32) * np.float32(0.5)
        created[sl] = _np(batch.column("created_at_ms"))
        inc[sl] = _np(batch.column("incorrect"))
        nh[sl] = _np(batch.column("any_not_helpful"))
        tags[sl] = _np(batch.column("not_helpful_tags"))
        at += n
    raters.flush()
    if at < most_ratings:  # views: the few rows of skipped lines stay allocated, unused
        note, rater, value, created, inc, nh, tags = (a[:at] for a in (note, rater, value, created, inc, nh, tags))

    n_notes, n_people = len(notes_idx.ids), len(people.ids)
    grow = n_notes - len(author)  # notes named only by ratings: unknown, their ratings dropped
    if grow:
        author = np.r_[author, np.full(grow, -1, dtype=np.int64)]
        created_arr = np.r_[created_arr, np.zeros(grow, np.int64)]
        nm, known = np.r_[nm, np.zeros(grow, bool)], np.r_[known, np.zeros(grow, bool)]
        previous = np.r_[previous, np.full(grow, scoring.NO_STATUS, dtype=np.int64)]
        last_non_nmr = np.r_[last_non_nmr, np.full(grow, -1, dtype=np.int64)]
        locked = np.r_[locked, np.full(grow, scoring.NO_STATUS, dtype=np.int64)]
    give_back_memory()
    keep, dropped = kept_ratings(note, rater, n_people, known, nm, created_arr)
    loaded = scoring.Ratings(rater, note, value, created, inc, nh, tags)
    del raters, rater, note, value, created, inc, nh, tags  # the columns held by `loaded` alone
    if not keep.all():
        loaded.keep_rows(keep)
    del keep
    meta = scoring.NotesMeta(
        n_notes=n_notes,
        not_misleading=nm,
        created_at_ms=created_arr,
        author=author,
        previous_status=previous,
        last_non_nmr_status_ms=last_non_nmr,
        locked_status=locked if (locked != scoring.NO_STATUS).any() else None,
    )
    notes_report, ratings_report, history_report = reports
    return LoadedData(
        note_id_array=np.fromiter(notes_idx.ids, dtype=np.int64, count=len(notes_idx.ids)),
        participant_array=pa.array(people.keys(), pa.string()),
        ratings=loaded,
        meta=meta,
        notes_report=notes_report,
        ratings_report=ratings_report,
        history_report=history_report,
        dropped=dropped,
    )


def _line_count(files: list[Path]) -> int:
    """At least as many as the files' data lines (their newlines, and one per file for a last
    line without one)."""
    n = 0
    for f in files:
        with download_file.open_data(f) as fh:
            while chunk := fh.read(16 << 20):
                n += chunk.count(b"\n")
        n += 1
    return n


def load(notes_path: str | Path, ratings_path: str | Path, status_history_path: str | Path | None = None) -> LoadedData:
    """The TSVs (each a file or a folder of them; X's zips too) into scorer arrays, through the
    loader the columnar form's Parquet goes through (`load_columns`): the notes and the status
    history as small in-memory tables, the ratings as the parser's blocks."""
    use_returning_memory_pool()
    notes_report = cio.ReadReport()
    notes = notes_table(notes_report.rows(cio.read_notes(notes_path)), text=False)
    history_report: cio.ReadReport | None = None
    status: list[pa.Table] = []
    if status_history_path is not None:
        history_report = cio.ReadReport()
        status.append(status_table(history_report.rows(cio.read_status_history(status_history_path))))
    ratings_report = cio.ReadReport()
    files = cnr.rating_files(ratings_path)
    batches = (rating_batch(blk) for blk in cnr.iter_rating_blocks(files, ratings_report))
    data = load_columns(
        [notes], status, batches, _line_count(files), reports=(notes_report, ratings_report, history_report)
    )
    give_back_memory()  # what the load freed: the scorer's arrays come next
    return data


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
    result = scoring.score(data.ratings, data.meta, data.n_participants, config)
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
