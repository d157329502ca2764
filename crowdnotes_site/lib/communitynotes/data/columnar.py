"""The public download in a columnar form kept beside the TSVs, and scorer input read from it.

Form: one Parquet file per TSV (pyarrow), in `<folder>/columnar/`, each with a JSON manifest
(the source's size and mtime, rows read, rows skipped by reason with examples, the header's
unknown columns). A rerun converts only the TSVs whose size or mtime changed. Every file is
written to a temporary name and renamed, the manifest last, so a killed conversion leaves no
half-written output and resumes at the first shard without a current manifest.

Ratings are parsed by the one ratings parser (ratings.py: the rows, values and skip reasons of
score_communitynotes and of the database import) and stored as the loader reads them
(scorer_input.RATING_SCHEMA), a row group per parsed block: noteId int64, the rater as a
dictionary column (int32 codes, the block's distinct ids once), createdAtMillis int64, the value
as int8 halves (0, 1, 2), the tag flags and the uint16 not-helpful tag bits.

Loading for scoring (`load`) goes through the scorer's one loader (scorer_input.load_columns),
its arrays preallocated from the row counts in the Parquet footers.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from crowdnotes_site.lib.communitynotes import scoring
from crowdnotes_site.lib.communitynotes.data import files as download_file
from crowdnotes_site.lib.communitynotes.data import ratings as cnr
from crowdnotes_site.lib.communitynotes.data import scorer_input as stsv
from crowdnotes_site.lib.communitynotes.data import tsv as cio

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


RATING_SCHEMA = stsv.RATING_SCHEMA


def _report_of(report: cio.ReadReport) -> tuple[dict[str, int], list[str]]:
    return dict(report.skipped), [f"{s.path}:{s.line}: {s.reason}" for s in report.examples]


def _convert_ratings(source: Path, tmp: Path, progress: Callable[[int], None]) -> tuple[int, cio.ReadReport]:
    report = cio.ReadReport()
    rows = 0
    with pq.ParquetWriter(tmp, RATING_SCHEMA, compression="zstd") as writer:
        for blk in cnr.iter_rating_blocks(source, report):
            writer.write_table(pa.Table.from_batches([stsv.rating_batch(blk)]))  # a row group per block
            rows += len(blk)
            progress(rows)
    return rows, report


def _convert_notes(source: Path, tmp: Path) -> tuple[int, cio.ReadReport]:
    report = cio.ReadReport()
    table = stsv.notes_table(report.rows(cio.read_notes(source)))
    pq.write_table(table, tmp, compression="zstd")
    return table.num_rows, report


def _convert_status(source: Path, tmp: Path) -> tuple[int, cio.ReadReport]:
    report = cio.ReadReport()
    table = stsv.status_table(report.rows(cio.read_status_history(source)))
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


def _ratings_batches(paths: list[Path]) -> Iterator[pa.RecordBatch]:
    for path in paths:
        pf = pq.ParquetFile(path, read_dictionary=["rater"])
        for i in range(pf.num_row_groups):
            yield from pf.read_row_group(i).to_batches()


def load(columnar_dir: str | Path) -> stsv.LoadedData:
    """The scorer's input from the columnar form (`stsv.load_columns`, the loader of
    score_communitynotes too), its arrays preallocated from the Parquet footers' row counts."""
    stsv.use_returning_memory_pool()
    d = Path(columnar_dir)
    notes = (pq.read_table(p, columns=list(stsv.NOTE_COLUMNS)) for p in sorted(d.glob("notes-*.parquet")))
    status = (
        pq.read_table(p, columns=list(stsv.STATUS_COLUMNS)) for p in sorted(d.glob("noteStatusHistory-*.parquet"))
    )
    rating_paths = sorted(d.glob("ratings-*.parquet"))
    total = sum(pq.ParquetFile(p).metadata.num_rows for p in rating_paths)
    reports = _manifest_reports(d)
    data = stsv.load_columns(
        notes, status, _ratings_batches(rating_paths), total,
        reports=(reports["notes"], reports["ratings"], reports["status"]),
    )  # fmt: skip
    stsv.give_back_memory()  # what the load freed: the scorer's arrays come next
    return data


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
