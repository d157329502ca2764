"""The whole public download folder into the database in one streaming, resumable import.

`import_folder(FOLDER)` takes the folder as X publishes it (notes-*, ratings-* shards,
noteStatusHistory-*, userEnrollment-*, noteRequests-*), each file a TSV or X's zip of it
(`download_file.open_data` streams the zip's member): every file is checked first (today's
schema, no truncated last row, a zip read whole for its CRC: `columnar.check_file`), so a bad
file stops the run before anything is written. Then notes (with their posts and authors), the rating shards and the status history
go in by chunks: each chunk is sent by COPY into temporary staging tables and written by
set-based statements (INSERT … SELECT … ON CONFLICT, UPDATE … FROM), never row by row. Each
chunk commits with its file's ImportCheckpoint (lines and byte offset), so a killed run resumes
at the file and byte it stopped at (in a zip, the byte of its TSV, reached by reading up to
it), with nothing written twice or lost; a file done stays marked
finished until the whole folder is done. Into an empty notes table the notes' read indexes are
left out until the folder is in (`_defer_note_indexes`). Enrollment and note requests are not imported: the app
has no table for them (the research path converts them to Parquet); they are listed.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from itertools import islice
from pathlib import Path
from typing import Any

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


@dataclass(frozen=True)
class FolderFiles:
    notes: list[Path]
    ratings: list[Path]
    status: list[Path]
    not_imported: list[Path]  # enrollment and note requests: no table for them in the app


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
    folder: str | Path,
    report: cni.ImportReport,
    *,
    chunk_lines: int = cni.COPY_CHUNK_LINES,
    note_chunk_lines: int = NOTE_CHUNK_LINES,
    progress: Callable[[str], None] | None = None,
    exclusive: bool = True,
) -> FolderFiles:
    """Import the whole download folder (see the module's docstring); returns its files."""
    say = progress or (lambda _line: None)
    files = folder_files(folder, say)
    every = files.notes + files.ratings + files.status
    pace = cni.Pace(
        total={
            kind: sum(_data_bytes(f) for f in group)
            for kind, group in (("notes", files.notes), ("ratings", files.ratings), ("status", files.status))
        }
    )
    for f in files.not_imported:
        say(f"{f.name}: not imported (the app has no table for it; research_download converts it)")
        report.counts[f"files not imported ({f.name.split('-')[0]})"] += 1
    t0 = time.perf_counter()
    if exclusive:
        _defer_note_indexes(say)
    else:
        _restore_note_indexes(say)  # a site in use keeps its indexes (an interrupted first import left them out)
    for f in files.notes:
        _import_lines(f, "notes", _notes_chunk, report, note_chunk_lines, say, pace)
    t1 = time.perf_counter()
    say(f"phase notes (posts, authors, notes): {t1 - t0:.1f} s")
    cni.import_ratings_copy(
        files.ratings, report, chunk_lines=chunk_lines, progress=say, exclusive=exclusive, pace=pace,
        keep_finished=True,
    )  # fmt: skip
    t2 = time.perf_counter()
    say(f"phase ratings (raters, ratings, keys and indexes): {t2 - t1:.1f} s")
    for f in files.status:
        _import_lines(f, "status", _status_chunk, report, note_chunk_lines, say, pace)
    say(f"phase status history: {time.perf_counter() - t2:.1f} s")
    _restore_note_indexes(say)
    # Every file is in: the checkpoints of this folder's files go (a rerun imports it again,
    # idempotently: the same rows, nothing duplicated).
    ImportCheckpoint.objects.filter(key__in=[_key(f) for f in every]).delete()
    return files


def _note_read_indexes() -> list[tuple[str, str]]:
    """(name, CREATE INDEX statement) of the notes table's indexes that only serve reads (every
    one but the primary key and the unique constraints), as the migrations create them."""
    editor = connection.SchemaEditorClass(connection)
    statements = [st for f in Note._meta.local_concrete_fields for st in editor._field_indexes_sql(Note, f)]  # type: ignore[attr-defined]
    statements += [index.create_sql(Note, editor) for index in Note._meta.indexes]
    return [(str(st.parts["name"]).strip('"'), str(st)) for st in statements]


def _defer_note_indexes(say: Callable[[str], None]) -> None:
    """On a first import (no notes yet), drop the notes' read indexes until the whole folder is in:
    each note written (2.5 M), each status set and each rating count would otherwise go into all
    eleven, and PostgreSQL builds each in one sorted pass at the end far faster (its advice for
    populating a table). The unique key on noteId stays: every chunk joins on it. An import
    interrupted meanwhile leaves them out until its rerun ends (or an online import starts)."""
    if Note.objects.exists():
        return
    with connection.cursor() as cursor:
        for name, _ in _note_read_indexes():
            cursor.execute(f"DROP INDEX IF EXISTS {cni._ident(name)}")
    say("notes table empty: its read indexes are built once the folder is in")


def _restore_note_indexes(say: Callable[[str], None]) -> None:
    started = time.perf_counter()
    built = cni.build_missing_indexes(Note._meta.db_table, _note_read_indexes())
    if built:
        say(f"notes' read indexes built ({built}): {time.perf_counter() - started:.1f} s")


def _key(file: Path) -> str:
    kind = "ratings" if file.name.startswith("ratings-") else "notes" if file.name.startswith("notes-") else "status"
    return cni._checkpoint_key(file, kind)


def _data_bytes(file: Path) -> int:
    with download_file.open_data(file) as fh:
        return download_file.data_size(file) - len(fh.readline())


Chunk = Callable[[str, list[str], str, int, cni.ImportReport], None]


def _import_lines(
    file: Path,
    kind: str,
    chunk: Chunk,
    report: cni.ImportReport,
    chunk_lines: int,
    say: Callable[[str], None],
    pace: cni.Pace,
) -> None:
    """Feed `file` to `chunk` in blocks of whole lines, each block in one transaction with the
    file's checkpoint (resumed at its byte offset)."""
    key = cni._checkpoint_key(file, kind)
    with download_file.open_data(file) as fh:
        header_line = fh.readline()
        header = header_line.decode("utf-8").rstrip("\r\n").lstrip("\ufeff").split("\t")
        checkpoint, _ = ImportCheckpoint.objects.get_or_create(key=key)
        if checkpoint.finished:
            say(f"{file.name}: imported by an earlier run of this import, skipped")
            pace.skip(kind, download_file.data_size(file) - len(header_line))
            return
        done, offset = cni._resume(fh, checkpoint, len(header_line), file, say)
        pace.skip(kind, offset - len(header_line))
        started, first = time.perf_counter(), done
        while lines := list(islice(fh, chunk_lines)):
            block = b"".join(lines)
            with transaction.atomic():
                chunk(str(file), header, _decode(block, file, done), done + 2, report)
                done += len(lines)
                offset += len(block)
                ImportCheckpoint.objects.filter(key=key).update(lines_done=done, bytes_done=offset)
            rate = (done - first) / max(time.perf_counter() - started, 1e-9)
            say(f"{file.name}: {done:,} lines, {rate:,.0f} lines/s; {pace.advance(kind, len(block))}")
        ImportCheckpoint.objects.filter(key=key).update(finished=True)


def _decode(block: bytes, file: Path, lines_before: int) -> str:
    try:
        return block.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = lines_before + 2 + block[: exc.start].count(b"\n")
        raise DownloadError(f"{file}:{line}: not UTF-8 text ({exc.reason}); nothing of this chunk was written") from exc


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


def _notes_chunk(file: str, header: list[str], text: str, first_line: int, report: cni.ImportReport) -> None:
    """One block of a notes file: its posts, authors and notes, set-based (the rows and counts
    of `import_notes`: a note listed twice keeps its last row; a later import updates it)."""
    read = cio.ReadReport()
    rows = cni._clean_rows(
        read.rows(cio.read_notes_text(file, header, text, first_line)), ("summary",), report, "notes", block=text
    )
    latest = {n.note_id: n for n in rows}
    report.skipped.update({f"notes: {k}": v for k, v in read.skipped.items()})
    posts: dict[str, tuple[Any, ...]] = {}
    notes: list[tuple[Any, ...]] = []
    cut = 0
    for n in latest.values():
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
        cursor.execute(
            "INSERT INTO notes_participant (external_id) SELECT DISTINCT author FROM cn_note_stage "
            "ON CONFLICT (external_id) DO NOTHING"
        )
        # Post ids are not unique in the table (a pasted post may name one): a post is created
        # only where none exists, under a lock that keeps two importers from both creating it.
        cursor.execute("LOCK TABLE notes_post IN SHARE ROW EXCLUSIVE MODE")
        sql, params = _insert_sql(
            Post,
            {"external_id": "s.tweet", "text": "s.body", "text_hash": "s.hash", "source_url": "s.url",
             "posted_at": "s.posted_at", "text_available": "false"},
            "cn_post_stage s WHERE NOT EXISTS (SELECT FROM notes_post p WHERE p.external_id = s.tweet)",
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


def _status_chunk(file: str, header: list[str], text: str, first_line: int, report: cni.ImportReport) -> None:
    """One block of a status-history file: each imported note's current status and its status
    changes with their times (those of `import_status_history`), and every row kept for the
    delay analytics (`status_history_store`'s rows), set-based."""
    read = cio.ReadReport()
    rows = cni._clean_rows(read.rows(cio.read_status_history_text(file, header, text, first_line)), (), report,
                           "status history", block=text)  # fmt: skip
    latest = {h.note_id: h for h in rows}
    report.skipped.update({f"status history: {k}": v for k, v in read.skipped.items()})
    statuses: list[tuple[str, str]] = []
    events: list[tuple[int, str, str, str, datetime]] = []
    history: list[tuple[Any, ...]] = []
    source = download_file.data_name(Path(file))  # the TSV's name, zipped or not
    for h in latest.values():
        ext = str(h.note_id)
        previous = NoteStatus.NEEDS_MORE_RATINGS.value
        timed = [
            (ms, status)
            for ms, status in (
                (h.first_non_nmr_ms, h.first_non_nmr_status),
                (h.most_recent_non_nmr_ms, h.most_recent_non_nmr_status),
                (h.current_status_ms, h.current_status),
            )
            if ms and status in _VALID
        ]
        for ms, status in sorted(timed):
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
        _stage(cursor, "cn_ext_stage", "ext text", [(str(i),) for i in latest])
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
        report.skipped["status history: note not imported"] += len(latest) - known
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
