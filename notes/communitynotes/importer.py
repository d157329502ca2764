"""Import public Community Notes TSVs into the database: streaming, batched, idempotent.

Posts are keyed by the tweet id (Post.external_id), participants by their public id, notes by
noteId and ratings by (note, rater), so a re-import updates rows and never duplicates them.
"""

from __future__ import annotations

import dataclasses
import io
import json
import re
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from itertools import islice
from pathlib import Path
from typing import BinaryIO, TypeVar

import numpy as np
from django.db import IntegrityError, connection, transaction
from django.db.backends.utils import CursorWrapper
from django.db.models import Count, OuterRef, Subquery, UniqueConstraint
from django.db.models.functions import Coalesce

from crowdnotes_site.lib.communitynotes.data import files as download_file
from crowdnotes_site.lib.communitynotes.data import pgcopy
from crowdnotes_site.lib.communitynotes.data import tsv as cio
from crowdnotes_site.lib.communitynotes.research.delays import note_time_ms
from crowdnotes_site.lib.text_rules import IMPORTED_NOTE_MAX_CHARS, cap_text, find_urls
from crowdnotes_site.lib.xids import snowflake_time
from notes.models import ImportCheckpoint, Note, NoteStatus, NoteStatusChange, Participant, Post, Rating
from notes.services import post_text_hash

T = TypeVar("T")
BATCH = 5000


@dataclass
class ImportReport:
    counts: Counter[str] = field(default_factory=Counter)
    skipped: Counter[str] = field(default_factory=Counter)
    cut: Counter[str] = field(default_factory=Counter)  # rows stored with a text cut to its cap

    def lines(self) -> list[str]:
        out = [f"{k}: {v}" for k, v in sorted(self.counts.items())]
        out += [f"skipped ({reason}): {n}" for reason, n in sorted(self.skipped.items())]
        out += [f"cut ({reason}): {n}" for reason, n in sorted(self.cut.items())]
        return out


# NUL and the other C0 control characters (and DEL), tab, newline and carriage return excepted.
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_CONTROL_BYTES = bytes([*range(0x00, 0x09), 0x0B, 0x0C, *range(0x0E, 0x20), 0x7F])


def clean_text(text: str) -> str:
    """`text` without NUL and the other control characters (tab, newline and carriage return kept).
    PostgreSQL refuses NUL in a text field, and none of them belongs in a note or an id. The one
    place the importers sanitize imported text: a free text (a note's summary) is stored cleaned and
    counted; a row whose id or code field changes when cleaned is skipped and counted."""
    return _CONTROL.sub("", text)


def _clean_row(row: T, free_text: tuple[str, ...], report: ImportReport, kind: str) -> T | None:
    """`row` (a reader's dataclass) with its `free_text` fields cleaned (counted as cut), or None
    (counted as skipped) when any other text field holds a control character."""
    changes: dict[str, str] = {}
    for f in dataclasses.fields(row):  # type: ignore[arg-type]
        value = getattr(row, f.name)
        if not isinstance(value, str) or (cleaned := clean_text(value)) == value:
            continue
        if f.name not in free_text:
            report.skipped[f"{kind}: control character (e.g. NUL) in {f.name}"] += 1
            return None
        changes[f.name] = cleaned
    if changes:
        report.cut[f"{kind}: control characters (e.g. NUL) removed from the text"] += 1
        return dataclasses.replace(row, **changes)  # type: ignore[type-var]
    return row


def _clean_rows(
    rows: Iterable[T], free_text: tuple[str, ...], report: ImportReport, kind: str, *, block: str | None = None
) -> Iterator[T]:
    """`_clean_row` of each row. Given the `block` of text the rows were read from, a block without
    any control character is passed through unchecked (no row of it can hold one)."""
    if block is not None and _CONTROL.search(block) is None:
        yield from rows
        return
    for row in rows:
        kept = _clean_row(row, free_text, report, kind)
        if kept is not None:
            yield kept


def _batches(items: Iterable[T], size: int = BATCH) -> Iterator[list[T]]:
    it = iter(items)
    while batch := list(islice(it, size)):
        yield batch


def _dt(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=UTC)


def _participants(ids: set[str]) -> dict[str, int]:
    # Created in sorted order, not the set's (which changes with each process's string hashing): the
    # same file gives the same primary keys, so what reads them in key order (the jury) is repeatable.
    Participant.objects.bulk_create([Participant(external_id=i) for i in sorted(ids)], ignore_conflicts=True)
    return dict(Participant.objects.filter(external_id__in=ids).values_list("external_id", "pk"))


def _posts(tweet_ids: set[str]) -> dict[str, int]:
    existing = dict(Post.objects.filter(external_id__in=tweet_ids).values_list("external_id", "pk"))
    missing = tweet_ids - set(existing)
    new = []
    for tweet_id in sorted(missing):  # sorted: the same keys in every process (see _participants)
        text = f"Post {tweet_id} (imported from the public Community Notes data; text not included)"
        new.append(
            Post(
                external_id=tweet_id, text=text, text_hash=post_text_hash(text), text_available=False,
                source_url=f"https://x.com/i/status/{tweet_id}",
                posted_at=snowflake_time(tweet_id) if tweet_id.isdigit() and int(tweet_id) > 0 else None,
            )
        )  # fmt: skip
    Post.objects.bulk_create(new)
    existing.update({p.external_id: p.pk for p in new})
    return existing


def _imported_notes(note_ids: Iterable[int]) -> dict[str | None, int]:
    """external id -> pk of the notes among these noteIds that are already imported."""
    ids = {str(i) for i in note_ids}
    return dict(Note.objects.filter(external_id__in=ids).values_list("external_id", "pk"))


def import_notes(path: str | Path, report: ImportReport) -> None:
    read: cio.ReadReport = cio.ReadReport()
    for batch in _batches(_clean_rows(read.rows(cio.read_notes(path)), ("summary",), report, "notes")):
        with transaction.atomic():
            people = _participants({n.author_id for n in batch})
            posts = _posts({n.tweet_id or "0" for n in batch})
            latest = {n.note_id: n for n in batch}  # a note listed twice keeps its last row
            summaries = {note_id: cap_text(n.summary, IMPORTED_NOTE_MAX_CHARS) for note_id, n in latest.items()}
            notes = [
                Note(
                    external_id=str(n.note_id), post_id=posts[n.tweet_id or "0"], author_id=people[n.author_id],
                    text=summaries[n.note_id][0], classification=n.classification,
                    created_at=_dt(note_time_ms(n.note_id, n.created_at_ms)),
                    evidence_urls=find_urls(summaries[n.note_id][0], web_only=True)[:10],
                )
                for n in latest.values()
            ]  # fmt: skip
            report.cut[f"notes: summary over {IMPORTED_NOTE_MAX_CHARS:,} characters"] += sum(
                cut for _, cut in summaries.values()
            )
            Note.objects.bulk_create(
                notes,
                update_conflicts=True,
                unique_fields=["external_id"],
                update_fields=["post", "author", "text", "classification", "created_at", "evidence_urls"],
            )
        report.counts["notes upserted"] += len(notes)
    report.skipped.update({f"notes: {k}": v for k, v in read.skipped.items()})


def import_ratings(path: str | Path, report: ImportReport) -> None:
    read: cio.ReadReport = cio.ReadReport()
    touched: set[int] = set()
    for batch in _batches(_clean_rows(read.rows(cio.read_ratings(path)), (), report, "ratings")):
        with transaction.atomic():
            notes = _imported_notes(r.note_id for r in batch)
            known = [r for r in batch if str(r.note_id) in notes]
            report.skipped["ratings: note not imported"] += len(batch) - len(known)
            people = _participants({r.rater_id for r in known})
            # One rating per (note, rater): a later row replaces an earlier one.
            latest = {(notes[str(r.note_id)], people[r.rater_id]): r for r in known}
            report.counts["ratings replaced by a later row"] += len(known) - len(latest)
            Rating.objects.bulk_create(
                [
                    Rating(note_id=n, rater_id=u, level=r.level, tags=sorted(r.tags), created_at=_dt(r.created_at_ms))
                    for (n, u), r in latest.items()
                ],
                update_conflicts=True,
                unique_fields=["note", "rater"],
                update_fields=["level", "tags", "created_at"],
            )
            touched.update(n for n, _ in latest)
        report.counts["ratings upserted"] += len(latest)
    report.skipped.update({f"ratings: {k}": v for k, v in read.skipped.items()})
    for batch_ids in _batches(sorted(touched)):
        counts = Rating.objects.filter(note=OuterRef("pk")).values("note").annotate(n=Count("pk")).values("n")
        Note.objects.filter(pk__in=batch_ids).update(num_ratings=Coalesce(Subquery(counts), 0))


def import_status_history(path: str | Path, report: ImportReport) -> None:
    """Current status per note, and its changes (first non-NMR, latest non-NMR, current) with times."""
    read: cio.ReadReport = cio.ReadReport()
    valid = set(NoteStatus.values)
    for batch in _batches(read.rows(cio.read_status_history(path))):
        with transaction.atomic():
            notes = _imported_notes(h.note_id for h in batch)
            known = [h for h in batch if str(h.note_id) in notes]
            report.skipped["status history: note not imported"] += len(batch) - len(known)
            existing = set(
                NoteStatusChange.objects.filter(note_id__in=notes.values()).values_list(
                    "note_id", "status", "changed_at"
                )
            )
            changes: list[NoteStatusChange] = []
            updates: list[Note] = []
            for h in known:
                pk = notes[str(h.note_id)]
                events = [
                    (h.first_non_nmr_ms, h.first_non_nmr_status),
                    (h.most_recent_non_nmr_ms, h.most_recent_non_nmr_status),
                    (h.current_status_ms, h.current_status),
                ]
                previous = NoteStatus.NEEDS_MORE_RATINGS.value
                timed = [(ms, status) for ms, status in events if ms and status in valid]
                for ms, status in sorted(timed):
                    when = _dt(ms)
                    if status != previous and (pk, status, when) not in existing:
                        existing.add((pk, status, when))
                        changes.append(
                            NoteStatusChange(note_id=pk, previous_status=previous, status=status, changed_at=when)
                        )
                    previous = status
                if h.current_status in valid:
                    updates.append(Note(pk=pk, status=h.current_status))
            NoteStatusChange.objects.bulk_create(changes)
            Note.objects.bulk_update(updates, ["status"])
        report.counts["status changes added"] += len(changes)
        report.counts["note statuses set"] += len(updates)
    report.skipped.update({f"status history: {k}": v for k, v in read.skipped.items()})


# ---------------------------------------------------------------- bulk path (PostgreSQL COPY)


# Bytes per second of each kind of file before this run has measured its own (this 2-core
# machine, the full shape): notes ~1.7 MB/s, rating chunks ~35 MB/s, status history ~3.5 MB/s.
PRIOR_BYTES_PER_S = {"notes": 1.5e6, "ratings": 3.0e7, "status": 3.5e6}


@dataclass
class Pace:
    """Progress of a whole-folder import against the bytes of its files by kind (notes, ratings,
    status): what is done (by this run and, for a resumed import, by earlier ones), and an
    estimate of the time left from each kind's pace in this run (PRIOR_BYTES_PER_S until the
    kind has run: a notes byte costs ~20 rating bytes)."""

    total: dict[str, int]
    done: dict[str, int] = field(default_factory=dict)
    spent: dict[str, tuple[int, float]] = field(default_factory=dict)  # bytes, seconds in this run
    last: float = field(default_factory=time.perf_counter)

    def skip(self, kind: str, n_bytes: int) -> None:
        """Count `n_bytes` done by an earlier run."""
        self.done[kind] = self.done.get(kind, 0) + n_bytes
        self.last = time.perf_counter()

    def advance(self, kind: str, n_bytes: int) -> str:
        """Count `n_bytes` more done by this run; the line that says where the folder stands."""
        now = time.perf_counter()
        b, s = self.spent.get(kind, (0, 0.0))
        self.spent[kind] = (b + n_bytes, s + now - self.last)
        self.last = now
        self.done[kind] = self.done.get(kind, 0) + n_bytes
        left = sum(max(total - self.done.get(k, 0), 0) / self._rate(k) for k, total in self.total.items())
        share = 100 * sum(self.done.values()) / max(sum(self.total.values()), 1)
        return f"folder {share:.1f}% of its bytes done, about {left:,.0f} s left (key and index builds not included)"

    def _rate(self, kind: str) -> float:
        b, s = self.spent.get(kind, (0, 0.0))
        return b / s if b and s > 0 else PRIOR_BYTES_PER_S.get(kind, PRIOR_BYTES_PER_S["ratings"])


COPY_CHUNK_LINES = 250_000


def _checkpoint_key(file: Path, kind: str = "ratings") -> str:
    st = file.stat()
    return f"{kind}:{file.resolve()}:{st.st_size}:{st.st_mtime_ns}"[:512]


def _ident(name: str) -> str:
    """A header name as a quoted SQL identifier (header text is data: quote every character)."""
    return '"' + name.replace('"', '""') + '"'


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def import_ratings_copy(
    path: str | Path | list[Path],
    report: ImportReport,
    *,
    chunk_lines: int = COPY_CHUNK_LINES,
    progress: Callable[[str], None] | None = None,
    stop_after_chunks: int | None = None,
    exclusive: bool = True,
    pace: Pace | None = None,
    keep_finished: bool = False,
) -> None:
    """Ratings into PostgreSQL at bulk speed, memory flat in the file size.

    Each chunk of lines is parsed by pyarrow (`cio.parse_import_block`) and sent as typed rows
    by binary COPY; a chunk with any line the vectorised parse does not accept goes through the
    general path instead: text COPY into a staging table, parsed and checked in SQL (`_copy_chunk`).
    Both give the same rows and outcomes as `import_ratings` (a later row for the same note and
    rater wins; ratings of notes not imported are skipped and counted). Resumable: each chunk
    commits together with an ImportCheckpoint of the lines and bytes done, so a rerun after an
    interruption continues after the last committed chunk (it seeks to that byte). `path`: a
    file, a folder of TSVs, or a list of files (a download's shards). `stop_after_chunks`
    simulates an interruption (tests). `pace` (a whole-folder import): progress against the
    folder's bytes; `keep_finished`: a finished file's checkpoint stays, marked finished, so a
    rerun skips the file (`import_folder` deletes them when the folder is done).

    `exclusive` (the default) trades concurrency for speed: each chunk's transaction locks the
    ratings table (readers wait for the chunk) and writes the chunk without a foreign-key check
    per row (see `_drop_rating_foreign_keys`: dropping a key locks the notes and participants
    tables it references too, so every reader of notes waits while chunks follow each other); the checks are made in one pass at the end
    (VALIDATE). An exclusive import into an empty ratings table is a bulk load: the primary
    key, the unique (note, rater) constraint and the rater index are dropped and built once at the end (see
    `_defer_rating_indexes`). With `exclusive=False` the rows go through `INSERT … ON CONFLICT`
    with the usual per-row checks, and web requests keep reading and writing ratings.
    """
    say = progress or (lambda _line: None)
    chunks_done = 0
    touched = keep_finished  # a resumed folder import may have written rows in an earlier run
    # A load into an empty table counts its rows per note as it writes them (`_RatingCounts`).
    counts = _RatingCounts() if exclusive and not Rating.objects.exists() else None
    if exclusive:
        _defer_rating_indexes()
    else:
        _restore_rating_key_constraints(report)  # an interrupted bulk load left them out
    bulk = bool(_missing_rating_key_constraints())
    ids = _IdCache() if exclusive else None
    files = path if isinstance(path, list) else cio.tsv_files(path)
    for file in files:
        with download_file.open_data(file) as fh:
            header_line = fh.readline()
            header = header_line.decode("utf-8").rstrip("\r\n").lstrip("\ufeff").split("\t")
            if header == [""]:
                continue
            key = _checkpoint_key(file)
            checkpoint, _ = ImportCheckpoint.objects.get_or_create(key=key)
            if checkpoint.finished:
                say(f"{file.name}: imported by an earlier run of this import, skipped")
                if pace is not None:
                    pace.skip("ratings", download_file.data_size(file) - len(header_line))
                continue
            skip, offset = _resume(fh, checkpoint, len(header_line), file, say)
            if pace is not None:
                pace.skip("ratings", offset - len(header_line))
            done = skip
            started = time.perf_counter()
            for n_lines, block, parsed in _read_ahead(fh, header, chunk_lines):
                with transaction.atomic():
                    # Rare: the lines holding a control byte are skipped (the check: ~1 GB/s).
                    if len(block.translate(None, _CONTROL_BYTES)) != len(block):
                        _copy_chunk(header, _without_control(_text_lines(block), report), report,
                                    exclusive=exclusive, bulk=bulk)  # fmt: skip
                        counts = None  # written by SQL: counted by a pass over the table at the end
                    elif parsed is not None:
                        written = _typed_chunk(parsed, report, exclusive=exclusive, bulk=bulk, ids=ids)
                        if counts is not None:
                            counts.add(written)
                    else:
                        _copy_chunk(header, _text_lines(block), report, exclusive=exclusive, bulk=bulk)
                        counts = None
                    done += n_lines
                    offset += len(block)
                    ImportCheckpoint.objects.filter(key=key).update(lines_done=done, bytes_done=offset)
                touched = True
                rate = (done - skip) / max(time.perf_counter() - started, 1e-9)
                where = f"; {pace.advance('ratings', len(block))}" if pace is not None else ""
                say(
                    f"{file.name}: {done:,} lines, {report.counts['ratings upserted']:,} ratings, "
                    f"{rate:,.0f} lines/s{where}"
                )
                chunks_done += 1
                if stop_after_chunks is not None and chunks_done >= stop_after_chunks:
                    return
            _finish(key, keep_finished)
            say(f"{file.name}: done, {done - skip:,} lines in {time.perf_counter() - started:.1f} s")

    def rating_counts() -> str:
        if counts is not None and counts.complete:
            counts.write()
            return " (counted as the chunks were written)"
        if touched:
            _refresh_num_ratings()
            return " (a pass over the ratings table)"
        return " (nothing written)"

    with bulk_step_memory():
        steps: list[tuple[str, Callable[[], str | None]]] = [  # a step may say how it went
            ("primary key and unique (note, rater)", lambda: _restore_rating_key_constraints(report, counts)),
            ("foreign keys' validation", lambda: _validate_rating_foreign_keys(report, counts)),
            ("notes' rating counts", rating_counts),
            ("rater index", _restore_rating_read_indexes),
        ]
        for step, run in steps:
            started = time.perf_counter()
            how = run() or ""
            say(f"ratings, end step: {step}{how}: {time.perf_counter() - started:.1f} s")


class _RatingCounts:
    """Ratings per note of a bulk load into an empty table, counted from the rows as each chunk
    writes them, so that no pass over the whole table is needed for `Note.num_ratings` at the
    end (at the full download that pass took 196 s, a seventh of the ratings phase). Rows the
    end steps delete are taken off (`remove`); `complete` turns False where the count cannot
    follow (rows deleted without their notes known), and the import counts by SQL instead."""

    def __init__(self) -> None:
        self.per_note = np.zeros(0, dtype=np.int64)  # indexed by note pk
        self.complete = True

    def add(self, note_pks: np.ndarray) -> None:
        if len(note_pks) and int(note_pks.max()) >= len(self.per_note):
            grown = np.zeros(max(int(note_pks.max()) + 1, 2 * len(self.per_note)), dtype=np.int64)
            grown[: len(self.per_note)] = self.per_note
            self.per_note = grown
        np.add.at(self.per_note, note_pks, 1)

    def remove(self, note_pks: np.ndarray) -> None:
        np.subtract.at(self.per_note, note_pks, 1)

    def write(self) -> None:
        """num_ratings of every counted note, by one binary COPY and one UPDATE of those that differ."""
        pks = np.flatnonzero(self.per_note)
        rows = pgcopy.empty_rows((("id", ">i8"), ("cnt", ">i4")), len(pks))
        rows["id"], rows["cnt"] = pks, self.per_note[pks]
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("CREATE TEMP TABLE cn_counts (id bigint, cnt integer) ON COMMIT DROP")
            with cursor.copy("COPY cn_counts FROM STDIN (FORMAT binary)") as copy:  # type: ignore[attr-defined]
                copy.write(pgcopy.HEADER)
                copy.write(rows.tobytes())
                copy.write(pgcopy.TRAILER)
            cursor.execute(
                "UPDATE notes_note n SET num_ratings = c.cnt FROM cn_counts c "
                "WHERE n.id = c.id AND n.num_ratings <> c.cnt"
            )
            cursor.execute("DROP TABLE cn_counts")


# What the end steps of a bulk load may use per sort or hash (PostgreSQL's defaults, 64 MB and
# 4 MB, are for many small queries at once): an index build sorts every rating; a foreign key's
# validation hashes every note or participant (PostgreSQL runs it with maintenance_work_mem);
# the rating counts group every rating by note. At the full download (2.5 M notes, 191 M
# ratings) the defaults spill those hashes and sorts to disk in many passes.
BULK_STEP_MEMORY = "1GB"


@contextmanager
def bulk_step_memory() -> Iterator[None]:
    """This connection's sort and hash memory raised to BULK_STEP_MEMORY while the block runs."""
    with connection.cursor() as cursor:
        cursor.execute(f"SET maintenance_work_mem = '{BULK_STEP_MEMORY}'")
        cursor.execute(f"SET work_mem = '{BULK_STEP_MEMORY}'")
        try:
            yield
        finally:
            if connection.is_usable():  # not in a transaction the block's error aborted
                cursor.execute("RESET maintenance_work_mem")
                cursor.execute("RESET work_mem")


def _resume(
    fh: BinaryIO, checkpoint: ImportCheckpoint, header_bytes: int, file: Path, say: Callable[[str], None]
) -> tuple[int, int]:
    """Position `fh` (just past its header) after the lines a checkpoint counts: at its byte
    offset (a zip's member cannot seek: its bytes up to there are read and discarded), or (a
    checkpoint written before offsets were kept) by skipping its lines. Says where it resumes;
    returns (lines done, byte offset)."""
    if checkpoint.bytes_done:
        how = "" if fh.seekable() else " (a zip cannot seek: its bytes before that are read and discarded)"
        say(f"{file.name}: resuming after {checkpoint.lines_done:,} lines (byte {checkpoint.bytes_done:,}){how}")
        started = time.perf_counter()
        download_file.skip_to(fh, header_bytes, checkpoint.bytes_done)
        if how:
            say(f"{file.name}: skipped to byte {checkpoint.bytes_done:,} in {time.perf_counter() - started:.1f} s")
        return checkpoint.lines_done, checkpoint.bytes_done
    offset = header_bytes
    for line in islice(fh, checkpoint.lines_done):
        offset += len(line)
    if checkpoint.lines_done:
        say(f"{file.name}: resuming after {checkpoint.lines_done:,} lines (byte {offset:,})")
    return checkpoint.lines_done, offset


def _finish(key: str, keep: bool) -> None:
    if keep:
        ImportCheckpoint.objects.filter(key=key).update(finished=True)
    else:
        ImportCheckpoint.objects.filter(key=key).delete()


def _read_ahead(
    fh: BinaryIO, header: list[str], chunk_lines: int
) -> Iterator[tuple[int, bytes, cio.ImportBlock | None]]:
    """(lines, block, parse or None) per chunk of the rest of `fh`. The next chunk is read
    and parsed in a thread while the caller writes this one: pyarrow, numpy and the database driver
    release the GIL, so the parse runs on the second core."""

    blocks = download_file.line_blocks(fh, chunk_lines)

    def read() -> tuple[int, bytes, cio.ImportBlock | None]:
        n_lines, block = next(blocks, (0, b""))
        return n_lines, block, cio.parse_import_block(block, header) if n_lines else None

    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="import-parse") as pool:
        ahead = pool.submit(read)
        while True:
            n_lines, block, parsed = ahead.result()
            if not n_lines:
                return
            ahead = pool.submit(read)
            yield n_lines, block, parsed


def _without_control(lines: list[str], report: ImportReport) -> list[str]:
    """The ratings lines without a control character (clean_text), the others skipped and counted."""
    kept = [ln for ln in lines if clean_text(ln) == ln]
    report.skipped["ratings: control character (e.g. NUL) in the line"] += len(lines) - len(kept)
    return kept


def _text_lines(block: bytes) -> list[str]:
    """A block's lines as text, split as a file opened with newline="" splits them (a lone CR
    ends a line too)."""
    return io.StringIO(block.decode("utf-8"), newline="").readlines()


# The columns of cn_typed, sent as binary COPY rows (crowdnotes_site/lib/communitynotes/data/pgcopy.py).
_TYPED_COLUMNS = (("note", ">i8"), ("rater", ">i8"), ("level", ">i2"), ("tagset", ">i4"), ("ms", ">i8"))


@dataclass
class _IdCache:
    """The primary keys of the notes (by noteId; 0: not imported) and participants (by public
    id) that one exclusive import has looked up, so that each is read once, not once per chunk.
    Each map is emptied when it would pass ID_CACHE_LIMIT entries (~115 bytes per note, ~175
    per 64-hex rater id), so memory stays bounded whatever the file's size. A note or participant deleted
    while the import runs can leave rows pointing at it; `_validate_rating_foreign_keys` removes
    them, as the deletion's cascade would have."""

    notes: dict[int, int] = field(default_factory=dict)
    raters: dict[str, int] = field(default_factory=dict)


ID_CACHE_LIMIT = 2_000_000  # entries per map of _IdCache


def _to_look_up(known: dict[T, int], keys: list[T]) -> list[T]:
    """The keys not in `known`. Past ID_CACHE_LIMIT entries `known` is emptied first (bounded
    memory) and every key is looked up again."""
    missing = [k for k in keys if k not in known]
    if len(known) + len(missing) > ID_CACHE_LIMIT:
        known.clear()
        return keys
    return missing


def _note_pks(cursor: CursorWrapper, note_ids: list[int], ids: _IdCache | None) -> np.ndarray:
    """The pk of each noteId (0 for a note not imported), read from the database for those not
    in `ids` yet."""
    known = ids.notes if ids is not None else {}
    if missing := _to_look_up(known, note_ids):
        cursor.execute(
            "SELECT external_id, id FROM notes_note WHERE external_id = ANY(%s::text[])", [[str(x) for x in missing]]
        )
        found = dict(cursor.fetchall())
        known.update((x, found.get(str(x), 0)) for x in missing)
    return np.fromiter(map(known.__getitem__, note_ids), dtype=np.int64, count=len(note_ids))


def _rater_pks(cursor: CursorWrapper, raters: list[str], ids: _IdCache | None) -> np.ndarray:
    """The participant pk of each public rater id, creating the participants not there yet."""
    known = ids.raters if ids is not None else {}

    def read(keys: list[str]) -> None:
        cursor.execute("SELECT external_id, id FROM notes_participant WHERE external_id = ANY(%s::text[])", [keys])
        known.update(cursor.fetchall())

    if missing := _to_look_up(known, raters):
        read(missing)  # read first, then insert the rest: a conflicting INSERT costs more than a read
        if new := [k for k in missing if k not in known]:
            cursor.execute(
                "INSERT INTO notes_participant (external_id) SELECT unnest(%s::text[]) "
                "ON CONFLICT (external_id) DO NOTHING RETURNING external_id, id",
                [new],
            )
            known.update(cursor.fetchall())
            if raced := [k for k in new if k not in known]:  # created meanwhile by another session
                read(raced)
    return np.fromiter(map(known.__getitem__, raters), dtype=np.int64, count=len(raters))


def _typed_chunk(
    rows: cio.ImportBlock, report: ImportReport, *, exclusive: bool, bulk: bool, ids: _IdCache | None = None
) -> np.ndarray:
    """One parsed chunk: notes and participants are looked up by their distinct ids (through
    `ids` across chunks), "a later row wins" is applied to the arrays, and the rows reach the
    database typed. Returns the note pk of each row written."""
    report.skipped["ratings: wrong number of fields"] += rows.wrong_fields
    report.skipped["ratings: no helpfulness answer"] += rows.no_answer
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL synchronous_commit = off")  # see _copy_chunk
        foreign_keys = _drop_rating_foreign_keys(cursor) if exclusive else []  # before reading notes
        ext, pos = np.unique(rows.note_id, return_inverse=True)
        note_pk = _note_pks(cursor, ext.tolist(), ids)[pos]
        known = np.flatnonzero(note_pk != 0)
        # The last row of each (note, rater) pair wins: first occurrence in reversed order.
        pair = pos[known].astype(np.int64) * max(len(rows.rater_keys), 1) + rows.rater_code[known]
        _, from_end = np.unique(pair[::-1], return_index=True)
        keep = known[len(known) - 1 - from_end]
        codes = np.unique(rows.rater_code[keep])
        rater_pk = np.zeros(len(rows.rater_keys), dtype=np.int64)
        rater_pk[codes] = _rater_pks(cursor, [rows.rater_keys[c] for c in codes.tolist()], ids)
        # Tags: each row points into the chunk's distinct tag lists, sent once as one JSON array.
        masks, tagset = np.unique(rows.tags[keep], return_inverse=True)
        tag_lists = [[t for k, t in enumerate(rows.tag_names) if m >> k & 1] for m in masks.tolist()]
        if bulk:
            changed = _append_ratings(
                cursor, note_pk[keep], rater_pk[rows.rater_code[keep]], rows.level[keep], tagset.ravel(), tag_lists,
                rows.created_at_ms[keep],
            )  # fmt: skip
            if foreign_keys:
                _add_rating_foreign_keys(cursor, foreign_keys)
            report.skipped["ratings: note not imported"] += len(rows.note_id) - len(known)
            report.counts["ratings replaced by a later row"] += len(known) - len(keep)
            report.counts["ratings upserted"] += len(keep)
            report.counts["ratings inserted or changed"] += changed
            return note_pk[keep]
        out = pgcopy.empty_rows(_TYPED_COLUMNS, len(keep))
        out["note"] = note_pk[keep]
        out["rater"] = rater_pk[rows.rater_code[keep]]
        out["level"] = rows.level[keep]
        out["tagset"] = tagset.ravel()
        out["ms"] = rows.created_at_ms[keep]
        cursor.execute(
            "CREATE TEMP TABLE cn_typed (note_id bigint, rater_id bigint, level smallint, tagset integer, ms bigint) "
            "ON COMMIT DROP"
        )
        with cursor.copy("COPY cn_typed FROM STDIN (FORMAT binary)") as copy:  # type: ignore[attr-defined]
            copy.write(pgcopy.HEADER)
            copy.write(out.tobytes())
            copy.write(pgcopy.TRAILER)
        levels = " ".join(f"WHEN {code} THEN {_literal(level)}" for code, level in enumerate(cio.IMPORT_LEVELS))
        tags = f"{_literal(json.dumps(tag_lists))}::jsonb -> t.tagset"
        source = f"""(SELECT t.note_id, t.rater_id, CASE t.level {levels} END AS level, {tags} AS tags,
                             to_timestamp(0) + t.ms * interval '1 millisecond' AS created_at
                      FROM cn_typed t)"""  # noqa: S608
        changed = _write_rows(cursor, source, exclusive=exclusive, bulk=bulk)
        if foreign_keys:
            _add_rating_foreign_keys(cursor, foreign_keys)
        cursor.execute("DROP TABLE cn_typed")
    report.skipped["ratings: note not imported"] += len(rows.note_id) - len(known)
    report.counts["ratings replaced by a later row"] += len(known) - len(keep)
    report.counts["ratings upserted"] += len(keep)
    report.counts["ratings inserted or changed"] += changed
    return note_pk[keep]


_PG_EPOCH_MS = 946_684_800_000  # 2000-01-01 UTC: binary timestamps count microseconds from it


def _append_ratings(
    cursor: CursorWrapper,
    note: np.ndarray,
    rater: np.ndarray,
    level: np.ndarray,
    tagset: np.ndarray,
    tag_lists: list[list[str]],
    created_ms: np.ndarray,
) -> int:
    """A bulk load's chunk (one row per pair, see `_write_rows`) straight into notes_rating by
    one binary COPY, without a staging table: rows are laid out by numpy, one group per (level,
    tag list) so that every row of a group has the same width (the level's text and the tags'
    JSONB are constants of the group). The order of rows inside a chunk does not matter (its
    pairs are distinct); chunks still append in file order, so the later of a pair repeated in
    a later chunk keeps the higher id (`_restore_rating_key_constraints`)."""
    combo = level.astype(np.int64) * max(len(tag_lists), 1) + tagset
    now_us = int((time.time() * 1000 - _PG_EPOCH_MS) * 1000)
    columns = "note_id, rater_id, level, tags, created_at, updated_at"
    with cursor.copy(f"COPY notes_rating ({columns}) FROM STDIN (FORMAT binary)") as copy:  # type: ignore[attr-defined]
        copy.write(pgcopy.HEADER)
        order = np.argsort(combo, kind="stable")
        bounds = np.flatnonzero(np.diff(combo[order])) + 1
        for group in np.split(order, bounds):
            if not len(group):
                continue
            code = int(combo[group[0]])
            word = cio.IMPORT_LEVELS[code // max(len(tag_lists), 1)].encode()
            tags = b"\x01" + json.dumps(tag_lists[code % max(len(tag_lists), 1)]).encode()
            rows = np.zeros(len(group), dtype=_bulk_row(len(word), len(tags)))
            rows["fields"] = 6
            for name, width in (("note", 8), ("rater", 8), ("level", len(word)), ("tags", len(tags)),
                                ("created", 8), ("updated", 8)):  # fmt: skip
                rows[f"{name}_len"] = width
            rows["note"] = note[group]
            rows["rater"] = rater[group]
            rows["level"] = word
            rows["tags"] = tags
            rows["created"] = (created_ms[group] - _PG_EPOCH_MS) * 1000
            rows["updated"] = now_us
            copy.write(rows.tobytes())
        copy.write(pgcopy.TRAILER)
    return len(note)


def _bulk_row(level_bytes: int, tags_bytes: int) -> np.dtype:
    """One binary COPY row of _append_ratings' columns (big-endian, no NULL)."""
    return np.dtype(
        [("fields", ">i2"), ("note_len", ">i4"), ("note", ">i8"), ("rater_len", ">i4"), ("rater", ">i8"),
         ("level_len", ">i4"), ("level", f"S{level_bytes}"), ("tags_len", ">i4"), ("tags", f"S{tags_bytes}"),
         ("created_len", ">i4"), ("created", ">i8"), ("updated_len", ">i4"), ("updated", ">i8")]
    )  # fmt: skip


def _copy_chunk(header: list[str], lines: list[str], report: ImportReport, *, exclusive: bool, bulk: bool) -> None:
    """One chunk through the general path: text COPY into a staging table, parsed in SQL."""
    width = len(header)
    good = [ln if ln.endswith("\n") else ln + "\n" for ln in lines if ln.count("\t") == width - 1]
    report.skipped["ratings: wrong number of fields"] += sum(1 for ln in lines if ln.strip()) - len(good)
    lines = good
    cols = {h.strip(): _ident(h) for h in header}
    staged = ", ".join(f"{_ident(h)} text" for h in header)

    def col(*names: str) -> str:
        for name in names:
            if name in cols:
                return f"NULLIF(s.{cols[name]}, '')"
        return "NULL::text"

    ones = "('1', '1.0', 'True', 'true')"
    level = col("helpfulnessLevel")
    level_sql = (
        f"CASE WHEN trim({level}) IN ('HELPFUL', 'SOMEWHAT_HELPFUL', 'NOT_HELPFUL') THEN trim({level}) "
        f"WHEN trim({col('notHelpful')}) IN {ones} THEN 'NOT_HELPFUL' "
        f"WHEN trim({col('helpful')}) IN {ones} THEN 'HELPFUL' END"
    )
    tag_names = sorted(h.strip() for h in header if cio._is_tag(h.strip()))
    tags_sql = (
        "to_jsonb(array_remove(ARRAY["
        + ", ".join(f"CASE WHEN s.{cols[t]} IN ('1', '1.0') THEN {_literal(t)} END" for t in tag_names)
        + "]::text[], NULL))"
        if tag_names
        else "'[]'::jsonb"
    )
    note_sql = col("noteId")
    rater_sql = col("raterParticipantId", "participantId")
    ms_sql = col("createdAtMillis")
    with connection.cursor() as cursor:
        # A lost commit after a crash loses its checkpoint with it (same transaction), so the
        # resumed import redoes that chunk: no need to wait for the WAL flush of every chunk.
        cursor.execute("SET LOCAL synchronous_commit = off")
        cursor.execute(f"CREATE TEMP TABLE IF NOT EXISTS cn_stage (seq bigserial, {staged}) ON COMMIT DROP")
        names = ", ".join(_ident(h) for h in header)
        # CSV with tabs and a quote character that never occurs: fields arrive verbatim (text
        # format would read backslashes as escapes); empty fields arrive as NULL.
        copy_sql = f"COPY cn_stage ({names}) FROM STDIN (FORMAT csv, DELIMITER E'\\t', QUOTE E'\\x01')"
        with cursor.copy(copy_sql) as copy:  # type: ignore[attr-defined]
            for start in range(0, len(lines), 20_000):
                copy.write("".join(lines[start : start + 20_000]))
        # Parse in SQL; the reasons and their order are the readers' (communitynotes_io). Header
        # names enter only as quoted identifiers / literals (_ident, _literal).
        parsed = f"""
            CREATE TEMP TABLE cn_parsed ON COMMIT DROP AS
            SELECT seq,
                   CASE WHEN {note_sql} ~ '^[1-9][0-9]*$' THEN {note_sql}
                        WHEN {note_sql} ~ '^\\s*\\d+\\s*$' THEN trim({note_sql})::numeric::text END AS note_ext,
                   {rater_sql} AS rater,
                   CASE WHEN {ms_sql} ~ '^\\s*-?\\d+\\s*$' THEN trim({ms_sql})::bigint END AS ms,
                   {level_sql} AS level,
                   {tags_sql} AS tags
            FROM cn_stage s
            """  # noqa: S608
        cursor.execute(parsed)
        cursor.execute(
            """
            SELECT count(*) FILTER (WHERE note_ext IS NULL),
                   count(*) FILTER (WHERE note_ext IS NOT NULL AND rater IS NULL),
                   count(*) FILTER (WHERE note_ext IS NOT NULL AND rater IS NOT NULL AND ms IS NULL),
                   count(*) FILTER (WHERE note_ext IS NOT NULL AND rater IS NOT NULL AND ms IS NOT NULL
                                    AND level IS NULL),
                   count(*) FILTER (WHERE note_ext IS NOT NULL AND rater IS NOT NULL AND ms IS NOT NULL
                                    AND level IS NOT NULL)
            FROM cn_parsed
            """
        )
        bad_note, no_rater, bad_ms, no_answer, valid = cursor.fetchone()
        foreign_keys = _drop_rating_foreign_keys(cursor) if exclusive else []  # before reading notes
        cursor.execute(
            """
            CREATE TEMP TABLE cn_known ON COMMIT DROP AS
            SELECT p.seq, n.id AS note_id, p.rater, p.ms, p.level, p.tags
            FROM cn_parsed p JOIN notes_note n ON n.external_id = p.note_ext
            WHERE p.rater IS NOT NULL AND p.ms IS NOT NULL AND p.level IS NOT NULL
            """
        )
        known = cursor.rowcount
        cursor.execute(
            "INSERT INTO notes_participant (external_id) SELECT DISTINCT rater FROM cn_known "
            "ON CONFLICT (external_id) DO NOTHING"
        )
        # One row per (note, rater), the file's last one, with its participant id.
        cursor.execute(
            """
            CREATE TEMP TABLE cn_rows ON COMMIT DROP AS
            SELECT l.note_id, u.id AS rater_id, l.level, l.tags,
                   to_timestamp(0) + l.ms * interval '1 millisecond' AS created_at
            FROM (SELECT DISTINCT ON (note_id, rater COLLATE "C") note_id, rater, ms, level, tags
                  FROM cn_known ORDER BY note_id, rater COLLATE "C", seq DESC) l
            JOIN notes_participant u ON u.external_id = l.rater
            """
        )
        distinct = cursor.rowcount
        changed = _write_rows(cursor, "cn_rows", exclusive=exclusive, bulk=bulk)
        if foreign_keys:
            _add_rating_foreign_keys(cursor, foreign_keys)
        cursor.execute("DROP TABLE cn_stage, cn_parsed, cn_known, cn_rows")
    report.skipped["ratings: bad noteId"] += bad_note
    report.skipped["ratings: missing rater id"] += no_rater
    report.skipped["ratings: bad createdAtMillis"] += bad_ms
    report.skipped["ratings: no helpfulness answer"] += no_answer
    report.skipped["ratings: note not imported"] += valid - known
    report.counts["ratings replaced by a later row"] += known - distinct
    report.counts["ratings upserted"] += distinct
    report.counts["ratings inserted or changed"] += changed


def _write_rows(cursor: CursorWrapper, source: str, *, exclusive: bool, bulk: bool) -> int:
    """Write one chunk's rows (`source`: a table or subquery with note_id, rater_id, level, tags,
    created_at; one row per pair) into notes_rating; the number of rows inserted or changed.

    In a bulk load (the key constraints are out, see `_defer_rating_indexes`) every row is
    appended: a pair repeated in a later chunk is resolved when the constraint is rebuilt."""
    if bulk:
        columns = "note_id, rater_id, level, tags, created_at"
        cursor.execute(f"INSERT INTO notes_rating ({columns}, updated_at) SELECT {columns}, now() FROM {source} c")  # noqa: S608
        return int(cursor.rowcount)
    # What to write: new rows (rating_id NULL) and rows that changed. A re-import of the same
    # file finds nothing here, so it writes nothing and takes no row locks. One index probe
    # per chunk row: a hash or merge join would read the whole ratings table for every chunk.
    cursor.execute("SET LOCAL enable_hashjoin = off")
    cursor.execute("SET LOCAL enable_mergejoin = off")
    cursor.execute(
        f"""
        CREATE TEMP TABLE cn_write ON COMMIT DROP AS
        SELECT c.*, r.id AS rating_id
        FROM {source} c LEFT JOIN notes_rating r ON r.note_id = c.note_id AND r.rater_id = c.rater_id
        WHERE r.id IS NULL OR (r.level, r.tags, r.created_at) IS DISTINCT FROM (c.level, c.tags, c.created_at)
        """  # noqa: S608
    )
    cursor.execute(
        """
        UPDATE notes_rating r
           SET level = w.level, tags = w.tags, created_at = w.created_at, updated_at = now()
          FROM cn_write w
         WHERE r.id = w.rating_id AND w.rating_id IS NOT NULL
        """
    )
    changed = int(cursor.rowcount)
    cursor.execute("RESET enable_hashjoin")
    cursor.execute("RESET enable_mergejoin")
    insert = """
        INSERT INTO notes_rating (note_id, rater_id, level, tags, created_at, updated_at)
        SELECT note_id, rater_id, level, tags, created_at, now() FROM cn_write
        WHERE rating_id IS NULL ORDER BY note_id, rater_id
        """
    if exclusive:
        cursor.execute(insert)  # nobody else writes ratings while the table is locked
    else:
        cursor.execute(
            insert
            + """ON CONFLICT (note_id, rater_id) DO UPDATE
              SET level = EXCLUDED.level, tags = EXCLUDED.tags, created_at = EXCLUDED.created_at,
                  updated_at = EXCLUDED.updated_at"""
        )
    changed += cursor.rowcount
    cursor.execute("DROP TABLE cn_write")
    return changed


def _refresh_num_ratings() -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            """
            UPDATE notes_note n SET num_ratings = c.cnt
            FROM (SELECT note_id, count(*) AS cnt FROM notes_rating GROUP BY note_id) c
            WHERE n.id = c.note_id AND n.num_ratings <> c.cnt
            """
        )


def _drop_rating_foreign_keys(cursor: CursorWrapper) -> list[tuple[str, str]]:
    """Lock the ratings table and drop its foreign keys until the end of this transaction.

    Safe because nothing can break them meanwhile: the chunk's rows reference notes and
    participants read in this transaction, and the locks taken here keep every other session
    from writing ratings and from deleting notes or participants until the commit, when the
    keys are back (`_add_rating_foreign_keys`). Returns (name, definition) of each key."""
    cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")  # no pending trigger events block ALTER TABLE
    cursor.execute("LOCK TABLE notes_note, notes_participant IN SHARE ROW EXCLUSIVE MODE")
    cursor.execute("LOCK TABLE notes_rating IN ACCESS EXCLUSIVE MODE")
    cursor.execute(
        "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint "
        "WHERE conrelid = 'notes_rating'::regclass AND contype = 'f' ORDER BY conname"
    )
    keys = [(name, definition.removesuffix(" NOT VALID")) for name, definition in cursor.fetchall()]
    for name, _ in keys:
        cursor.execute(f"ALTER TABLE notes_rating DROP CONSTRAINT {_ident(name)}")
    return keys


def _add_rating_foreign_keys(cursor: CursorWrapper, keys: list[tuple[str, str]]) -> None:
    """Put the keys back, same names and definitions, NOT VALID: enforced for every later write;
    the rows written without checks are checked once by `_validate_rating_foreign_keys`."""
    for name, definition in keys:
        cursor.execute(f"ALTER TABLE notes_rating ADD CONSTRAINT {_ident(name)} {definition} NOT VALID")


def _validate_rating_foreign_keys(report: ImportReport | None = None, counts: _RatingCounts | None = None) -> None:
    """Check every row of the keys left NOT VALID by an exclusive import (also one interrupted
    earlier): one scan and join per key instead of one lookup per row.

    A note or participant deleted between two chunks leaves ratings the import wrote from its
    cached ids (`_IdCache`); they are removed, as the deletion would have removed them had they
    been written before it, and counted."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT conname FROM pg_constraint "
            "WHERE conrelid = 'notes_rating'::regclass AND contype = 'f' AND NOT convalidated ORDER BY conname"
        )
        for (name,) in cursor.fetchall():
            validate = f"ALTER TABLE notes_rating VALIDATE CONSTRAINT {_ident(name)}"
            try:
                with transaction.atomic():
                    cursor.execute(validate)
            except IntegrityError:
                cursor.execute(
                    """DELETE FROM notes_rating r
                        WHERE NOT EXISTS (SELECT FROM notes_note n WHERE n.id = r.note_id)
                           OR NOT EXISTS (SELECT FROM notes_participant p WHERE p.id = r.rater_id)"""
                )
                if report is not None:
                    report.skipped["ratings: note or rater deleted during the import"] += cursor.rowcount
                if counts is not None:
                    counts.complete = False  # their notes are not known here: counted by SQL
                cursor.execute(validate)


def _rating_read_indexes() -> list[tuple[str, str]]:
    """(name, CREATE INDEX statement) of the ratings indexes that only serve reads (the one on
    rater), as the migrations create them."""
    editor = connection.SchemaEditorClass(connection)
    statements = editor._field_indexes_sql(Rating, Rating._meta.get_field("rater"))  # type: ignore[attr-defined]
    return [(str(st.parts["name"]).strip('"'), str(st)) for st in statements]


RATING_PRIMARY_KEY = "notes_rating_pkey"  # PostgreSQL's name for it, as the first migration made it


def _rating_key_constraints() -> list[tuple[str, str]]:
    """(name, ADD CONSTRAINT statement) of the ratings table's primary key and unique (note,
    rater) constraint, as the migrations create them."""
    editor = connection.SchemaEditorClass(connection)
    (unique,) = (c for c in Rating._meta.constraints if isinstance(c, UniqueConstraint))
    return [
        (RATING_PRIMARY_KEY, f"ALTER TABLE notes_rating ADD CONSTRAINT {_ident(RATING_PRIMARY_KEY)} PRIMARY KEY (id)"),
        (unique.name, str(unique.create_sql(Rating, editor))),
    ]


def _missing_rating_key_constraints() -> list[tuple[str, str]]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT conname FROM pg_constraint WHERE conrelid = 'notes_rating'::regclass")
        present = {name for (name,) in cursor.fetchall()}
    return [(name, create) for name, create in _rating_key_constraints() if name not in present]


def _defer_rating_indexes() -> None:
    """On a first import (no ratings yet), drop the primary key, the unique (note, rater)
    constraint and the rater index: PostgreSQL builds an index in one sorted pass at the end far
    faster than it inserts every row into it, and without the unique index no chunk needs a
    probe for rows already there (PostgreSQL's advice for populating a table). Until the import
    ends the table may then hold a pair twice, when a later chunk repeats it;
    `_restore_rating_key_constraints` keeps the later row, as the import always does. An import
    interrupted meanwhile leaves them out: its rerun (exclusive or not) resumes and builds them
    at the end, and an online import builds them before it starts."""
    if Rating.objects.exists():
        return
    with connection.cursor() as cursor:
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")  # no pending trigger events block ALTER TABLE
        for name, _ in _rating_read_indexes():
            cursor.execute(f"DROP INDEX IF EXISTS {_ident(name)}")
        for name, _ in _rating_key_constraints():
            cursor.execute(f"ALTER TABLE notes_rating DROP CONSTRAINT IF EXISTS {_ident(name)}")


def _restore_rating_key_constraints(report: ImportReport, counts: _RatingCounts | None = None) -> None:
    """Build the key constraints left out by a bulk load. If a pair was written twice (a later
    chunk repeated it), the earlier rows go first: the later row wins, and a row equal to the
    one that replaced it does not count as written (as on the probing path); `counts` loses them."""
    missing = _missing_rating_key_constraints()
    if not missing:
        return
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
        cursor.execute("LOCK TABLE notes_rating IN ACCESS EXCLUSIVE MODE")
        for name, create in missing:
            try:
                with transaction.atomic():
                    cursor.execute(create)
                continue
            except IntegrityError:
                if name == RATING_PRIMARY_KEY:
                    raise  # ids come from the identity column: never repeated
            same, dropped = _drop_repeated_pairs(cursor)
            report.counts["ratings inserted or changed"] -= same
            if counts is not None:
                counts.remove(dropped)
            cursor.execute(create)


def _drop_repeated_pairs(cursor: CursorWrapper) -> tuple[int, np.ndarray]:
    """Delete all but the last row (highest id) of each (note, rater) pair; the number of
    deleted rows equal to the row that came after them, and the note of each deleted row."""
    cursor.execute(
        """
        CREATE TEMP TABLE cn_repeated ON COMMIT DROP AS
        SELECT id, lead(id) OVER w AS later,
               (level, tags, created_at) IS NOT DISTINCT FROM
               (lead(level) OVER w, lead(tags) OVER w, lead(created_at) OVER w) AS same
        FROM notes_rating
        WHERE (note_id, rater_id) IN
              (SELECT note_id, rater_id FROM notes_rating GROUP BY note_id, rater_id HAVING count(*) > 1)
        WINDOW w AS (PARTITION BY note_id, rater_id ORDER BY id)
        """
    )
    cursor.execute(
        "DELETE FROM notes_rating WHERE id IN (SELECT id FROM cn_repeated WHERE later IS NOT NULL) RETURNING note_id"
    )
    dropped = np.array([note for (note,) in cursor.fetchall()], dtype=np.int64)
    cursor.execute("SELECT count(*) FILTER (WHERE same) FROM cn_repeated")
    (same,) = cursor.fetchone()
    cursor.execute("DROP TABLE cn_repeated")
    return int(same), dropped


def _restore_rating_read_indexes() -> None:
    build_missing_indexes("notes_rating", _rating_read_indexes())


def build_missing_indexes(table: str, indexes: list[tuple[str, str]]) -> int:
    """Run the CREATE INDEX of each (name, statement) in `indexes` that `table` lacks (left out by
    a bulk load), each in one in-memory sort; the number built."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexname FROM pg_indexes WHERE tablename = %s", [table])
        present = {name for (name,) in cursor.fetchall()}
        missing = [create for name, create in indexes if name not in present]
        if missing:
            with transaction.atomic():
                cursor.execute(f"SET LOCAL maintenance_work_mem = '{BULK_STEP_MEMORY}'")  # see bulk_step_memory
                for create in missing:
                    cursor.execute(create)
    return len(missing)
