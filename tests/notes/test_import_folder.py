"""import_communitynotes FOLDER: the whole download in one command, equal to the file-by-file
path and to an independent reading of the TSVs, resumed after a kill mid-shard, bad files refused."""

from __future__ import annotations

import csv
import io
import os
import signal
import subprocess
import sys
import time
import zipfile
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from crowdnotes_site.lib.communitynotes import scoring
from crowdnotes_site.lib.communitynotes.data import synthetic_download as download_synth
from notes.models import (
    ImportCheckpoint,
    ImportedNoteHistory,
    Note,
    NoteStatus,
    NoteStatusChange,
    Participant,
    Post,
    Rating,
)
from notes.scoring import reader as scoring_reader
from notes.scoring import selectors as scoring_selectors
from notes.scoring import services as scoring_services
from tests.support import worker as worker_support

SCALE = 0.0005  # ~1,250 notes, ~90 K rating lines in 8 shards


@pytest.fixture(scope="module")
def download(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("download")
    download_synth.main([str(folder), "--scale", str(SCALE), "--seed", "0"])
    return folder


@pytest.fixture(scope="module")
def zipped(download: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same download as X publishes it: each TSV alone in a zip of its name."""
    return _zip_folder(download, tmp_path_factory.mktemp("zipped"))


def _zip_folder(download: Path, to: Path) -> Path:
    to.mkdir(exist_ok=True)
    for f in download.glob("*.tsv"):
        _write_zip(to / f"{f.stem}.zip", f"2025/06/16/{f.stem}/{f.name}", f.read_bytes())
    return to


def _write_zip(path: Path, member: str, data: bytes) -> None:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as zf:
        zf.writestr(member, data)


def _import(*args: str) -> str:
    out = io.StringIO()
    call_command("import_communitynotes", *args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def _tsv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh, delimiter="\t", quoting=csv.QUOTE_NONE))


def _expected_ratings(folder: Path) -> set[tuple[object, ...]]:
    """The ratings an import must hold, read with the csv module alone: rows of notes in the
    notes file, with a level, the later row of a repeated (note, rater) pair winning."""
    notes = {r["noteId"] for r in _tsv(folder / "notes-00000.tsv")}
    latest: dict[tuple[str, str], tuple[object, ...]] = {}
    for shard in sorted(folder.glob("ratings-*.tsv")):
        for r in _tsv(shard):
            level = r["helpfulnessLevel"]
            if r["noteId"] not in notes or level not in ("HELPFUL", "SOMEWHAT_HELPFUL", "NOT_HELPFUL"):
                continue
            tags = tuple(sorted(k for k, v in r.items() if v == "1" and k.startswith(("helpful", "notHelpful"))))
            latest[r["noteId"], r["raterParticipantId"]] = (
                r["noteId"], r["raterParticipantId"], level, int(r["createdAtMillis"]), tags,
            )  # fmt: skip
    return set(latest.values())


def _ratings() -> set[tuple[object, ...]]:
    rows = Rating.objects.values_list("note__external_id", "rater__external_id", "level", "created_at", "tags")
    return {(n, u, lv, int(at.timestamp() * 1000 + 0.5), tuple(sorted(tags))) for n, u, lv, at, tags in rows}


def _tables() -> dict[str, set[tuple[object, ...]]]:
    """Everything an import writes, by natural keys (no database ids)."""
    return {
        "notes": set(
            Note.objects.values_list(
                "external_id", "post__external_id", "author__external_id", "text", "classification", "created_at",
                "status", "num_ratings",
            )
        ),
        "evidence": {(n, tuple(u)) for n, u in Note.objects.values_list("external_id", "evidence_urls")},
        "posts": set(
            Post.objects.values_list("external_id", "text", "text_hash", "source_url", "posted_at", "text_available")
        ),
        "participants": {(p,) for p in Participant.objects.values_list("external_id", flat=True)},
        "changes": set(
            NoteStatusChange.objects.values_list("note__external_id", "previous_status", "status", "changed_at")
        ),
        "history": set(
            ImportedNoteHistory.objects.values_list(
                "note_external_id", "created_at", "first_verdict_at", "first_verdict_status", "current_status",
                "source_file",
            )
        ),
        "ratings": _ratings(),
    }  # fmt: skip


def _note_indexes() -> set[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexname FROM pg_indexes WHERE tablename = 'notes_note'")
        return {name for (name,) in cursor.fetchall()}


def _empty_tables() -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "TRUNCATE notes_rating, notes_notestatuschange, notes_note, notes_post, notes_participant, "
            "notes_importednotehistory, notes_importcheckpoint CASCADE"
        )


@pytest.mark.django_db(transaction=True)
def test_the_folder_import_equals_the_file_by_file_import_and_the_files(download: Path, tmp_path: Path) -> None:
    migrated = _note_indexes()
    output = _import(str(download))
    assert _note_indexes() == migrated  # left out while the empty notes table filled, then built
    notes = _tsv(download / "notes-00000.tsv")
    history = _tsv(download / "noteStatusHistory-00000.tsv")
    assert f"notes upserted: {len(notes)}" in output
    assert Note.objects.count() == len(notes)
    assert Post.objects.count() == len({n["tweetId"] for n in notes})
    assert ImportedNoteHistory.objects.count() == len(history)
    imported = {n["noteId"] for n in notes}
    assert f"skipped (status history: note not imported): {sum(h['noteId'] not in imported for h in history)}" in output
    assert "files not imported (userEnrollment): 1" in output and "files not imported (noteRequests): 1" in output
    expected = _expected_ratings(download)
    assert _ratings() == expected and f"ratings upserted: {len(expected)}" in output
    assert not ImportCheckpoint.objects.exists()
    by_folder = _tables()
    # The same download through the older file-by-file path (ORM notes and status history).
    shards = tmp_path / "ratings"
    shards.mkdir()
    for shard in download.glob("ratings-*.tsv"):
        (shards / shard.name).symlink_to(shard)
    _empty_tables()
    _import(
        "--notes", str(download / "notes-00000.tsv"), "--ratings", str(shards),
        "--status-history", str(download / "noteStatusHistory-00000.tsv"),
    )  # fmt: skip
    assert _tables() == by_folder
    # Idempotent: a second folder import changes nothing.
    again = _import(str(download))
    assert "ratings inserted or changed: 0" in again and "status changes added: 0" in again
    assert _tables() == by_folder


def _run_import(folder: Path, *extra: str) -> subprocess.Popen[str]:
    env = {
        **os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings",
        "DATABASE_URL": worker_support.test_database_url(),
    }  # fmt: skip
    return subprocess.Popen(
        [sys.executable, "manage.py", "import_communitynotes", str(folder), *extra],
        cwd=worker_support.ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


@pytest.mark.parametrize("form", ["tsv", "zip"])
@pytest.mark.django_db(transaction=True)
def test_an_import_killed_mid_shard_resumes_with_nothing_duplicated_or_lost(
    download: Path, zipped: Path, form: str
) -> None:
    folder = zipped if form == "zip" else download
    migrated = _note_indexes()
    proc = _run_import(folder, "--chunk-lines", "500")
    deadline = time.monotonic() + 60
    mid_shard = None
    while time.monotonic() < deadline and proc.poll() is None:
        mid_shard = ImportCheckpoint.objects.filter(
            key__startswith="ratings:", key__contains="ratings-00002", lines_done__gt=0, finished=False
        ).first()
        if mid_shard is not None:
            proc.send_signal(signal.SIGKILL)
            break
        time.sleep(0.02)
    assert proc.wait(timeout=30) == -signal.SIGKILL, proc.stderr.read() if proc.stderr else ""
    assert mid_shard is not None
    # Killed inside shard 2: shards 0 and 1 are marked done, shard 2 has a committed offset.
    left = {c.key.split(":")[1].rsplit("/", 1)[-1]: c for c in ImportCheckpoint.objects.all()}
    assert left[f"ratings-00000.{form}"].finished and left[f"ratings-00001.{form}"].finished
    stopped = left[f"ratings-00002.{form}"]
    assert not stopped.finished and stopped.bytes_done > 0
    partial = Rating.objects.count()
    expected = _expected_ratings(download)
    assert 0 < partial < len(expected)
    # The notes' read indexes are out until the import ends: the rerun builds them.
    assert "note_queue_min_side" not in _note_indexes() and "notes_note_external_id_key" in _note_indexes()
    progress = io.StringIO()
    call_command("import_communitynotes", str(folder), "--chunk-lines", "500", stdout=io.StringIO(), stderr=progress)
    said = progress.getvalue()
    assert ("ratings-00007.zip: checked, read whole (" in said) == (form == "zip")
    assert f"ratings-00000.{form}: imported by an earlier run of this import, skipped" in said
    resumed = f"ratings-00002.{form}: resuming after {stopped.lines_done:,} lines (byte {stopped.bytes_done:,})"
    assert resumed in said
    # A zip's member cannot seek: the resume reads up to the offset, and says so.
    assert ("a zip cannot seek: its bytes before that are read and discarded" in said) == (form == "zip")
    assert _ratings() == expected  # exactly the rows of an uninterrupted import
    assert _note_indexes() == migrated
    assert Rating.objects.count() == len(expected)
    assert Note.objects.filter(num_ratings__gt=0).count() == len({r[0] for r in expected})
    assert ImportedNoteHistory.objects.count() == len(_tsv(download / "noteStatusHistory-00000.tsv"))
    assert not ImportCheckpoint.objects.exists()


def _copy_download(download: Path, to: Path) -> Path:
    to.mkdir()
    for f in download.glob("*.tsv"):
        (to / f.name).write_bytes(f.read_bytes())
    return to


@pytest.mark.django_db(transaction=True)
def test_a_truncated_shard_or_another_schema_is_refused_before_anything_is_written(
    download: Path, tmp_path: Path
) -> None:
    folder = _copy_download(download, tmp_path / "bad")
    shard = folder / "ratings-00005.tsv"
    data = shard.read_bytes()
    shard.write_bytes(data[: data.rindex(b"\n", 0, len(data) - 1) + 20])  # cut inside the last row
    lines = data.count(b"\n")
    with pytest.raises(CommandError, match=rf"ratings-00005.tsv:{lines}: the file ends inside a row"):
        _import(str(folder))
    assert not Note.objects.exists() and not Rating.objects.exists()
    shard.write_bytes(data)
    status = folder / "noteStatusHistory-00000.tsv"
    text = status.read_text()
    status.write_text(text.replace("firstNonNMRStatus", "firstStatus", 1))  # another year's header
    with pytest.raises(CommandError, match=r"noteStatusHistory-00000.tsv:1: the header lacks firstNonNMRStatus"):
        _import(str(folder))
    assert not Note.objects.exists()
    status.write_text(text)  # fixed: the import runs
    assert f"ratings upserted: {len(_expected_ratings(download))}" in _import(str(folder))


@pytest.mark.django_db(transaction=True)
def test_nul_bytes_and_bad_rows_in_the_folder_are_counted_skips(download: Path, tmp_path: Path) -> None:
    folder = _copy_download(download, tmp_path / "nul")
    notes = (folder / "notes-00000.tsv").read_text().splitlines(True)
    fields = notes[3].split("\t")
    fields[1] = fields[1][:5] + "\x00" + fields[1][5:]  # a NUL in an author id: the note is skipped
    notes[3] = "\t".join(fields)
    (folder / "notes-00000.tsv").write_text("".join(notes))
    ratings = (folder / "ratings-00003.tsv").read_text().splitlines(True)
    ratings[10] = ratings[10].replace("\t", "\x00\t", 1)  # a NUL in a noteId
    ratings.insert(20, "1\t2\n")  # a row with the wrong number of fields
    (folder / "ratings-00003.tsv").write_text("".join(ratings))
    history = (folder / "noteStatusHistory-00000.tsv").read_text().splitlines(True)
    history[4] = history[4].replace("\t", "\x00\t", 1)
    (folder / "noteStatusHistory-00000.tsv").write_text("".join(history))
    output = _import(str(folder))
    assert "skipped (notes: control character (e.g. NUL) in author_id): 1" in output
    assert "skipped (ratings: control character (e.g. NUL) in the line): 1" in output
    assert "skipped (ratings: wrong number of fields): 1" in output
    assert "skipped (status history: bad noteId): 1" in output
    assert Note.objects.count() == len(notes) - 2
    assert Rating.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_zipped_folder_imports_exactly_what_its_tsvs_import(download: Path, zipped: Path) -> None:
    from_tsvs = _import(str(download))
    tables = _tables()
    assert Rating.objects.count() == len(_expected_ratings(download))
    _empty_tables()
    from_zips = _import(str(zipped))
    assert from_zips == from_tsvs  # every count and skip of the report
    assert _tables() == tables  # every row (the kept history names the TSV, zipped or not)
    assert not ImportCheckpoint.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_bad_files_in_zips_are_refused_as_in_tsvs_before_anything_is_written(download: Path, tmp_path: Path) -> None:
    folder = _zip_folder(download, tmp_path / "bad")
    data = (download / "ratings-00005.tsv").read_bytes()
    shard = folder / "ratings-00005.zip"
    _write_zip(shard, "ratings-00005.tsv", data[: data.rindex(b"\n", 0, len(data) - 1) + 20])  # cut in a row
    lines = data.count(b"\n")
    with pytest.raises(CommandError, match=rf"ratings-00005.zip:{lines}: the file ends inside a row"):
        _import(str(folder))
    text = (download / "noteStatusHistory-00000.tsv").read_text()
    _write_zip(shard, "ratings-00005.tsv", data)
    status = folder / "noteStatusHistory-00000.zip"
    _write_zip(status, "noteStatusHistory-00000.tsv", text.replace("firstNonNMRStatus", "firstStatus", 1).encode())
    with pytest.raises(CommandError, match=r"noteStatusHistory-00000.zip:1: the header lacks firstNonNMRStatus"):
        _import(str(folder))
    assert not Note.objects.exists() and not Rating.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_corrupt_or_cut_zip_is_refused_naming_it_and_imports_once_fetched_again(
    download: Path, tmp_path: Path
) -> None:
    folder = _zip_folder(download, tmp_path / "corrupt")
    shard = folder / "ratings-00003.zip"
    good = shard.read_bytes()
    with zipfile.ZipFile(shard) as zf:
        (info,) = zf.infolist()
    start = info.header_offset + 30 + len(info.filename.encode())  # the deflate data
    middle = start + info.compress_size // 2
    shard.write_bytes(good[:middle] + bytes([good[middle] ^ 0xFF]) + good[middle + 1 :])  # one byte flipped
    with pytest.raises(
        CommandError, match=r"ratings-00003.zip: the zip is corrupt or truncated \(.+\); fetch it again"
    ):
        _import(str(folder))
    assert not Note.objects.exists() and not Rating.objects.exists() and not ImportCheckpoint.objects.exists()
    shard.write_bytes(good[:middle] + good[middle + 1000 :])  # bytes lost inside: the directory points amiss
    with pytest.raises(CommandError, match=r"ratings-00003.zip: cannot read its member .+: a corrupt or truncated zip"):
        _import(str(folder))
    shard.write_bytes(good[: len(good) // 2])  # a download cut short: no zip directory
    with pytest.raises(CommandError, match=r"ratings-00003.zip: not a readable zip"):
        _import(str(folder))
    assert not Note.objects.exists() and not Rating.objects.exists()
    shard.write_bytes(good)  # fetched again: the import runs
    assert f"ratings upserted: {len(_expected_ratings(download))}" in _import(str(folder))


def test_a_zip_must_hold_the_one_tsv_of_its_name_and_a_file_only_one_form(download: Path, tmp_path: Path) -> None:
    folder = _zip_folder(download, tmp_path / "forms")
    shard = folder / "ratings-00001.zip"
    data = (download / "ratings-00001.tsv").read_bytes()
    with zipfile.ZipFile(shard, "w") as zf:
        zf.writestr("ratings-00001.tsv", data)
        zf.writestr("extra/ratings-00009.tsv", data)
    with pytest.raises(
        CommandError, match=r"ratings-00001.zip: the zip holds 2 TSVs \(ratings-00001.tsv, extra/ratings-00009.tsv\); "
        r"a download zip holds exactly one, ratings-00001.tsv",
    ):  # fmt: skip
        _import(str(folder))
    with zipfile.ZipFile(shard, "w") as zf:
        zf.writestr("README.txt", "no data")
    with pytest.raises(CommandError, match=r"ratings-00001.zip: the zip holds no TSV"):
        _import(str(folder))
    _write_zip(shard, "ratings-00002.tsv", data)
    with pytest.raises(
        CommandError, match=r"ratings-00001.zip: the zip holds ratings-00002.tsv, not ratings-00001.tsv"
    ):
        _import(str(folder))
    _write_zip(shard, "ratings-00001.tsv", data)
    (folder / "ratings-00001.tsv").write_bytes(data)
    with pytest.raises(CommandError, match=r"ratings-00001.tsv and ratings-00001.zip are the same file twice"):
        _import(str(folder))


def test_a_folder_without_a_notes_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "ratings-00000.tsv").write_text("noteId\traterParticipantId\tcreatedAtMillis\thelpfulnessLevel\n")
    with pytest.raises(CommandError, match="no notes-"):
        _import(str(tmp_path))


def _sorted_ratings(r: scoring.Ratings) -> list[tuple[object, ...]]:
    cols = (r.note, r.rater, r.value, r.created_at_ms, r.incorrect_tag, r.any_not_helpful_tag, r.not_helpful_tags)
    return sorted(zip(*(np.asarray(c).tolist() for c in cols), strict=True))


@pytest.mark.django_db
def test_rescoring_an_imported_download_reads_by_binary_copy_what_the_orm_reads(
    download: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rescoring's binary COPY readers (notes, participants, ratings into compact arrays)
    give the arrays of the ORM queries, and the statuses it writes are the scorer's on those."""
    _import(str(download))
    now = datetime(2026, 3, 1, tzinfo=UTC)
    lock = scoring_selectors.APP_SCORING_CONFIG.lock_after_days
    by_copy = scoring_reader.scoring_inputs(now=now, lock_after_days=lock, binary=True)
    by_orm = scoring_reader.scoring_inputs(now=now, lock_after_days=lock, binary=False)
    assert by_copy.ratings.value.dtype == np.float32 and by_copy.ratings.rater.dtype == np.int32
    assert len(by_copy.ratings.value) == Rating.objects.count() > 80_000
    assert _sorted_ratings(by_copy.ratings) == _sorted_ratings(by_orm.ratings)
    for name in ("note_pks", "participant_pks", "previous_status", "previous_num_ratings", "previous_sides",
                 "previous_explanation_md5"):  # fmt: skip
        assert np.array_equal(getattr(by_copy, name), getattr(by_orm, name)), name
    for name in ("not_misleading", "created_at_ms", "author", "previous_status", "last_non_nmr_status_ms",
                 "locked_status"):  # fmt: skip
        assert np.array_equal(getattr(by_copy.meta, name), getattr(by_orm.meta, name)), name
    expected = scoring.score(
        by_orm.ratings, by_orm.meta, len(by_orm.participant_pks), scoring_selectors.APP_SCORING_CONFIG,
        now_ms=int(now.timestamp() * 1000),
    )  # fmt: skip
    monkeypatch.setattr(scoring_services, "_UPDATE_BY_COPY_ROWS", 100)  # the writes go by COPY + UPDATE … FROM
    summary = scoring_services.notes_rescore(now=now)
    assert summary["ratings"] == len(by_orm.ratings.value) and summary["notes_updated"] > 0
    written = dict(Note.objects.values_list("pk", "status"))
    names = [scoring.STATUS_NAMES[s] for s in expected.status.tolist()]
    assert [written[pk] for pk in by_orm.note_pks.tolist()] == names
    assert {NoteStatus.HELPFUL, NoteStatus.NOT_HELPFUL, NoteStatus.NEEDS_MORE_RATINGS} <= set(names)
    # The notes are from 2023-2024: from the second run on their statuses are locked (older than
    # the lock age), which changes their explanation once; the third run writes nothing.
    scoring_services.notes_rescore(now=now)
    assert scoring_services.notes_rescore(now=now)["notes_updated"] == 0
    assert [written[pk] for pk in by_orm.note_pks.tolist()] == list(
        Note.objects.order_by("pk").values_list("status", flat=True)
    )
