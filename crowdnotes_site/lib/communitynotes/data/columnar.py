"""The public download in a columnar form kept beside the TSVs, and scorer input read from it.

Form: one Parquet file per TSV (pyarrow), in `<folder>/columnar/`, each with a JSON manifest
(the source's size and mtime, rows read, rows skipped by reason with examples, the header's
unknown columns). A rerun converts only the TSVs whose size or mtime changed. Every file is
written to a temporary name and renamed, the manifest last, so a killed conversion leaves no
half-written output and resumes at the first shard without a current manifest.

Ratings are parsed by communitynotes_io.iter_rating_arrays (the scorer's own parser: the same
rows, values and skip reasons as score_communitynotes) and stored compactly: noteId int64, the
rater as a dictionary column (int32 codes, the block's distinct ids once), createdAtMillis
int64, the value as int8 halves (0, 1, 2), the tag flags and the uint16 not-helpful tag bits.

Loading for scoring fills preallocated compact arrays (the row counts are in the Parquet
footers), one row group at a time: no text and no per-rating Python object is ever held.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from crowdnotes_site.lib.communitynotes.data import files as download_file
from crowdnotes_site.lib.communitynotes.data import scorer_input as stsv
from crowdnotes_site.lib.communitynotes.data import tsv as cio
from crowdnotes_site.lib.communitynotes.scoring import scorer as scoring

FORMAT_VERSION = 1  # bump when the columnar layout changes: every shard converts again
REQUIRED_RATING_COLUMNS = ("noteId", "raterParticipantId", "createdAtMillis", "helpfulnessLevel")
KNOWN_RATING_COLUMNS = frozenset(
    {
        "noteId", "raterParticipantId", "createdAtMillis", "version", "agree", "disagree", "helpful",
        "notHelpful", "helpfulnessLevel", "ratedOnTweetId", "helpfulOther", "helpfulInformative",
        "helpfulClear", "helpfulEmpathetic", "helpfulGoodSources", "helpfulUniqueContext",
        "helpfulAddressesClaim", "helpfulImportantContext", "helpfulUnbiasedLanguage",
        *scoring.NOT_HELPFUL_TAGS, "notHelpfulArgumentativeOrInflammatory",
    }
)  # fmt: skip
REQUIRED_NOTE_COLUMNS = ("noteId", "noteAuthorParticipantId", "createdAtMillis", "tweetId", "classification")
REQUIRED_STATUS_COLUMNS = ("noteId", "createdAtMillis", "timestampMillisOfFirstNonNMRStatus", "firstNonNMRStatus")


DownloadError = download_file.DownloadError


@dataclass
class Converted:
    """One TSV's columnar form and what its conversion read."""

    source: str
    target: str
    kind: str  # notes, ratings, status, enrollment, requests
    rows: int
    skipped: dict[str, int] = field(default_factory=dict)
    examples: list[str] = field(default_factory=list)
    unknown_columns: list[str] = field(default_factory=list)
    seconds: float = 0.0
    reused: bool = False


def kind_of(name: str) -> str | None:
    for prefix, kind in (
        ("notes-", "notes"),
        ("ratings-", "ratings"),
        ("noteStatusHistory-", "status"),
        ("userEnrollment-", "enrollment"),
        ("noteRequests-", "requests"),
    ):
        if name.startswith(prefix) and name.endswith(download_file.SUFFIXES):
            return kind
    return None


def download_files(folder: Path) -> dict[str, list[Path]]:
    """The download's files by kind, each a `.tsv` or X's `.zip` of it (download_file)."""
    files: dict[str, list[Path]] = {k: [] for k in ("notes", "ratings", "status", "enrollment", "requests")}
    for f in download_file.data_files(folder):
        kind = kind_of(f.name)
        if kind:
            files[kind].append(f)
    if not files["notes"]:
        raise DownloadError(
            f"{folder}: no notes-*.tsv or .zip (ratings name notes; without the notes file none can be scored)"
        )
    if not files["ratings"]:
        raise DownloadError(f"{folder}: no ratings-*.tsv or .zip")
    return files


def _header(path: Path) -> list[str]:
    with download_file.open_data(path) as fh:
        line = fh.readline()
    return line.decode("utf-8", errors="replace").rstrip("\r\n").lstrip("\ufeff").split("\t")


def _line_count(path: Path) -> int:
    n = 0
    with download_file.open_data(path) as fh:
        while chunk := fh.read(16 << 20):
            n += chunk.count(b"\n")
    return n


def check_file(path: Path, kind: str) -> list[str]:
    """Refuse a file the research path cannot read whole: a header without the columns of
    today's schema (another year's layout), or a last row cut short (a truncated download).
    Returns the header's unknown columns (kept out of the columnar form, reported)."""
    header = _header(path)
    required = {"ratings": REQUIRED_RATING_COLUMNS, "notes": REQUIRED_NOTE_COLUMNS, "status": REQUIRED_STATUS_COLUMNS}
    missing = [c for c in required.get(kind, ()) if c not in header]
    if missing:
        raise DownloadError(
            f"{path}:1: the header lacks {', '.join(missing)}: not today's {kind} schema "
            f"(a file of another year's layout?); header starts {header[:6]}"
        )
    size = download_file.data_size(path)
    if size or download_file.is_zip(path):
        with download_file.open_data(path) as fh:
            tail = download_file.read_tail(fh, size)  # a zip's member: read whole, its CRC checked
        if tail and not tail.endswith(b"\n"):
            last = tail.rsplit(b"\n", 1)[-1]
            fields = len(last.split(b"\t"))
            if fields != len(header):
                line = _line_count(path) + 1
                raise DownloadError(
                    f"{path}:{line}: the file ends inside a row ({fields} of {len(header)} "
                    "fields, no final newline): a truncated download; fetch the file again"
                )
    if kind == "ratings":
        return [c for c in header if c not in KNOWN_RATING_COLUMNS]
    return []


def _fingerprint(path: Path) -> dict[str, int]:
    st = path.stat()
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "format": FORMAT_VERSION}


def _manifest_path(target: Path) -> Path:
    return target.with_name(target.name + ".json")


def _current(source: Path, target: Path) -> Converted | None:
    """The earlier conversion of `source`, if its output exists and the source is unchanged."""
    manifest = _manifest_path(target)
    if not (manifest.exists() and target.exists()):
        return None
    saved = json.loads(manifest.read_text())
    if saved.get("fingerprint") != _fingerprint(source):
        return None
    return Converted(**{k: v for k, v in saved.items() if k != "fingerprint"}, reused=True)


def _publish(tmp: Path, target: Path, done: Converted, source: Path) -> None:
    tmp.replace(target)
    manifest = _manifest_path(target)
    part = manifest.with_name(manifest.name + ".part")
    body = {k: v for k, v in done.__dict__.items() if k != "reused"}
    part.write_text(json.dumps({**body, "fingerprint": _fingerprint(source)}, indent=1))
    part.replace(manifest)


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


def _report_of(report: cio.ReadReport) -> tuple[dict[str, int], list[str]]:
    return dict(report.skipped), [f"{s.path}:{s.line}: {s.reason}" for s in report.examples]


def _convert_ratings(source: Path, tmp: Path, progress: Callable[[int], None]) -> tuple[int, cio.ReadReport]:
    report = cio.ReadReport()
    rows = 0
    with pq.ParquetWriter(tmp, RATING_SCHEMA, compression="zstd") as writer:
        for blk in cio.iter_rating_arrays(source, report):
            rater = pa.DictionaryArray.from_arrays(pa.array(blk.rater_code, pa.int32()), pa.array(blk.rater_keys))
            table = pa.Table.from_arrays(
                [
                    pa.array(blk.note_id),
                    rater,
                    pa.array(blk.created_at_ms),
                    pa.array((blk.value * 2).astype(np.int8)),
                    pa.array(blk.incorrect),
                    pa.array(blk.any_not_helpful_tag),
                    pa.array(blk.not_helpful_tags),
                ],
                schema=RATING_SCHEMA,
            )
            writer.write_table(table)
            rows += len(blk.value)
            progress(rows)
    return rows, report


def _convert_notes(source: Path, tmp: Path) -> tuple[int, cio.ReadReport]:
    report = cio.ReadReport()
    cols: dict[str, list[object]] = {k: [] for k in ("note_id", "author", "created_at_ms", "tweet_id", "nm", "summary")}
    for n in report.rows(cio.read_notes(source)):
        cols["note_id"].append(n.note_id)
        cols["author"].append(n.author_id)
        cols["created_at_ms"].append(n.created_at_ms)
        cols["tweet_id"].append(int(n.tweet_id) if n.tweet_id.isdigit() else 0)
        cols["nm"].append(n.classification == cio.NOT_MISLEADING)
        cols["summary"].append(n.summary)
    table = pa.table(
        {
            "note_id": pa.array(cols["note_id"], pa.int64()),
            "author": pa.array(cols["author"], pa.string()),
            "created_at_ms": pa.array(cols["created_at_ms"], pa.int64()),
            "tweet_id": pa.array(cols["tweet_id"], pa.int64()),
            "not_misleading": pa.array(cols["nm"], pa.bool_()),
            "summary": pa.array(cols["summary"], pa.string()),
        }
    )
    pq.write_table(table, tmp, compression="zstd")
    return table.num_rows, report


def _convert_status(source: Path, tmp: Path) -> tuple[int, cio.ReadReport]:
    report = cio.ReadReport()
    names = ("note_id", "author", "created_at_ms", "first_non_nmr_ms", "first_non_nmr_status", "current_status",
             "most_recent_non_nmr_ms", "locked_status")  # fmt: skip
    cols: dict[str, list[object]] = {k: [] for k in names}
    for h in report.rows(cio.read_status_history(source)):
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
    table = pa.table({k: pa.array(v, types.get(k, pa.string())) for k, v in cols.items()})
    pq.write_table(table, tmp, compression="zstd")
    return table.num_rows, report


def _convert_plain(source: Path, tmp: Path) -> tuple[int, cio.ReadReport]:
    """Enrollment and note requests: every column as text, streamed by pyarrow's CSV reader."""
    rows = 0
    with download_file.open_data(source) as fh:
        reader = pacsv.open_csv(
            fh,
            parse_options=pacsv.ParseOptions(delimiter="\t", quote_char=False),
            convert_options=pacsv.ConvertOptions(
                column_types={name: pa.string() for name in _header(source)}, strings_can_be_null=False
            ),
            read_options=pacsv.ReadOptions(block_size=16 << 20),
        )
        with pq.ParquetWriter(tmp, reader.schema, compression="zstd") as writer:
            for batch in reader:
                writer.write_batch(batch)
                rows += batch.num_rows
    return rows, cio.ReadReport(read=rows)


class _Progress:
    """Rows/s of the file being converted and an estimate of the whole conversion's time left
    (from the bytes converted so far; the file's own progress from its rows and mean row size)."""

    def __init__(
        self, say: Callable[[str], None], source: Path, t0: float, t_start: float, done: int, total: int
    ) -> None:
        self.say, self.source, self.t0, self.t_start, self.done, self.total = say, source, t0, t_start, done, total
        self.last = t0
        with download_file.open_data(source) as fh:
            sample = fh.read(1 << 16).split(b"\n")[1:-1]
        self.row_bytes = sum(len(r) + 1 for r in sample) / max(len(sample), 1)

    def __call__(self, rows: int) -> None:
        now = time.perf_counter()
        if now - self.last < 5:
            return
        self.last = now
        converted = self.done + rows * self.row_bytes
        eta = (now - self.t_start) * max(self.total - converted, 0) / max(converted, 1)
        self.say(
            f"convert {self.source.name}: {rows:,} rows ({rows / (now - self.t0):,.0f} rows/s), "
            f"about {eta:,.0f} s left in all"
        )


def convert(folder: str | Path, say: Callable[[str], None] | None = None) -> list[Converted]:
    """Convert every file of the download folder (a TSV or X's zip of it) whose columnar form is
    missing or stale (the file's size or mtime changed: the zip's, for a zip)."""
    src = Path(folder)
    out = src / "columnar"
    out.mkdir(exist_ok=True)
    files = download_files(src)
    say = say or (lambda _m: None)
    order = [(k, f) for k in ("notes", "status", "ratings", "enrollment", "requests") for f in files[k]]
    # Every file is checked before any is converted: a bad shard fails the run at once.
    unknown = {f: check_file(f, k) for k, f in order}
    total_bytes = sum(download_file.data_size(f) for _k, f in order)  # a zip's: its TSV's
    done_bytes = 0
    t_start = time.perf_counter()
    results: list[Converted] = []
    for kind, source in order:
        target = out / (source.stem + ".parquet")
        size = download_file.data_size(source)
        earlier = _current(source, target)
        if earlier is not None:
            say(f"convert {source.name}: unchanged since its conversion ({earlier.rows:,} rows), kept")
            results.append(earlier)
            total_bytes -= size
            continue
        tmp = target.with_name(target.name + ".part")
        t0 = time.perf_counter()
        tick = _Progress(say, source, t0, t_start, done_bytes, total_bytes)
        if kind == "ratings":
            rows, report = _convert_ratings(source, tmp, tick)
        elif kind == "notes":
            rows, report = _convert_notes(source, tmp)
        elif kind == "status":
            rows, report = _convert_status(source, tmp)
        else:
            rows, report = _convert_plain(source, tmp)
        skipped, examples = _report_of(report)
        seconds = time.perf_counter() - t0
        done = Converted(str(source), str(target), kind, rows, skipped, examples, unknown[source], round(seconds, 2))
        _publish(tmp, target, done, source)
        done_bytes += size
        extra = f"; skipped {sum(skipped.values()):,} rows ({', '.join(skipped)})" if skipped else ""
        cols = f"; unknown columns ignored: {', '.join(unknown[source])}" if unknown[source] else ""
        say(
            f"convert {source.name}: {rows:,} rows in {seconds:,.1f} s ({rows / max(seconds, 1e-9):,.0f} rows/s){extra}{cols}"
        )
        results.append(done)
    for stale in out.glob("*.part"):  # left by a killed run
        stale.unlink()
    return results


# ---------------------------------------------------------------- loading for the scorer


def _table(path: Path, columns: list[str]) -> pa.Table:
    return pq.read_table(path, columns=columns)


def _np(col: pa.ChunkedArray | pa.Array) -> np.ndarray:
    return np.asarray(col.to_numpy(zero_copy_only=False)) if isinstance(col, pa.Array) else np.asarray(col.to_numpy())


def _ratings_blocks(paths: list[Path]) -> Iterator[tuple[pa.RecordBatch, Path]]:
    for path in paths:
        pf = pq.ParquetFile(path, read_dictionary=["rater"])
        for i in range(pf.num_row_groups):
            yield from ((b, path) for b in pf.read_row_group(i).to_batches())


class _RaterSpans:
    """Rater ids of the rating blocks to `people`'s indices, with the hashing done by Arrow.

    Each row group stores its own rater dictionary, and at the full shape most ids in a block are
    distinct: looking every block's dictionary up in a Python dict cost ~160 M lookups (442 s of
    the full-shape scoring). Instead the blocks of a span of ~1 M ratings are unified into one
    dictionary (Arrow appends each block's unseen ids in that block's dictionary order, so the
    numbering is the one a per-block lookup gives), that dictionary is looked up in one Arrow array
    of every id numbered so far (`pc.index_in`, a C++ hash table), and only ids never seen before
    go through `people` (numbered in the same order as before)."""

    SPAN = 1 << 20

    def __init__(self, people: stsv._Index, out: np.ndarray) -> None:
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
        import pyarrow.compute as pc

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


def load(columnar_dir: str | Path) -> stsv.LoadedData:
    """The scorer's input from the columnar form, with scoring_tsv.load's rules (ids numbered
    in order of first appearance: notes file, status history, ratings), in compact dtypes:
    int32 indices, float32 values, preallocated from the Parquet row counts."""
    d = Path(columnar_dir)
    notes_paths = sorted(d.glob("notes-*.parquet"))
    status_paths = sorted(d.glob("noteStatusHistory-*.parquet"))
    rating_paths = sorted(d.glob("ratings-*.parquet"))
    notes_idx, people = stsv._NoteIndex(), stsv._Index()
    n_cols: dict[str, list[np.ndarray]] = {"i": [], "author": [], "created": [], "nm": []}
    for p in notes_paths:
        t = _table(p, ["note_id", "author", "created_at_ms", "not_misleading"])
        n_cols["i"].append(notes_idx.codes(_np(t["note_id"]).astype(np.int64)))
        n_cols["author"].append(people.get_all(t["author"].to_pylist()))
        n_cols["created"].append(_np(t["created_at_ms"]))
        n_cols["nm"].append(_np(t["not_misleading"]))
    h_cols: dict[str, list[np.ndarray]] = {k: [] for k in ("i", "author", "created", "prev", "last", "locked")}
    for p in status_paths:
        t = _table(
            p, ["note_id", "author", "created_at_ms", "current_status", "most_recent_non_nmr_ms", "locked_status"]
        )
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
    # has one) and gives the status columns (the last row wins), as in scoring_tsv.load.
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

    total = sum(pq.ParquetFile(p).metadata.num_rows for p in rating_paths)
    note = np.empty(total, dtype=np.int32)
    rater = np.empty(total, dtype=np.int32)
    value = np.empty(total, dtype=np.float32)
    created = np.empty(total, dtype=np.int64)
    inc = np.empty(total, dtype=bool)
    nh = np.empty(total, dtype=bool)
    tags = np.empty(total, dtype=np.uint16)
    at = 0
    raters = _RaterSpans(people, rater)
    for batch, _path in _ratings_blocks(rating_paths):
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
    assert at == total, (at, total)

    n_notes, n_people = len(notes_idx.ids), len(people.ids)
    grow = n_notes - len(author)  # notes named only by ratings: unknown, their ratings dropped
    if grow:
        author = np.r_[author, np.full(grow, -1, dtype=np.int64)]
        created_arr = np.r_[created_arr, np.zeros(grow, np.int64)]
        nm, known = np.r_[nm, np.zeros(grow, bool)], np.r_[known, np.zeros(grow, bool)]
        previous = np.r_[previous, np.full(grow, scoring.NO_STATUS, dtype=np.int64)]
        last_non_nmr = np.r_[last_non_nmr, np.full(grow, -1, dtype=np.int64)]
        locked = np.r_[locked, np.full(grow, scoring.NO_STATUS, dtype=np.int64)]
    keep, dropped = stsv.kept_ratings(note, rater, n_people, known, nm, created_arr)
    ratings = scoring.Ratings(rater, note, value, created, inc, nh, tags)
    del raters, rater, note, value, created, inc, nh, tags  # the columns held by `ratings` alone
    if not keep.all():
        ratings.keep_rows(keep)
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
    reports = _manifest_reports(d)
    return stsv.LoadedData(
        note_ids=[int(k) for k in notes_idx.keys()],  # type: ignore[call-overload]
        participant_ids=[str(k) for k in people.keys()],
        ratings=ratings,
        meta=meta,
        notes_report=reports["notes"],
        ratings_report=reports["ratings"],
        history_report=reports["status"],
        dropped=dropped,
    )


def _status_codes(col: pa.ChunkedArray) -> np.ndarray:
    names = col.to_pylist()
    return np.array([stsv.STATUS_CODES.get(s, scoring.NO_STATUS) for s in names], dtype=np.int64)


def _manifest_reports(d: Path) -> dict[str, cio.ReadReport]:
    out = {k: cio.ReadReport() for k in ("notes", "ratings", "status")}
    for manifest in sorted(d.glob("*.parquet.json")):
        saved = json.loads(manifest.read_text())
        report = out.get(saved["kind"])
        if report is not None:
            report.read += saved["rows"]
            report.skipped.update(saved["skipped"])
    return out


def disk_bytes(folder: str | Path) -> int:
    return sum(f.stat().st_size for f in Path(folder).rglob("*") if f.is_file())


def atomic_write_text(path: Path, text: str) -> None:
    part = path.with_name(path.name + ".part")
    part.write_text(text)
    os.replace(part, path)
