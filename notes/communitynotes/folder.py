"""The public Community Notes download into the database: `import_folder`, the one entry point
of the import, streaming and resumable.

`import_folder(FOLDER)` takes the folder as X publishes it (notes-*, ratings-* shards,
noteStatusHistory-*, userEnrollment-*, noteRequests-*), each file a TSV or X's zip of it
(`download_file.open_data` streams the zip's member): every file is checked first (today's
schema, no truncated last row, a zip read whole for its CRC: `columnar.check_file`), so a bad
file stops the run before anything is written. `import_folder(FolderFiles(...))` imports the
files given as they are, any year's layout read by header name: the file-by-file command
(`import_communitynotes --notes FILE --ratings DIR`) is that case.

Notes (with their posts and authors), the ratings and the status history go in by chunks
through one checkpointed file loop (`importer.import_file`): on PostgreSQL each chunk is sent
by COPY into temporary staging tables and written by set-based statements (INSERT … SELECT …
ON CONFLICT, UPDATE … FROM), never row by row; elsewhere (SQLite, the embedded demo) or with
`orm=True` the same rows go through the ORM. Each chunk commits with its file's
ImportCheckpoint (lines and byte offset), so a killed run resumes at the file and byte it
stopped at (in a zip, the byte of its TSV, reached by reading up to it), with nothing written
twice or lost; a file done stays marked finished until the whole import is done. Into an empty
notes table the notes' read indexes are left out until the import is in (`_defer_note_indexes`).
Enrollment and note requests are not imported: the app has no table for them (the research
path converts them to Parquet); they are listed.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Generic, TypeVar

from django.db import connection, models, transaction
from django.db.backends.utils import CursorWrapper

from crowdnotes_site.lib.communitynotes.data import columnar
from crowdnotes_site.lib.communitynotes.data import files as download_file
from crowdnotes_site.lib.communitynotes.data import tsv as cio
from crowdnotes_site.lib.communitynotes.research.delays import note_time_ms
from crowdnotes_site.lib.text_rules import IMPORTED_NOTE_MAX_CHARS, cap_text, find_urls
from crowdnotes_site.lib.xids import snowflake_time
from notes.analytics.services import imported_history
from notes.communitynotes import importer as cni
from notes.models import ImportCheckpoint, ImportedNoteHistory, Note, NoteStatus, NoteStatusChange, Post
from notes.services import post_text_hash

NOTE_CHUNK_LINES = 50_000  # notes and status-history lines per chunk (a notes line is ~0.5 KB)
DownloadError = columnar.DownloadError
R = TypeVar("R")


@dataclass(frozen=True)
class FolderFiles:
    notes: list[Path]
    ratings: list[Path]
    status: list[Path]
    not_imported: list[Path] = field(default_factory=list)  # enrollment, note requests: no table for them


def folder_files(folder: str | Path, say: Callable[[str], None] | None = None) -> FolderFiles:
    """The download's files by kind, each checked (DownloadError naming the file and line); a
    zip is read whole for the check (its CRC), which `say` reports."""
    files = columnar.download_files(Path(folder))
    for kind in ("notes", "ratings", "status"):
        for f in files[kind]:
            started = time.perf_counter()
            columnar.check_file(f, kind)
            if say and download_file.is_zip(f):
                took = time.perf_counter() - started
                say(f"{f.name}: checked, read whole ({download_file.data_size(f):,} bytes of TSV) in {took:.1f} s")
    return FolderFiles(files["notes"], files["ratings"], files["status"], files["enrollment"] + files["requests"])


def import_folder(
    folder: str | Path | FolderFiles,
    report: cni.ImportReport,
    *,
    chunk_lines: int = cni.COPY_CHUNK_LINES,
    note_chunk_lines: int = NOTE_CHUNK_LINES,
    progress: Callable[[str], None] | None = None,
    exclusive: bool = True,
    orm: bool = False,
) -> FolderFiles:
    """Import the download `folder` (its files found and checked), or the files given (see the
    module's docstring); returns the files. `exclusive`: see `importer.import_ratings_copy`;
    `orm`: every chunk through the ORM (what a database other than PostgreSQL gets)."""
    say = progress or (lambda _line: None)
    files = folder if isinstance(folder, FolderFiles) else folder_files(folder, say)
    orm = orm or connection.vendor != "postgresql"
    pace = cni.Pace(
        total={
            kind: sum(cni._data_bytes(f) for f in group)
            for kind, group in (("notes", files.notes), ("ratings", files.ratings), ("status", files.status))
        }
    )
    for f in files.not_imported:
        say(f"{f.name}: not imported (the app has no table for it; research_download converts it)")
        report.counts[f"files not imported ({f.name.split('-')[0]})"] += 1
    t0 = time.perf_counter()
    if not orm and exclusive:  # (through the ORM the notes' indexes stay: deferring them is the bulk path's)
        _defer_note_indexes(say)
    elif not orm:
        _restore_note_indexes(say)  # a site in use keeps its indexes (an interrupted first import left them out)
    write_notes = _write_notes_orm if orm else _write_notes_sql
    cni.import_files(
        files.notes, "notes", _parse(cio.read_notes_text, "notes", ("summary",)),
        lambda _file, chunk: write_notes(chunk, report),
        chunk_lines=note_chunk_lines, say=say, pace=pace, keep_finished=True,
    )  # fmt: skip
    t1 = time.perf_counter()
    say(f"phase notes (posts, authors, notes): {t1 - t0:.1f} s")
    if files.ratings and orm:
        cni.import_ratings(files.ratings, report, chunk_lines=chunk_lines, progress=say, pace=pace, keep_finished=True)
    elif files.ratings:
        cni.import_ratings_copy(
            files.ratings, report, chunk_lines=chunk_lines, progress=say, exclusive=exclusive, pace=pace,
            keep_finished=True,
        )  # fmt: skip
    t2 = time.perf_counter()
    say(f"phase ratings (raters, ratings, keys and indexes): {t2 - t1:.1f} s")
    write_status = _write_status_orm if orm else _write_status_sql
    cni.import_files(
        files.status, "status", _parse(cio.read_status_history_text, "status history", ()),
        lambda file, chunk: write_status(chunk, report, download_file.data_name(file)),  # the TSV's name, zipped or not
        chunk_lines=note_chunk_lines, say=say, pace=pace, keep_finished=True,
    )  # fmt: skip
    say(f"phase status history: {time.perf_counter() - t2:.1f} s")
    if not orm:
        _restore_note_indexes(say)
    # Every file is in: their checkpoints go (a rerun imports them again, idempotently: the same
    # rows, nothing duplicated).
    keys = [cni.checkpoint_key(f, kind) for kind, group in
            (("notes", files.notes), ("ratings", files.ratings), ("status", files.status)) for f in group]  # fmt: skip
    ImportCheckpoint.objects.filter(key__in=keys).delete()
    return files


def _note_read_indexes() -> list[tuple[str, str]]:
    """(name, CREATE INDEX statement) of the notes table's indexes that only serve reads (every
    one but the primary key and the unique constraints), as the migrations create them."""
    editor = connection.SchemaEditorClass(connection)
    statements = [st for f in Note._meta.local_concrete_fields for st in editor._field_indexes_sql(Note, f)]  # type: ignore[attr-defined]
    statements += [index.create_sql(Note, editor) for index in Note._meta.indexes]
    return [(str(st.parts["name"]).strip('"'), str(st)) for st in statements]


def _defer_note_indexes(say: Callable[[str], None]) -> None:
    """On a first import (no notes yet), drop the notes' read indexes until the whole import is
    in: each note written, each status set and each rating count would otherwise go into all
    eleven, and PostgreSQL builds each in one sorted pass at the end far faster (its advice for
    populating a table). The unique key on noteId stays: every chunk joins on it. An import
    interrupted meanwhile leaves them out until its rerun ends (or an online import starts)."""
    if Note.objects.exists():
        return
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")  # no pending trigger events block DROP INDEX
        for name, _ in _note_read_indexes():
            cursor.execute(f"DROP INDEX IF EXISTS {cni._ident(name)}")
    say("notes table empty: its read indexes are built once the folder is in")


def _restore_note_indexes(say: Callable[[str], None]) -> None:
    started = time.perf_counter()
    built = cni.build_missing_indexes(Note._meta.db_table, _note_read_indexes())
    if built:
        say(f"notes' read indexes built ({built}): {time.perf_counter() - started:.1f} s")


@dataclass
class _Chunk(Generic[R]):
    """A chunk's rows, each note's last row in order of first appearance, and what its read
    counted (merged into the import's report by the writer, in the main thread)."""

    rows: list[R]
    counted: cni.ImportReport


def _parse(
    read: Callable[[str, list[str], str, int], Iterable[R | cio.Skipped]], kind: str, free_text: tuple[str, ...]
) -> Callable[[Path, bytes, list[str], int], _Chunk[R]]:
    """The parse step of notes or status-history files: a chunk's rows by `read` (a reader of
    tsv.py), their text cleaned (`importer._clean_rows`), a note listed twice keeping its last row."""

    def parse(file: Path, block: bytes, header: list[str], first_line: int) -> _Chunk[R]:
        try:
            text = block.decode("utf-8")
        except UnicodeDecodeError as exc:
            line = first_line + block[: exc.start].count(b"\n")
            raise DownloadError(
                f"{file}:{line}: not UTF-8 text ({exc.reason}); nothing of this chunk was written"
            ) from exc
        counted = cni.ImportReport()
        read_report = cio.ReadReport()
        rows = cni._clean_rows(read_report.rows(read(str(file), header, text, first_line)), free_text, counted, kind,
                               block=text)  # fmt: skip
        latest = {row.note_id: row for row in rows}  # type: ignore[attr-defined]
        counted.skipped.update({f"{kind}: {k}": v for k, v in read_report.skipped.items()})
        return _Chunk(list(latest.values()), counted)

    return parse


def _insert_sql(model: type[models.Model], given: dict[str, str], source: str) -> tuple[str, list[Any]]:
    """INSERT INTO the model's table, every column but the id: `given` SQL expressions (by field
    name) over `source`, each other field's default (a parameter) — so a field added later
    gets its default here as in the ORM."""
    quote = connection.ops.quote_name
    columns, values, params = [], [], []
    for f in model._meta.concrete_fields:
        if f.primary_key:
            continue
        columns.append(quote(str(f.column)))
        if f.name in given:
            values.append(given[f.name])
        elif getattr(f, "auto_now", False) or getattr(f, "auto_now_add", False):
            values.append("now()")
        else:
            values.append("%s")
            params.append(f.get_db_prep_save(f.get_default(), connection))
    # Table and column names come from the model; the expressions are this module's.
    sql = f"INSERT INTO {quote(model._meta.db_table)} ({', '.join(columns)}) SELECT {', '.join(values)} FROM {source}"  # noqa: S608
    return sql, params


def _stage(cursor: CursorWrapper, name: str, columns: str, rows: Iterable[tuple[Any, ...]]) -> None:
    cursor.execute(f"CREATE TEMP TABLE {name} ({columns}) ON COMMIT DROP")
    with cursor.copy(f"COPY {name} FROM STDIN") as copy:  # type: ignore[attr-defined]
        for row in rows:
            copy.write_row(row)


def _dt(ms: int) -> datetime:
    return cni._dt(ms)


def _write_notes_sql(chunk: _Chunk[cio.NoteRow], report: cni.ImportReport) -> None:
    """One chunk of notes, set-based: its posts, authors and notes (a later import updates them)."""
    _merge(report, chunk.counted)
    posts: dict[str, tuple[Any, ...]] = {}
    notes: list[tuple[Any, ...]] = []
    cut = 0
    for n in chunk.rows:
        tweet = n.tweet_id or "0"
        if tweet not in posts:
            body = f"Post {tweet} (imported from the public Community Notes data; text not included)"
            when = snowflake_time(tweet) if tweet.isdigit() and int(tweet) > 0 else None
            posts[tweet] = (tweet, body, post_text_hash(body), f"https://x.com/i/status/{tweet}", when)
        summary, was_cut = cap_text(n.summary, IMPORTED_NOTE_MAX_CHARS)
        cut += was_cut
        urls = json.dumps(find_urls(summary, web_only=True)[:10])
        created = _dt(note_time_ms(n.note_id, n.created_at_ms))
        notes.append((str(n.note_id), n.author_id, tweet, summary, n.classification, created, urls))
    report.cut[f"notes: summary over {IMPORTED_NOTE_MAX_CHARS:,} characters"] += cut
    if not notes:
        return
    with connection.cursor() as cursor:
        # A lost commit after a crash loses its checkpoint with it (same transaction).
        cursor.execute("SET LOCAL synchronous_commit = off")
        _stage(
            cursor, "cn_post_stage", "tweet text, body text, hash text, url text, posted_at timestamptz", posts.values()
        )
        _stage(
            cursor, "cn_note_stage",
            "ext text, author text, tweet text, body text, classification text, created_at timestamptz, urls jsonb",
            notes,
        )  # fmt: skip
        # Authors and posts are created in sorted order, so the same file gives the same keys in
        # every process (what reads rows in key order, the jury, repeats from run to run).
        cursor.execute(
            "INSERT INTO notes_participant (external_id) SELECT author FROM (SELECT DISTINCT author FROM "
            'cn_note_stage) a ORDER BY author COLLATE "C" ON CONFLICT (external_id) DO NOTHING'
        )
        # Post ids are not unique in the table (a pasted post may name one): a post is created
        # only where none exists, under a lock that keeps two importers from both creating it.
        cursor.execute("LOCK TABLE notes_post IN SHARE ROW EXCLUSIVE MODE")
        sql, params = _insert_sql(
            Post,
            {"external_id": "s.tweet", "text": "s.body", "text_hash": "s.hash", "source_url": "s.url",
             "posted_at": "s.posted_at", "text_available": "false"},
            'cn_post_stage s WHERE NOT EXISTS (SELECT FROM notes_post p WHERE p.external_id = s.tweet) '
            'ORDER BY s.tweet COLLATE "C"',
        )  # fmt: skip
        cursor.execute(sql, params)
        report.counts["posts created"] += cursor.rowcount
        sql, params = _insert_sql(
            Note,
            {"post": "p.id", "author": "u.id", "external_id": "s.ext", "text": "s.body",
             "classification": "s.classification", "created_at": "s.created_at", "evidence_urls": "s.urls"},
            """cn_note_stage s
                JOIN (SELECT external_id, min(id) AS id FROM notes_post
                      WHERE external_id IN (SELECT tweet FROM cn_post_stage) GROUP BY external_id) p
                  ON p.external_id = s.tweet
                JOIN notes_participant u ON u.external_id = s.author""",
        )  # fmt: skip
        cursor.execute(
            sql + " ON CONFLICT (external_id) DO UPDATE SET post_id = EXCLUDED.post_id, "
            "author_id = EXCLUDED.author_id, text = EXCLUDED.text, classification = EXCLUDED.classification, "
            "created_at = EXCLUDED.created_at, evidence_urls = EXCLUDED.evidence_urls",
            params,
        )
        report.counts["notes upserted"] += cursor.rowcount
        cursor.execute("DROP TABLE cn_post_stage, cn_note_stage")


_VALID = set(NoteStatus.values)


def _timed(h: cio.StatusHistoryRow) -> list[tuple[int, str]]:
    """A row's status events with a time: first non-NMR, latest non-NMR, current."""
    events = (
        (h.first_non_nmr_ms, h.first_non_nmr_status),
        (h.most_recent_non_nmr_ms, h.most_recent_non_nmr_status),
        (h.current_status_ms, h.current_status),
    )
    return [(ms, status) for ms, status in events if ms and status in _VALID]


def _write_status_sql(chunk: _Chunk[cio.StatusHistoryRow], report: cni.ImportReport, source: str) -> None:
    """One chunk of a status-history file, set-based: each imported note's current status and
    its status changes with their times, and every row kept for the delay analytics
    (ImportedNoteHistory, `imported_history`; `source`: the TSV's name)."""
    _merge(report, chunk.counted)
    statuses: list[tuple[str, str]] = []
    events: list[tuple[int, str, str, str, datetime]] = []
    history: list[tuple[Any, ...]] = []
    for h in chunk.rows:
        ext = str(h.note_id)
        previous = NoteStatus.NEEDS_MORE_RATINGS.value
        for ms, status in sorted(_timed(h)):
            if status != previous:
                events.append((len(events), ext, previous, status, _dt(ms)))
            previous = status
        if h.current_status in _VALID:
            statuses.append((ext, h.current_status))
        v = imported_history(h, source)
        history.append((v["note_external_id"], v["created_at"], v["first_verdict_at"], v["first_verdict_status"],
                        v["current_status"], v["source_file"]))  # fmt: skip
    if not history:
        return
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL synchronous_commit = off")
        _stage(cursor, "cn_ext_stage", "ext text", [(str(h.note_id),) for h in chunk.rows])
        _stage(cursor, "cn_status_stage", "ext text, status text", statuses)
        _stage(
            cursor, "cn_event_stage", "seq int, ext text, previous text, status text, changed_at timestamptz", events
        )
        _stage(
            cursor, "cn_history_stage",
            "ext text, created_at timestamptz, verdict_at timestamptz, verdict text, status text, source text",
            history,
        )  # fmt: skip
        cursor.execute("SELECT count(*) FROM cn_ext_stage s JOIN notes_note n ON n.external_id = s.ext")
        (known,) = cursor.fetchone()
        report.skipped["status history: note not imported"] += len(chunk.rows) - known
        # Only the statuses that change are written: most notes stay Needs More Ratings, and each
        # written row is a new version of the note in every one of its indexes (status is indexed).
        cursor.execute(
            "UPDATE notes_note n SET status = s.status FROM cn_status_stage s "
            "WHERE n.external_id = s.ext AND n.status IS DISTINCT FROM s.status"
        )
        report.counts["note statuses changed"] += cursor.rowcount
        sql, params = _insert_sql(
            NoteStatusChange,
            {"note": "c.note_id", "previous_status": "c.previous", "status": "c.status", "changed_at": "c.changed_at"},
            """(SELECT DISTINCT ON (n.id, e.status, e.changed_at) n.id AS note_id, e.previous, e.status, e.changed_at
                 FROM cn_event_stage e JOIN notes_note n ON n.external_id = e.ext
                 WHERE NOT EXISTS (SELECT FROM notes_notestatuschange x
                                   WHERE x.note_id = n.id AND x.status = e.status AND x.changed_at = e.changed_at)
                 ORDER BY n.id, e.status, e.changed_at, e.seq) c""",
        )  # fmt: skip
        cursor.execute(sql, params)
        report.counts["status changes added"] += cursor.rowcount
        sql, params = _insert_sql(
            ImportedNoteHistory,
            {"note_external_id": "s.ext", "created_at": "s.created_at", "first_verdict_at": "s.verdict_at",
             "first_verdict_status": "s.verdict", "current_status": "s.status", "source_file": "s.source"},
            "cn_history_stage s",
        )  # fmt: skip
        cursor.execute(
            sql + " ON CONFLICT (note_external_id) DO UPDATE SET created_at = EXCLUDED.created_at, "
            "first_verdict_at = EXCLUDED.first_verdict_at, first_verdict_status = EXCLUDED.first_verdict_status, "
            "current_status = EXCLUDED.current_status, source_file = EXCLUDED.source_file",
            params,
        )
        report.counts["status history rows kept for delay analytics"] += cursor.rowcount
        cursor.execute("DROP TABLE cn_ext_stage, cn_status_stage, cn_event_stage, cn_history_stage")


def _merge(report: cni.ImportReport, counted: cni.ImportReport) -> None:
    report.counts.update(counted.counts)
    report.skipped.update(counted.skipped)
    report.cut.update(counted.cut)


# ---------------------------------------------------------------- the same chunks through the ORM


def _write_notes_orm(chunk: _Chunk[cio.NoteRow], report: cni.ImportReport) -> None:
    """The notes of `_write_notes_sql` through the ORM, in batches (any database)."""
    _merge(report, chunk.counted)
    for batch in cni._batches(chunk.rows):
        people = cni._participants({n.author_id for n in batch})
        posts = cni._posts({n.tweet_id or "0" for n in batch})
        summaries = {n.note_id: cap_text(n.summary, IMPORTED_NOTE_MAX_CHARS) for n in batch}
        notes = [
            Note(
                external_id=str(n.note_id), post_id=posts[n.tweet_id or "0"], author_id=people[n.author_id],
                text=summaries[n.note_id][0], classification=n.classification,
                created_at=_dt(note_time_ms(n.note_id, n.created_at_ms)),
                evidence_urls=find_urls(summaries[n.note_id][0], web_only=True)[:10],
            )
            for n in batch
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


def _write_status_orm(chunk: _Chunk[cio.StatusHistoryRow], report: cni.ImportReport, source: str) -> None:
    """The statuses, changes and kept rows of `_write_status_sql` through the ORM, in batches."""
    _merge(report, chunk.counted)
    for batch in cni._batches(chunk.rows):
        notes = cni._imported_notes(h.note_id for h in batch)
        known = [h for h in batch if str(h.note_id) in notes]
        report.skipped["status history: note not imported"] += len(batch) - len(known)
        existing = set(
            NoteStatusChange.objects.filter(note_id__in=notes.values()).values_list("note_id", "status", "changed_at")
        )
        changes: list[NoteStatusChange] = []
        updates: list[Note] = []
        for h in known:
            pk = notes[str(h.note_id)]
            previous = NoteStatus.NEEDS_MORE_RATINGS.value
            for ms, status in sorted(_timed(h)):
                when = _dt(ms)
                if status != previous and (pk, status, when) not in existing:
                    existing.add((pk, status, when))
                    changes.append(
                        NoteStatusChange(note_id=pk, previous_status=previous, status=status, changed_at=when)
                    )
                previous = status
            if h.current_status in _VALID:
                updates.append(Note(pk=pk, status=h.current_status))
        NoteStatusChange.objects.bulk_create(changes)
        Note.objects.bulk_update(updates, ["status"])
        kept = ImportedNoteHistory.objects.bulk_create(
            [ImportedNoteHistory(**imported_history(h, source)) for h in batch],
            update_conflicts=True,
            unique_fields=["note_external_id"],
            update_fields=["created_at", "first_verdict_at", "first_verdict_status", "current_status", "source_file"],
        )
        report.counts["status changes added"] += len(changes)
        report.counts["note statuses set"] += len(updates)
        report.counts["status history rows kept for delay analytics"] += len(kept)
