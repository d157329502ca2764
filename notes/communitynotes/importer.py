"""Import public Community Notes TSVs into the database: streaming, resumable, idempotent.

Posts are keyed by the tweet id (Post.external_id), participants by their public id, notes by
noteId and ratings by (note, rater), so a re-import updates rows and never duplicates them.

Here: the checkpointed file loop every file of an import goes through (`import_files`), and the
ratings phase (`import_ratings_copy` on PostgreSQL, `import_ratings` through the ORM): the one
ratings parser's blocks (crowdnotes_site/lib/communitynotes/data/ratings.py) written by a chunk
writer, then the end steps. The notes and the status history: folder.py, whose `import_folder`
is the one entry point.
"""

from __future__ import annotations

import dataclasses
import json
import re
import time
from collections import Counter
from collections.abc import Callable, Generator, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from itertools import islice
from pathlib import Path
from typing import Generic, TypeVar

import numpy as np
from django.db import IntegrityError, connection, transaction
from django.db.backends.utils import CursorWrapper
from django.db.models import Count, OuterRef, Subquery, UniqueConstraint
from django.db.models.functions import Coalesce

from crowdnotes_site.lib.communitynotes.data import files as download_file
from crowdnotes_site.lib.communitynotes.data import pgcopy
from crowdnotes_site.lib.communitynotes.data import ratings as cnr
from crowdnotes_site.lib.xids import snowflake_time
from notes.models import ImportCheckpoint, Note, Participant, Post, Rating
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
    found: dict[str, int] = {}
    for part in _batches(sorted(ids)):  # a bounded IN list (SQLite's variable limit)
        found.update(Participant.objects.filter(external_id__in=part).values_list("external_id", "pk"))
    return found


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
    found: dict[str | None, int] = {}
    for part in _batches(sorted({str(i) for i in note_ids})):  # a bounded IN list (SQLite's variable limit)
        found.update(Note.objects.filter(external_id__in=part).values_list("external_id", "pk"))
    return found


# ---------------------------------------------------------------- the checkpointed file loop


# Bytes per second of each kind of file before this run has measured its own (the full shape on
# a 2-core machine; a notes byte costs ~20 rating bytes).
PRIOR_BYTES_PER_S = {"notes": 1.5e6, "ratings": 3.0e7, "status": 3.5e6}


@dataclass
class Pace:
    """Progress of an import against the bytes of its files by kind (notes, ratings, status):
    what is done (by this run and, for a resumed import, by earlier ones), and an estimate of
    the time left from each kind's pace in this run (PRIOR_BYTES_PER_S until the kind has run)."""

    total: dict[str, int]
    done: dict[str, int] = field(default_factory=dict)
    spent: dict[str, tuple[int, float]] = field(default_factory=dict)  # bytes, seconds in this run
    last: float = field(default_factory=time.perf_counter)

    def skip(self, kind: str, n_bytes: int) -> None:
        """Count `n_bytes` done by an earlier run."""
        self.done[kind] = self.done.get(kind, 0) + n_bytes
        self.last = time.perf_counter()

    def advance(self, kind: str, n_bytes: int) -> str:
        """Count `n_bytes` more done by this run; the line that says where the import stands."""
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


def checkpoint_key(file: Path, kind: str) -> str:
    """The ImportCheckpoint key of `file` read as `kind`: a changed file (size, mtime) starts over."""
    st = file.stat()
    return f"{kind}:{file.resolve()}:{st.st_size}:{st.st_mtime_ns}"[:512]


def _ident(name: str) -> str:
    """A header name as a quoted SQL identifier (header text is data: quote every character)."""
    return '"' + name.replace('"', '""') + '"'


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def import_files(
    files: list[Path],
    kind: str,
    parse: Callable[[Path, bytes, list[str], int], T],
    write: Callable[[Path, T], None],
    *,
    chunk_lines: int,
    say: Callable[[str], None],
    pace: Pace | None = None,
    keep_finished: bool = False,
    tally: Callable[[], str] = str,
) -> bool:
    """Import files of one kind chunk by chunk: each chunk of `chunk_lines` whole lines is read
    and parsed (`parse(file, block, header, first line number)`) in a thread while the chunk
    before is written, across the files too, and written (`write(file, parsed)`) in one
    transaction with its file's ImportCheckpoint (lines and byte offset), so a rerun after an
    interruption resumes after the last committed chunk. A finished file's checkpoint is
    deleted, or with `keep_finished` (a folder import) marked finished, so that a rerun skips
    the file. `tally`: what the progress line adds after the lines done. Returns whether any
    chunk was written."""
    plans: list[tuple[Path, str, int, int]] = []  # file, checkpoint key, lines and bytes done
    for file in files:
        key = checkpoint_key(file, kind)
        checkpoint, _ = ImportCheckpoint.objects.get_or_create(key=key)
        if checkpoint.finished:
            say(f"{file.name}: imported by an earlier run of this import, skipped")
            if pace is not None:
                pace.skip(kind, _data_bytes(file))
            continue
        plans.append((file, key, checkpoint.lines_done, checkpoint.bytes_done))
    wrote, done, first, offset, started = False, 0, 0, 0, 0.0
    items = _pieces(plans, parse, chunk_lines)
    with closing(items), closing(_ahead(items)) as pieces:
        for piece in pieces:
            if isinstance(piece, _Start):
                file, key = piece.file, piece.key
                first = done = piece.lines
                offset, started = piece.offset, time.perf_counter()
                _say_resumed(piece, say)
                if pace is not None:
                    pace.skip(kind, piece.offset - piece.header_bytes)
            elif isinstance(piece, _Piece):
                with transaction.atomic():
                    write(file, piece.parsed)
                    done += piece.n_lines
                    offset += piece.n_bytes
                    ImportCheckpoint.objects.filter(key=key).update(lines_done=done, bytes_done=offset)
                wrote = True
                rate = (done - first) / max(time.perf_counter() - started, 1e-9)
                where = f"; {pace.advance(kind, piece.n_bytes)}" if pace is not None else ""
                say(f"{file.name}: {done:,} lines{tally()}, {rate:,.0f} lines/s{where}")
            else:
                _finish(key, keep_finished)
                say(f"{file.name}: done, {done - first:,} lines in {time.perf_counter() - started:.1f} s")
    return wrote


@dataclass(frozen=True)
class _Start:
    """A file opened and positioned after the lines an earlier run committed."""

    file: Path
    key: str
    lines: int
    offset: int
    header_bytes: int
    resumed_at_byte: bool  # (else by skipping lines: a checkpoint without an offset)
    skip_seconds: float | None  # a zip's member read up to the offset (it cannot seek)


@dataclass(frozen=True)
class _Piece(Generic[T]):
    n_lines: int
    n_bytes: int
    parsed: T


class _End:
    """The file's last chunk came before."""


def _pieces(
    plans: list[tuple[Path, str, int, int]], parse: Callable[[Path, bytes, list[str], int], T], chunk_lines: int
) -> Generator[_Start | _Piece[T] | _End, None, None]:
    """Each planned file opened, positioned (`_Start`), its chunks parsed (`_Piece`), its end."""
    for file, key, lines_done, bytes_done in plans:
        with download_file.open_data(file) as fh:
            header_line = fh.readline()
            header = header_line.decode("utf-8").rstrip("\r\n").lstrip("\ufeff").split("\t")
            offset = len(header_line)
            began = time.perf_counter()
            if bytes_done:
                download_file.skip_to(fh, offset, bytes_done)
                offset = bytes_done
            else:
                offset += sum(len(line) for line in islice(fh, lines_done))
            skip_seconds = time.perf_counter() - began if bytes_done and not fh.seekable() else None
            yield _Start(file, key, lines_done, offset, len(header_line), bool(bytes_done), skip_seconds)
            line = lines_done + 2
            for n_lines, block in download_file.line_blocks(fh, chunk_lines) if header != [""] else ():
                yield _Piece(n_lines, len(block), parse(file, block, header, line))
                line += n_lines
            yield _End()


def _say_resumed(start: _Start, say: Callable[[str], None]) -> None:
    name, lines = start.file.name, start.lines
    if start.resumed_at_byte:
        how = " (a zip cannot seek: its bytes before that are read and discarded)" if start.skip_seconds else ""
        say(f"{name}: resuming after {lines:,} lines (byte {start.offset:,}){how}")
        if start.skip_seconds is not None:
            say(f"{name}: skipped to byte {start.offset:,} in {start.skip_seconds:.1f} s")
    elif lines:
        say(f"{name}: resuming after {lines:,} lines (byte {start.offset:,})")


def _data_bytes(file: Path) -> int:
    """The file's bytes after its header line."""
    with download_file.open_data(file) as fh:
        return download_file.data_size(file) - len(fh.readline())


def _finish(key: str, keep: bool) -> None:
    if keep:
        ImportCheckpoint.objects.filter(key=key).update(finished=True)
    else:
        ImportCheckpoint.objects.filter(key=key).delete()


_DONE = object()


def _ahead(items: Iterator[T]) -> Generator[T, None, None]:
    """`items` one ahead: the next one is produced in a thread while the caller handles this
    one (pyarrow, numpy and the database driver release the interpreter lock, so a chunk's parse
    runs on another core while the chunk before is written)."""
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="import-parse") as pool:
        ahead = pool.submit(next, items, _DONE)
        while (item := ahead.result()) is not _DONE:
            ahead = pool.submit(next, items, _DONE)
            yield item  # type: ignore[misc]


# ---------------------------------------------------------------- the ratings phase


def _rating_parse(file: Path, block: bytes, header: list[str], first_line: int) -> cnr.RatingBlock:
    """The parse step of a ratings file: its chunks through the one ratings parser."""
    return cnr.parse_block(
        block, cnr.RatingLayout.from_header(header, str(file)), file=str(file), first_line=first_line
    )


def _count_skips(rows: cnr.RatingBlock, report: ImportReport) -> None:
    for skip in rows.skips:
        report.skipped[f"ratings: {skip.reason}"] += 1


@dataclass
class _RatingsLoad:
    """What the COPY chunk writer of one ratings import keeps from chunk to chunk."""

    exclusive: bool
    bulk: bool  # the key constraints are out: every row is appended (`_write_rows`)
    counts: _RatingCounts | None  # a load into an empty table counts its rows per note
    ids: _IdCache | None


def write_ratings_chunk(rows: cnr.RatingBlock, report: ImportReport, load: _RatingsLoad) -> None:
    """The COPY chunk writer: one parsed chunk into notes_rating (`_typed_chunk`)."""
    _count_skips(rows, report)
    written = _typed_chunk(rows, report, exclusive=load.exclusive, bulk=load.bulk, ids=load.ids)
    if load.counts is not None:
        load.counts.add(written)


def import_ratings_copy(
    path: str | Path | list[Path],
    report: ImportReport,
    *,
    chunk_lines: int = COPY_CHUNK_LINES,
    progress: Callable[[str], None] | None = None,
    exclusive: bool = True,
    pace: Pace | None = None,
    keep_finished: bool = False,
) -> None:
    """Ratings into PostgreSQL at bulk speed, memory flat in the file size: the checkpointed
    file loop (`import_files`), the COPY chunk writer (`write_ratings_chunk`) and the end steps
    (`_rating_end_steps`).

    Each chunk of lines is parsed by the one ratings parser and sent as typed rows by binary
    COPY; a later row for the same note and rater wins, and ratings of notes not imported are
    skipped and counted. Resumable (see `import_files`). `path`: a file, a folder of TSVs, or a
    list of files (a download's shards). `pace` (a whole-folder import): progress against the
    folder's bytes; `keep_finished`: a finished file's checkpoint stays, marked finished, so a
    rerun skips the file (`import_folder` deletes them when the folder is done).

    `exclusive` (the default) trades concurrency for speed: each chunk's transaction locks the
    ratings table (readers wait for the chunk) and writes the chunk without a foreign-key check
    per row (see `_drop_rating_foreign_keys`: dropping a key locks the notes and participants
    tables it references too, so every reader of notes waits while chunks follow each other);
    the checks are made in one pass at the end (VALIDATE). An exclusive import into an empty
    ratings table is a bulk load: the primary key, the unique (note, rater) constraint and the
    rater index are dropped and built once at the end (see `_defer_rating_indexes`). With
    `exclusive=False` the rows go through `INSERT … ON CONFLICT` with the usual per-row checks,
    and web requests keep reading and writing ratings.
    """
    say = progress or (lambda _line: None)
    # A load into an empty table counts its rows per note as it writes them (`_RatingCounts`).
    counts = _RatingCounts() if exclusive and not Rating.objects.exists() else None
    if exclusive:
        _defer_rating_indexes()
    else:
        _restore_rating_key_constraints(report)  # an interrupted bulk load left them out
    load = _RatingsLoad(exclusive, bool(_missing_rating_key_constraints()), counts, _IdCache() if exclusive else None)
    wrote = import_files(
        cnr.rating_files(path), "ratings", _rating_parse, lambda _file, rows: write_ratings_chunk(rows, report, load),
        chunk_lines=chunk_lines, say=say, pace=pace, keep_finished=keep_finished,
        tally=lambda: f", {report.counts['ratings upserted']:,} ratings",
    )  # fmt: skip
    # (a resumed folder import may have written rows in an earlier run)
    _rating_end_steps(report, load.counts, wrote or keep_finished, say)


def _rating_end_steps(
    report: ImportReport, counts: _RatingCounts | None, touched: bool, say: Callable[[str], None]
) -> None:
    """After the last chunk: the key constraints a bulk load left out, the foreign keys'
    validation, the notes' rating counts and the rater index, each timed."""

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


def write_ratings_chunk_orm(rows: cnr.RatingBlock, report: ImportReport, touched: set[int]) -> None:
    """The ORM chunk writer (any database): the rows `_typed_chunk` writes, by bulk_create."""
    _count_skips(rows, report)
    ext, pos = np.unique(rows.note_id, return_inverse=True)
    found = _imported_notes(ext.tolist())
    note_pk = np.fromiter((found.get(str(x), 0) for x in ext.tolist()), dtype=np.int64, count=len(ext))[pos]
    known = np.flatnonzero(note_pk != 0)
    keys, codes = rows.rater_keys, rows.rater_code
    keep = np.sort(_last_of_each_pair(pos, codes, known, len(keys)))
    people = _participants({keys[c] for c in codes[keep].tolist()})
    names = rows.tag_names
    for part in _batches(keep.tolist()):
        Rating.objects.bulk_create(
            [
                Rating(
                    note_id=int(note_pk[i]), rater_id=people[keys[codes[i]]], level=cnr.LEVELS[rows.value2[i]],
                    created_at=_dt(int(rows.created_at_ms[i])),
                    tags=[name for k, name in enumerate(names) if int(rows.tags[i]) >> k & 1],
                )
                for i in part
            ],
            update_conflicts=True,
            unique_fields=["note", "rater"],
            update_fields=["level", "tags", "created_at"],
        )  # fmt: skip
    touched.update(note_pk[keep].tolist())
    report.skipped["ratings: note not imported"] += len(rows.note_id) - len(known)
    report.counts["ratings replaced by a later row"] += len(known) - len(keep)
    report.counts["ratings upserted"] += len(keep)


def import_ratings(
    path: str | Path | list[Path],
    report: ImportReport,
    *,
    chunk_lines: int = COPY_CHUNK_LINES,
    progress: Callable[[str], None] | None = None,
    pace: Pace | None = None,
    keep_finished: bool = False,
) -> None:
    """The ratings of `import_ratings_copy` through the ORM (any database: SQLite for the
    embedded demo), by the same file loop and parser; then the rating counts of the notes
    touched."""
    say = progress or (lambda _line: None)
    touched: set[int] = set()
    import_files(
        cnr.rating_files(path), "ratings", _rating_parse,
        lambda _file, rows: write_ratings_chunk_orm(rows, report, touched),
        chunk_lines=chunk_lines, say=say, pace=pace, keep_finished=keep_finished,
        tally=lambda: f", {report.counts['ratings upserted']:,} ratings",
    )  # fmt: skip
    counts = Rating.objects.filter(note=OuterRef("pk")).values("note").annotate(n=Count("pk")).values("n")
    if keep_finished:  # a folder import resumed: an earlier run's chunks touched notes too
        Note.objects.update(num_ratings=Coalesce(Subquery(counts), 0))
        return
    for batch_ids in _batches(sorted(touched)):
        Note.objects.filter(pk__in=batch_ids).update(num_ratings=Coalesce(Subquery(counts), 0))


class _RatingCounts:
    """Ratings per note of a bulk load into an empty table, counted from the rows as each chunk
    writes them, so that no pass over the whole table is needed for `Note.num_ratings` at the
    end (bench/README.md, "Bulk import with COPY"). Rows the end steps delete are taken off
    (`remove`); `complete` turns False where the count cannot follow (rows deleted without their
    notes known), and the import counts by SQL instead."""

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


_LEVEL_CODES = (cnr.HELPFUL, cnr.SOMEWHAT_HELPFUL, cnr.NOT_HELPFUL)  # the level code the writers send: 2 - value2


def _last_of_each_pair(note_pos: np.ndarray, rater_code: np.ndarray, rows: np.ndarray, n_raters: int) -> np.ndarray:
    """Of `rows` (indices, ascending), the last of each (note, rater) pair: a later row wins."""
    pair = note_pos[rows].astype(np.int64) * max(n_raters, 1) + rater_code[rows]
    _, from_end = np.unique(pair[::-1], return_index=True)  # first occurrence in reversed order
    return rows[len(rows) - 1 - from_end]


def _typed_chunk(
    rows: cnr.RatingBlock, report: ImportReport, *, exclusive: bool, bulk: bool, ids: _IdCache | None = None
) -> np.ndarray:
    """One parsed chunk: notes and participants are looked up by their distinct ids (through
    `ids` across chunks), "a later row wins" is applied to the arrays, and the rows reach the
    database typed, by binary COPY. Returns the note pk of each row written."""
    keys, rater_code = rows.rater_keys, rows.rater_code
    level = (2 - rows.value2).astype(np.int16)  # an index into _LEVEL_CODES
    with connection.cursor() as cursor:
        # A lost commit after a crash loses its checkpoint with it (same transaction), so the
        # resumed import redoes that chunk: no need to wait for the WAL flush of every chunk.
        cursor.execute("SET LOCAL synchronous_commit = off")
        foreign_keys = _drop_rating_foreign_keys(cursor) if exclusive else []  # before reading notes
        ext, pos = np.unique(rows.note_id, return_inverse=True)
        note_pk = _note_pks(cursor, ext.tolist(), ids)[pos]
        known = np.flatnonzero(note_pk != 0)
        keep = _last_of_each_pair(pos, rater_code, known, len(keys))
        codes = np.unique(rater_code[keep])
        rater_pk = np.zeros(len(keys), dtype=np.int64)
        rater_pk[codes] = _rater_pks(cursor, [keys[c] for c in codes.tolist()], ids)
        # Tags: each row points into the chunk's distinct tag lists, sent once as one JSON array.
        masks, tagset = np.unique(rows.tags[keep], return_inverse=True)
        tag_lists = [[t for k, t in enumerate(rows.tag_names) if m >> k & 1] for m in masks.tolist()]
        if bulk:
            changed = _append_ratings(
                cursor, note_pk[keep], rater_pk[rater_code[keep]], level[keep], tagset.ravel(), tag_lists,
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
        out["rater"] = rater_pk[rater_code[keep]]
        out["level"] = level[keep]
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
        levels = " ".join(f"WHEN {code} THEN {_literal(level)}" for code, level in enumerate(_LEVEL_CODES))
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
            word = _LEVEL_CODES[code // max(len(tag_lists), 1)].encode()
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
                cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")  # no pending trigger events block CREATE INDEX
                cursor.execute(f"SET LOCAL maintenance_work_mem = '{BULK_STEP_MEMORY}'")  # see bulk_step_memory
                for create in missing:
                    cursor.execute(create)
    return len(missing)
