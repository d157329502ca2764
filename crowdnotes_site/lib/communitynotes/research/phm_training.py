"""The PHM's training data from a whole public download folder, in bounded memory (pure: no Django).

Reads what `manage.py research_download FOLDER` leaves: FOLDER/columnar/notes-*.parquet and
ratings-*.parquet, and the scorer's rater parameters in FOLDER/research/helpfulness_scores.tsv.

The sample rule (`SampleRule`, deterministic, stated in the saved model's metadata):
1. notes: of the notes file's notes with a non-empty text, the `max_notes` with the smallest
   `mix64(noteId, seed)` (all of them when there are fewer);
2. a rating of those notes whose rater has no intercept and factor in helpfulness_scores.tsv is
   dropped and counted;
3. of the rest, those whose `mix64(noteId, createdAtMillis, seed)` falls below a cut chosen from a
   65,536-bucket histogram of the same hash (a first pass over the noteId, rater and
   createdAtMillis columns), the largest cut that keeps at most `max_ratings`.
Labels from value2: 2 Helpful, 1 Somewhat, 0 Not helpful.

Ratings are streamed row group by row group; memory holds the kept notes' texts and ids, the rater
parameter table, the 65,536 counts and the kept ratings (13 bytes each here), never the whole file.
The post input is empty (the download has no post text), and the note features are the groups
`GROUPS` (the writer's record is left out: computing it without leaking held-out notes' scores
would need a by-time pass over the scored notes; say so in the metadata).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from crowdnotes_site.lib.communitynotes.supernotes import features as nf
from crowdnotes_site.lib.communitynotes.supernotes import phm

GROUPS = ("sources", "text", "classification")
WRITER_LEFT_OUT = (
    "writer record left out: it needs each note's earlier notes by the same writer scored without the held-out "
    "notes (a by-time pass over the scored notes), not done here"
)
BUCKETS = 1 << 16
SPAN_ROWS = 2_000_000  # ratings per streamed span
RATER_COLUMNS = {
    "raterParticipantId": pa.string(),
    "coreRaterIntercept": pa.float64(),
    "coreRaterFactor1": pa.float64(),
}
_MASK = np.uint64(0xFFFFFFFFFFFFFFFF)


class DownloadError(ValueError):
    """The folder is not a download with research outputs (a clear message for the command)."""


@dataclass(frozen=True)
class SampleRule:
    max_notes: int = 500_000
    max_ratings: int = 20_000_000
    seed: int = 0

    def describe(self) -> str:
        return (
            f"notes: the {self.max_notes:,} notes with text having the smallest mix64(noteId, seed={self.seed}); "
            "ratings of those notes by raters with a scorer intercept and factor (the others dropped and counted), "
            f"those whose mix64(noteId, createdAtMillis, seed) is below the largest cut keeping at most "
            f"{self.max_ratings:,} (65,536-bucket histogram)"
        )


def mix64(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser on uint64 (wrapping arithmetic): a fixed, well-spread hash of integers."""
    z = np.asarray(x).astype(np.uint64)
    with np.errstate(over="ignore"):
        z = (z + np.uint64(0x9E3779B97F4A7C15)) & _MASK
        z = ((z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)) & _MASK
        z = ((z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)) & _MASK
    return z ^ (z >> np.uint64(31))


def note_hash(note_id: np.ndarray, seed: int) -> np.ndarray:
    """mix64(id, seed) of int64 ids (noteIds here; evaluate_jury_download draws its posts by tweetId with it)."""
    return mix64(np.asarray(note_id, dtype=np.int64).view(np.uint64) ^ mix64(np.array([seed]))[0])


def rating_hash(note_id: np.ndarray, created_ms: np.ndarray, seed: int) -> np.ndarray:
    return mix64(note_hash(note_id, seed) ^ np.asarray(created_ms, dtype=np.int64).view(np.uint64))


def choose_ids(ids: np.ndarray, max_ids: int, seed: int) -> np.ndarray:
    """The kept ids, sorted: the `max_ids` with the smallest `note_hash(id, seed)` (ties broken by
    id, so exact). The notes of the sample rule; the posts (tweetIds) of evaluate_jury_download."""
    ids = np.unique(np.asarray(ids, dtype=np.int64))
    if len(ids) <= max_ids:
        return ids
    order = np.lexsort((ids, note_hash(ids, seed)))
    return np.sort(ids[order[:max_ids]])


def rating_cut(histogram: np.ndarray, max_ratings: int) -> int:
    """The number of low buckets to keep: the largest whose ratings total at most `max_ratings`."""
    return int(np.searchsorted(np.cumsum(histogram), max_ratings, side="right"))


def _bucket(h: np.ndarray) -> np.ndarray:
    return (h >> np.uint64(64 - 16)).astype(np.int64)


@dataclass
class Counts:
    ratings_read: int = 0
    ratings_of_held_out_notes: int = 0
    ratings_of_notes_not_in_notes_file_or_without_text: int = 0
    ratings_of_notes_not_sampled: int = 0
    ratings_of_kept_notes: int = 0
    ratings_over_the_cut: int = 0
    ratings_rater_without_factor: int = 0
    ratings_kept: int = 0
    notes_with_text: int = 0
    notes_held_out: int = 0
    notes_kept: int = 0
    notes_kept_with_ratings: int = 0
    raters_with_factor: int = 0
    buckets_kept: int = BUCKETS


@dataclass
class DownloadSample:
    """The kept notes (sorted ids, texts, classification) and kept ratings (note index, rater
    intercept and factor, label 0 Helpful / 1 Somewhat / 2 Not helpful)."""

    note_id: np.ndarray
    text: list[str]
    not_misleading: np.ndarray
    note: np.ndarray  # int32 index into note_id
    rater_intercept: np.ndarray  # float32
    rater_factor: np.ndarray  # float32
    label: np.ndarray  # int8
    counts: Counts
    seconds: dict[str, float] = field(default_factory=dict)


def check_folder(folder: Path) -> tuple[list[Path], list[Path], Path]:
    col, scores = folder / "columnar", folder / "research" / "helpfulness_scores.tsv"
    notes, ratings = sorted(col.glob("notes-*.parquet")), sorted(col.glob("ratings-*.parquet"))
    if not notes or not ratings:
        raise DownloadError(
            f"{folder}: no columnar notes-*.parquet / ratings-*.parquet under {col}; run "
            f"`manage.py research_download {folder}` first"
        )
    if not scores.exists():
        raise DownloadError(
            f"{folder}: no rater parameters ({scores} is missing); run `manage.py research_download {folder}` "
            "(its score step writes them) first"
        )
    return notes, ratings, scores


def read_rater_parameters(path: Path) -> tuple[pa.Array, np.ndarray, np.ndarray]:
    """Rater ids (Arrow strings) with both an intercept and a factor, and those two as float32."""
    table = pacsv.read_csv(
        path,
        parse_options=pacsv.ParseOptions(delimiter="\t", quote_char=False),
        convert_options=pacsv.ConvertOptions(column_types=RATER_COLUMNS, include_columns=list(RATER_COLUMNS)),
    )
    ok = pc.and_(pc.is_valid(table["coreRaterIntercept"]), pc.is_valid(table["coreRaterFactor1"]))
    table = table.filter(ok)
    ids = table["raterParticipantId"].combine_chunks()
    return (
        ids,
        np.asarray(table["coreRaterIntercept"].to_numpy(), dtype=np.float32),
        np.asarray(table["coreRaterFactor1"].to_numpy(), dtype=np.float32),
    )


def _row_groups(paths: Sequence[Path], columns: list[str]) -> Any:
    for path in paths:
        pf = pq.ParquetFile(path)
        for i in range(pf.num_row_groups):
            yield from pf.read_row_group(i, columns=columns).to_batches()


def _spans(paths: Sequence[Path], columns: list[str], rows: int = SPAN_ROWS) -> Any:
    """Record batches of about `rows` ratings (consecutive row groups, one unified rater
    dictionary each): the rater lookup builds its hash set of every rater once per span, not once
    per row group (~0.6 s for 1.4 M raters; the full shape has ~4,400 row groups)."""
    pending: list[pa.Table] = []
    count = 0
    for path in paths:
        pf = pq.ParquetFile(path, read_dictionary=["rater"])
        for i in range(pf.num_row_groups):
            table = pf.read_row_group(i, columns=columns)
            pending.append(table)
            count += table.num_rows
            if count >= rows:
                yield pa.concat_tables(pending).unify_dictionaries().combine_chunks().to_batches()[0]
                pending, count = [], 0
    if pending:
        table = pa.concat_tables(pending).unify_dictionaries().combine_chunks()
        if table.num_rows:
            yield table.to_batches()[0]


def _lookup(sorted_ids: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """Index of each id in `sorted_ids`, -1 where absent."""
    if len(sorted_ids) == 0:
        return np.full(len(ids), -1, dtype=np.int64)
    pos = np.searchsorted(sorted_ids, ids).clip(max=len(sorted_ids) - 1)
    return np.where(sorted_ids[pos] == ids, pos, -1)


RaterParameters = tuple[pa.Array, np.ndarray, np.ndarray]  # rater ids (strings), intercept, factor (float32)


def read_sample(
    folder: str | Path, rule: SampleRule, say: Callable[[str], None] = lambda _m: None, *, span_rows: int = SPAN_ROWS,
    exclude_notes: np.ndarray | None = None, raters: RaterParameters | None = None,
) -> DownloadSample:  # fmt: skip
    """Apply `rule` to the download in `folder` (two streamed passes over the ratings' columns, in
    spans of about `span_rows` ratings; the result does not depend on the span).

    `exclude_notes` (noteIds): held out before the rule (evaluate_jury_download: every note of
    its held-out posts), neither kept nor counted among the notes with text; their ratings are
    counted apart and never read further. `raters`: the rater parameters to join (default: the
    research run's, helpfulness_scores.tsv)."""
    folder = Path(folder)
    notes_paths, rating_paths, scores_path = check_folder(folder)
    held = np.unique(np.asarray(exclude_notes if exclude_notes is not None else [], dtype=np.int64))
    counts = Counts()
    t0 = time.perf_counter()
    # Notes with text: ids first (small), then the kept notes' texts batch by batch.
    with_text: list[np.ndarray] = []
    for b in _row_groups(notes_paths, ["note_id", "summary"]):
        has = pc.greater(pc.utf8_length(pc.utf8_trim_whitespace(b.column(1).fill_null(""))), 0)
        with_text.append(np.asarray(b.column(0).filter(has).to_numpy(), dtype=np.int64))
    all_with_text = np.unique(np.concatenate(with_text)) if with_text else np.zeros(0, np.int64)
    counts.notes_held_out = len(held)
    all_with_text = all_with_text[_lookup(held, all_with_text) < 0]
    counts.notes_with_text = len(all_with_text)
    kept = choose_ids(all_with_text, rule.max_notes, rule.seed)
    del with_text
    text: list[str | None] = [None] * len(kept)
    nm = np.zeros(len(kept), dtype=bool)
    for b in _row_groups(notes_paths, ["note_id", "not_misleading", "summary"]):
        idx = _lookup(kept, np.asarray(b.column(0).to_numpy(), dtype=np.int64))
        rows = np.flatnonzero(idx >= 0)
        summaries = b.column(2).take(pa.array(rows)).to_pylist()
        flags = np.asarray(b.column(1).take(pa.array(rows)).to_numpy(zero_copy_only=False), dtype=bool)
        for r, s, f in zip(idx[rows], summaries, flags, strict=True):
            if text[r] is None:  # the first row of a repeated noteId
                text[r], nm[r] = s, f
    counts.notes_kept = len(kept)
    seconds = {"notes": time.perf_counter() - t0}

    rater_ids, r_int, r_fac = raters if raters is not None else read_rater_parameters(scores_path)
    counts.raters_with_factor = len(rater_ids)

    def usable(b: pa.RecordBatch, first: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Rows of kept notes whose rater has a factor: (rows, note index, rater index, hash)."""
        nid = np.asarray(b.column(0).to_numpy(), dtype=np.int64)
        idx = _lookup(kept, nid)
        sel = np.flatnonzero(idx >= 0)
        if first:
            counts.ratings_read += len(nid)
            counts.ratings_of_held_out_notes += int((_lookup(held, nid) >= 0).sum())
            counts.ratings_of_notes_not_sampled += int((_lookup(all_with_text, nid[idx < 0]) >= 0).sum())
            counts.ratings_of_kept_notes += len(sel)
        rater = b.column(1)
        if not isinstance(rater, pa.DictionaryArray):
            rater = rater.dictionary_encode()
        where = np.asarray(pc.index_in(rater.dictionary, value_set=rater_ids).fill_null(-1).to_numpy(), np.int64)
        r = where[np.asarray(rater.indices.to_numpy(zero_copy_only=False), dtype=np.int64)[sel]]
        if first:
            counts.ratings_rater_without_factor += int((r < 0).sum())
        sel, r = sel[r >= 0], r[r >= 0]
        h = rating_hash(nid[sel], np.asarray(b.column(2).to_numpy(), dtype=np.int64)[sel], rule.seed)
        return sel, idx[sel], r, h

    # Pass 1: the histogram of the usable ratings' hashes (rater join first, so the cap counts
    # ratings that are trained on).
    t1 = time.perf_counter()
    hist = np.zeros(BUCKETS, dtype=np.int64)
    for b in _spans(rating_paths, ["note_id", "rater", "created_at_ms"], span_rows):
        hist += np.bincount(_bucket(usable(b, True)[3]), minlength=BUCKETS)
    counts.ratings_of_notes_not_in_notes_file_or_without_text = (
        counts.ratings_read
        - counts.ratings_of_kept_notes
        - counts.ratings_of_notes_not_sampled
        - counts.ratings_of_held_out_notes
    )
    cut = rating_cut(hist, rule.max_ratings)
    counts.buckets_kept = cut
    counts.ratings_over_the_cut = int(hist[cut:].sum())
    seconds["ratings_pass1"] = time.perf_counter() - t1

    # Pass 2: the kept ratings (the same rows, below the cut) with their labels.
    t2 = time.perf_counter()
    parts: dict[str, list[np.ndarray]] = {"note": [], "ri": [], "rf": [], "label": []}
    for b in _spans(rating_paths, ["note_id", "rater", "created_at_ms", "value2"], span_rows):
        sel, idx, r, h = usable(b, False)
        under = _bucket(h) < cut
        sel, idx, r = sel[under], idx[under], r[under]
        parts["note"].append(idx.astype(np.int32))
        parts["ri"].append(r_int[r])
        parts["rf"].append(r_fac[r])
        value2 = np.asarray(b.column(3).to_numpy(zero_copy_only=False), dtype=np.int8)[sel]
        parts["label"].append((2 - value2).astype(np.int8))

    def cat(name: str, dtype: type) -> np.ndarray:
        return np.concatenate(parts.pop(name)) if parts[name] else np.zeros(0, dtype)

    note, ri, rf, label = cat("note", np.int32), cat("ri", np.float32), cat("rf", np.float32), cat("label", np.int8)
    counts.ratings_kept = len(label)
    counts.notes_kept_with_ratings = len(np.unique(note))
    seconds["ratings_pass2"] = time.perf_counter() - t2
    say(f"sample: {counts.ratings_kept:,} ratings of {counts.notes_kept:,} notes kept "
        f"({counts.ratings_read:,} read)")  # fmt: skip
    return DownloadSample(kept, [t or "" for t in text], nm, note, ri, rf, label, counts,
                          {k: round(v, 2) for k, v in seconds.items()})  # fmt: skip


def note_inputs(sample: DownloadSample) -> list[nf.NoteInput]:
    return [
        nf.NoteInput(t, "NOT_MISLEADING" if m else nf.MISLEADING)
        for t, m in zip(sample.text, sample.not_misleading, strict=True)
    ]


def describe(folder: Path, rule: SampleRule, sample: DownloadSample, embedder: str) -> dict[str, Any]:
    """What the saved model's metadata says about its training data."""
    return {
        "source": "download",
        "folder": str(folder.resolve()),
        "sample_rule": rule.describe(),
        "rule": asdict(rule),
        "counts": asdict(sample.counts),
        "seconds": sample.seconds,
        "embedder": embedder,
        "post_input": "none (the download has no post text: zeros and the 'no post text' flag)",
        "feature_groups": list(GROUPS),
        "left_out": [WRITER_LEFT_OUT, "stated reasons (not in the columnar notes): reasons_known = 0"],
    }


def train(
    folder: str | Path,
    rule: SampleRule,
    *,
    embed: Callable[[Sequence[str]], np.ndarray],
    embedder: str,
    epochs: int = 4,
    batch_size: int = 4096,
    say: Callable[[str], None] = lambda _m: None,
    exclude_notes: np.ndarray | None = None,
    raters: RaterParameters | None = None,
) -> phm.PHM:
    """Sample, embed (timed apart), compute the note features and train the PHM (held out by note,
    as phm.train does). Returns the model (not saved) with the training data in `meta.extra`.
    `exclude_notes`, `raters`: see `read_sample` (evaluate_jury_download's folds)."""
    folder = Path(folder)
    sample = read_sample(folder, rule, say, exclude_notes=exclude_notes, raters=raters)
    if sample.counts.ratings_kept == 0:
        raise DownloadError(f"{folder}: no rating left after the sample rule ({asdict(sample.counts)})")
    t = time.perf_counter()
    note_emb = np.asarray(embed(sample.text), dtype=np.float32)
    sample.seconds["embedding"] = round(time.perf_counter() - t, 2)
    say(f"embedding ({embedder}): {len(sample.text):,} notes in {sample.seconds['embedding']:.1f} s")
    t = time.perf_counter()
    names = nf.feature_names(GROUPS)
    feats = nf.columns(note_inputs(sample), names)
    sample.seconds["features"] = round(time.perf_counter() - t, 2)
    say(f"note features: {len(names)} columns in {sample.seconds['features']:.1f} s")
    data = phm.TrainingData(
        note_emb,
        np.zeros_like(note_emb),
        np.zeros(len(note_emb), dtype=np.float32),
        sample.note,
        sample.rater_intercept,
        sample.rater_factor,
        sample.label,
        feats,
        names,
    )
    c = sample.counts
    model = phm.train(
        data,
        embedder=embedder,
        trained_on=f"download {folder.resolve()} (sample: {c.ratings_kept:,} of {c.ratings_read:,} ratings, "
        f"{c.notes_kept:,} of {c.notes_with_text:,} notes with text)",
        epochs=epochs,
        batch_size=batch_size,
        seed=rule.seed,
    )
    sample.seconds["training"] = model.meta.train_seconds
    model.meta.extra["training_data"] = describe(folder, rule, sample, embedder)
    return model
