"""import_communitynotes on every sample file, idempotence, and score_communitynotes without a database."""

from __future__ import annotations

import csv
import functools
import io
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.db import IntegrityError, connection, transaction

from crowdnotes_site.lib.communitynotes.data import ratings as cnr
from crowdnotes_site.lib.communitynotes.data import synthetic
from notes.communitynotes import importer as cni
from notes.models import (
    ImportCheckpoint,
    Note,
    NoteStatus,
    NoteStatusChange,
    Participant,
    Post,
    Rating,
    RatingLevel,
)
from tests.lib.scoring import test_ratings_rule as rule

HISTORY = Path("mcroston") / "noteStatusHistory-00000.tsv"  # under the communitynotes data


def _import(*args: str) -> str:
    out = io.StringIO()
    call_command("import_communitynotes", *args, stdout=out)
    return out.getvalue()


class Interrupted(Exception):
    """The failure `interrupted_after` injects: the import stops as a killed one would."""


@pytest.fixture
def interrupted_after(monkeypatch: pytest.MonkeyPatch) -> Callable[[int], Any]:
    """`with interrupted_after(n): import…`: the ratings import fails inside its chunk after `n`
    chunks have committed (that chunk's transaction rolls back, as when the process dies), and
    the next import runs normally."""

    @contextmanager
    def interrupt(chunks: int) -> Iterator[None]:
        real = cni.write_ratings_chunk
        written = 0

        def write(*args: Any, **kwargs: Any) -> None:
            nonlocal written
            if written == chunks:
                raise Interrupted
            real(*args, **kwargs)
            written += 1

        monkeypatch.setattr(cni, "write_ratings_chunk", write)
        with pytest.raises(Interrupted):
            yield
        monkeypatch.setattr(cni, "write_ratings_chunk", real)

    return interrupt


def _counts() -> tuple[int, ...]:
    return tuple(m.objects.count() for m in (Post, Note, Participant, Rating, NoteStatusChange))


@pytest.mark.django_db
def test_it_imports_the_public_samples_idempotently(cn_data: Path) -> None:
    args = (
        "--notes",
        str(cn_data / "colin-fraser" / "notes-00000.tsv"),
        "--ratings",
        str(cn_data / "colin-fraser" / "ratings-00000.tsv"),
    )
    output = _import(*args, "--status-history", str(cn_data / HISTORY))
    assert "notes upserted: 4880" in output
    assert "ratings upserted: 13300" in output
    assert "skipped (ratings: no helpfulness answer): 259" in output
    assert "skipped (status history: note not imported)" in output
    assert Note.objects.count() == 4880 and Rating.objects.count() == 13300
    note = Note.objects.get(external_id="1354870745806086150")
    assert note.author is not None and note.author.external_id == "7EDD07641861C52611BCEB9F9BE7CD21"
    assert note.post.external_id == "1353031711349739523"
    assert note.evidence_urls and note.evidence_urls[0].startswith("https://twitter.com/search")
    assert note.created_at.year == 2021
    # The public data has no post text: the post is marked, and its time comes from its id.
    assert note.post.text_available is False and not Post.objects.filter(text_available=True).exists()
    assert note.post.posted_at is not None and note.post.posted_at.isoformat().startswith("2021-01-23T")
    rated = Note.objects.get(external_id="1352796878438424576")
    assert rated.num_ratings == Rating.objects.filter(note=rated).count() > 0
    assert Note.objects.exclude(status=NoteStatus.NEEDS_MORE_RATINGS).exists()  # statuses from the history
    # The notes (one batch) create their authors and posts in sorted order, not in the order of a set
    # (which changes with every process's string hashing): the same file gives the same keys, and
    # what reads rows in key order (the jury's training and pool) repeats from run to run.
    authors = list(Participant.objects.filter(notes_authored__isnull=False).distinct().order_by("pk")
                   .values_list("external_id", flat=True))  # fmt: skip
    posts = list(Post.objects.order_by("pk").values_list("external_id", flat=True))
    assert len(authors) > 100 and authors == sorted(authors)
    assert len(posts) > 100 and posts == sorted(posts)
    first = _counts()
    again = _import(*args, "--status-history", str(cn_data / HISTORY))
    assert "notes upserted: 4880" in again
    assert _counts() == first


@pytest.mark.django_db
def test_it_updates_on_reimport(tmp_path: Path) -> None:
    data = synthetic.generate(1500, seed=8)
    notes, ratings = synthetic.write_tsv(data, tmp_path / "v1")
    _import("--notes", str(notes), "--ratings", str(ratings))
    first = _counts()
    # The same ratings, all changed to Not helpful and split over two files in a folder.
    folder = tmp_path / "ratings"
    folder.mkdir()
    lines = ratings.read_text().splitlines(keepends=True)
    changed = [
        line.replace("\tHELPFUL\t", "\tNOT_HELPFUL\t").replace("\tSOMEWHAT_HELPFUL\t", "\tNOT_HELPFUL\t")
        for line in lines
    ]
    (folder / "ratings-00000.tsv").write_text("".join(changed[:700]))
    (folder / "ratings-00001.tsv").write_text(changed[0] + "".join(changed[700:]))
    _import("--notes", str(notes), "--ratings", str(folder))
    assert _counts() == first
    assert set(Rating.objects.values_list("level", flat=True)) == {RatingLevel.NOT_HELPFUL}


@pytest.mark.django_db
def test_it_records_status_history_with_times(tmp_path: Path, cn_data: Path) -> None:
    with (cn_data / HISTORY).open() as fh:
        rows = [
            r for r in csv.DictReader(fh, delimiter="\t") if r["timestampMillisOfFirstNonNMRStatus"] not in ("", "-1")
        ]
    picked = rows[:3]
    notes = tmp_path / "notes.tsv"
    notes.write_text(
        "noteId\tnoteAuthorParticipantId\tcreatedAtMillis\ttweetId\tclassification\tsummary\n"
        + "".join(
            f"{r['noteId']}\t{r['participantId']}\t1653000000000\t{i}\tMISINFORMED_OR_POTENTIALLY_MISLEADING\tn{i}\n"
            for i, r in enumerate(picked)
        )
    )
    _import("--notes", str(notes), "--status-history", str(cn_data / HISTORY))
    for r in picked:
        note = Note.objects.get(external_id=r["noteId"])
        assert note.status == r["currentStatus"]
        first = NoteStatusChange.objects.filter(note=note).order_by("changed_at").first()
        assert first is not None
        assert first.status == r["firstNonNMRStatus"]
        assert int(first.changed_at.timestamp() * 1000) == int(r["timestampMillisOfFirstNonNMRStatus"])
    before = NoteStatusChange.objects.count()
    _import("--notes", str(notes), "--status-history", str(cn_data / HISTORY))
    assert NoteStatusChange.objects.count() == before


@pytest.mark.django_db
def test_it_caps_an_imported_note_summary_and_counts_the_cut(tmp_path: Path) -> None:
    from crowdnotes_site.lib.text_rules import IMPORTED_NOTE_MAX_CHARS

    huge = "Vitamin D does not cure COVID-19. " * 31_000 + "https://example.org/late-link"  # about 1 MB
    notes = tmp_path / "notes.tsv"
    notes.write_text(
        "noteId\tnoteAuthorParticipantId\tcreatedAtMillis\ttweetId\tclassification\tsummary\n"
        f"1\tA\t1700000000000\t9\tMISINFORMED_OR_POTENTIALLY_MISLEADING\t{huge}\n"
        "2\tB\t1700000000000\t9\tMISINFORMED_OR_POTENTIALLY_MISLEADING\tShort. https://example.org/a\n"
    )
    output = _import("--notes", str(notes))
    assert "notes upserted: 2" in output
    assert "cut (notes: summary over 2,000 characters): 1" in output
    long_note, short_note = Note.objects.order_by("external_id")
    assert len(long_note.text) == IMPORTED_NOTE_MAX_CHARS and long_note.text.endswith("…")
    assert long_note.text.startswith("Vitamin D does not cure COVID-19.")
    assert long_note.evidence_urls == []  # the link past the cut is not kept either
    assert short_note.text == "Short. https://example.org/a"
    assert short_note.evidence_urls == ["https://example.org/a"]


@pytest.mark.django_db
def test_it_skips_ratings_of_unknown_notes(tmp_path: Path) -> None:
    ratings = tmp_path / "ratings.tsv"
    ratings.write_text("noteId\traterParticipantId\tcreatedAtMillis\thelpfulnessLevel\n42\tA\t1\tHELPFUL\n")
    notes = tmp_path / "notes.tsv"
    notes.write_text("noteId\tnoteAuthorParticipantId\tcreatedAtMillis\ttweetId\tclassification\tsummary\n")
    output = _import("--notes", str(notes), "--ratings", str(ratings))
    assert "skipped (ratings: note not imported): 1" in output
    assert not Rating.objects.exists()


def test_it_scores_files_without_the_database(tmp_path: Path, cn_data: Path) -> None:
    # No django_db mark: any database access would fail this test.
    out = io.StringIO()
    call_command(
        "score_communitynotes", "--notes", str(cn_data / "colin-fraser" / "notes-00000.tsv"), "--ratings", str(cn_data / "colin-fraser" / "ratings-00000.tsv"),
        "--outdir", str(tmp_path), stdout=out,
    )  # fmt: skip
    assert "notes_written: 4880" in out.getvalue()
    with (tmp_path / "scored_notes.tsv").open() as fh:
        header = next(csv.reader(fh, delimiter="\t"))
    assert header[:5] == ["noteId", "numRatings", "coreNoteIntercept", "coreNoteFactor1", "coreRatingStatus"]
    assert header[5:] == ["activeRules", "decidedBy", "noteInterceptMax", "negFactorRatingCount",
                          "posFactorRatingCount", "netMinHelpful", "tagOutliers", "explanation"]  # fmt: skip
    assert (
        (tmp_path / "helpfulness_scores.tsv")
        .read_text()
        .startswith("raterParticipantId\tcoreRaterIntercept\tcoreRaterFactor1\n")
    )


def _ratings_table() -> set[tuple[object, ...]]:
    rows = Rating.objects.values_list("note__external_id", "rater__external_id", "level", "tags", "created_at")
    return {(n, u, level, tuple(tags), at) for n, u, level, tags, at in rows}


@pytest.mark.django_db
def test_copy_import_matches_the_orm_path_on_the_real_sample(cn_data: Path) -> None:
    notes = str(cn_data / "colin-fraser" / "notes-00000.tsv")
    ratings = cn_data / "colin-fraser" / "ratings-00000.tsv"
    _import("--notes", notes)
    orm = cni.ImportReport()
    cni.import_ratings(ratings, orm)
    by_orm = _ratings_table()
    counts_orm = dict(Note.objects.values_list("external_id", "num_ratings"))
    Rating.objects.all().delete()
    Note.objects.update(num_ratings=0)
    bulk = cni.ImportReport()
    cni.import_ratings_copy(ratings, bulk, chunk_lines=4000)  # several chunks
    assert _ratings_table() == by_orm
    assert dict(Note.objects.values_list("external_id", "num_ratings")) == counts_orm
    assert bulk.counts["ratings upserted"] == orm.counts["ratings upserted"] == 13300
    assert {k: v for k, v in bulk.skipped.items() if v} == {k: v for k, v in orm.skipped.items() if v}
    assert bulk.skipped["ratings: no helpfulness answer"] == 259
    assert not ImportCheckpoint.objects.exists()


@pytest.mark.django_db
def test_a_bulk_load_counts_each_notes_ratings_as_it_writes_them(tmp_path: Path) -> None:
    data = synthetic.generate(3000, seed=9)
    notes, ratings = synthetic.write_tsv(data, tmp_path)
    lines = ratings.read_text().splitlines(keepends=True)
    lines.append(lines[1])  # the same pair again in the last chunk: the first row goes at the end
    ratings.write_text("".join(lines))
    _import("--notes", str(notes))
    progress: list[str] = []
    cni.import_ratings_copy(ratings, cni.ImportReport(), chunk_lines=1000, progress=progress.append)
    assert any("notes' rating counts (counted as the chunks were written)" in line for line in progress)
    in_table = Counter(Rating.objects.values_list("note_id", flat=True))
    assert Rating.objects.count() == len(data.value)
    assert {n.pk: n.num_ratings for n in Note.objects.all()} == {n.pk: in_table[n.pk] for n in Note.objects.all()}
    # A load into a table that already holds ratings counts by a pass over the table.
    Rating.objects.filter(pk=Rating.objects.order_by("pk").values("pk")[:1]).delete()
    Note.objects.update(num_ratings=0)
    cni.import_ratings_copy(ratings, cni.ImportReport(), chunk_lines=1000, progress=progress.append)
    assert "notes' rating counts (a pass over the ratings table)" in progress[-2]
    in_table = Counter(Rating.objects.values_list("note_id", flat=True))
    assert {n.pk: n.num_ratings for n in Note.objects.all()} == {n.pk: in_table[n.pk] for n in Note.objects.all()}


@pytest.mark.django_db
def test_copy_import_resumes_after_an_interruption_and_is_idempotent(
    tmp_path: Path, interrupted_after: Callable[[int], Any]
) -> None:
    data = synthetic.generate(3000, seed=9)
    notes, ratings = synthetic.write_tsv(data, tmp_path)
    # A later duplicate row for the same (note, rater) in the next chunk replaces the first.
    lines = ratings.read_text().splitlines(keepends=True)
    first = lines[1].split("\t")
    flipped = "NOT_HELPFUL" if first[4] != "NOT_HELPFUL" else "HELPFUL"
    lines.append("\t".join([*first[:4], flipped, *first[5:]]))
    lines.insert(5, "not\ta\tvalid\n")  # wrong number of fields
    ratings.write_text("".join(lines))
    _import("--notes", str(notes))
    report = cni.ImportReport()
    progress: list[str] = []
    with interrupted_after(1):
        cni.import_ratings_copy(ratings, report, chunk_lines=1000, progress=progress.append)
    assert ImportCheckpoint.objects.get().lines_done == 1000
    assert 0 < Rating.objects.count() < len(data.value)
    assert progress and "1,000 lines" in progress[0]
    resumed = cni.ImportReport()
    cni.import_ratings_copy(ratings, resumed, chunk_lines=1000, progress=progress.append)
    assert any("resuming after 1,000 lines" in line for line in progress)
    assert not ImportCheckpoint.objects.exists()
    assert Rating.objects.count() == len(data.value)
    assert report.counts["ratings upserted"] + resumed.counts["ratings upserted"] == len(data.value) + 1
    assert report.skipped["ratings: wrong number of fields"] + resumed.skipped["ratings: wrong number of fields"] == 1
    rating = Rating.objects.get(note__external_id=first[0], rater__external_id=first[1])
    assert rating.level == flipped
    assert Note.objects.get(external_id=first[0]).num_ratings == int(
        (data.note == int(first[0]) - 1_500_000_000_000_000_000).sum()
    )
    table = _ratings_table()
    again = cni.ImportReport()
    cni.import_ratings_copy(ratings, again, chunk_lines=1000)
    assert _ratings_table() == table  # idempotent: nothing new, nothing changed
    # Only the duplicated pair is written: its first row (chunk 1), then its later row (last chunk).
    assert again.counts["ratings inserted or changed"] == 2


@pytest.mark.django_db
def test_copy_import_keeps_backslashes_and_quotes_verbatim(tmp_path: Path) -> None:
    notes = tmp_path / "notes.tsv"
    notes.write_text(
        "noteId\tnoteAuthorParticipantId\tcreatedAtMillis\ttweetId\tclassification\tsummary\n"
        "1\tA\t1700000000000\t9\tMISINFORMED_OR_POTENTIALLY_MISLEADING\tx\n"
    )
    ratings = tmp_path / "ratings.tsv"
    ratings.write_text(
        "noteId\traterParticipantId\tcreatedAtMillis\thelpfulnessLevel\tnotHelpfulIncorrect\n"
        '1\tB\\N\t1700000000001\tNOT_HELPFUL\t1\n1\t"C\t1700000000002\tHELPFUL\t\n'
    )
    _import("--notes", str(notes))
    report = cni.ImportReport()
    cni.import_ratings_copy(ratings, report)
    rows = set(Rating.objects.values_list("rater__external_id", "level"))
    assert rows == {("B\\N", RatingLevel.NOT_HELPFUL), ('"C', RatingLevel.HELPFUL)}
    assert Rating.objects.get(rater__external_id="B\\N").tags == ["notHelpfulIncorrect"]


def _rating_schema() -> tuple[set[str], dict[str, bool]]:
    """notes_rating's index names, and its foreign keys with whether each is validated."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexname FROM pg_indexes WHERE tablename = 'notes_rating'")
        indexes = {name for (name,) in cursor.fetchall()}
        cursor.execute(
            "SELECT conname, convalidated FROM pg_constraint WHERE conrelid = 'notes_rating'::regclass AND contype = 'f'"
        )
        return indexes, dict(cursor.fetchall())


@pytest.mark.django_db
def test_exclusive_and_online_copy_paths_write_the_same_rows_and_keep_the_schema(cn_data: Path) -> None:
    notes = str(cn_data / "colin-fraser" / "notes-00000.tsv")
    ratings = cn_data / "colin-fraser" / "ratings-00000.tsv"
    _import("--notes", notes)
    schema = _rating_schema()
    # Three foreign keys: the note, the rater and the version rated.
    assert "notes_rating_rater_id_c193ac75" in schema[0] and len(schema[1]) == 3
    assert all(schema[1].values())
    # The note's own index is gone (migration 0010): the unique (note, rater) index serves it.
    assert not any(name.startswith("notes_rating_note_id") for name in schema[0])
    online = cni.ImportReport()
    cni.import_ratings_copy(ratings, online, chunk_lines=4000, exclusive=False)
    by_online = _ratings_table()
    counts_online = dict(Note.objects.values_list("external_id", "num_ratings"))
    Rating.objects.all().delete()
    Note.objects.update(num_ratings=0)
    exclusive = cni.ImportReport()
    cni.import_ratings_copy(ratings, exclusive, chunk_lines=4000)  # empty table: the rater index is deferred
    assert _ratings_table() == by_online
    assert dict(Note.objects.values_list("external_id", "num_ratings")) == counts_online
    assert exclusive.counts == online.counts and exclusive.skipped == online.skipped
    assert _rating_schema() == schema  # same indexes, keys back and validated
    again = cni.ImportReport()
    cni.import_ratings_copy(ratings, again, chunk_lines=4000)
    assert again.counts["ratings inserted or changed"] == 0 and _ratings_table() == by_online


def _synthetic_with_notes_imported(tmp_path: Path, seed: int) -> tuple[synthetic.SyntheticData, Path]:
    """3,000 synthetic ratings written as public TSVs, their notes imported: (data, ratings file)."""
    data = synthetic.generate(3000, seed=seed)
    notes, ratings = synthetic.write_tsv(data, tmp_path)
    _import("--notes", str(notes))
    return data, ratings


def _insert_rating_of_a_missing_note() -> None:
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
        cursor.execute(
            "INSERT INTO notes_rating (note_id, rater_id, level, tags, created_at, updated_at) "
            "SELECT -1, id, 'HELPFUL', '[]', now(), now() FROM notes_participant LIMIT 1"
        )


@pytest.mark.django_db
def test_an_interrupted_exclusive_import_keeps_keys_enforced_and_its_rerun_restores_the_schema(
    tmp_path: Path, interrupted_after: Callable[[int], Any]
) -> None:
    data, ratings = _synthetic_with_notes_imported(tmp_path, seed=10)
    schema = _rating_schema()
    with interrupted_after(2):
        cni.import_ratings_copy(ratings, cni.ImportReport(), chunk_lines=1000)
    indexes, keys = _rating_schema()
    # Deferred by the bulk load, not built yet: the rater index, the primary key and the unique pair.
    assert not indexes & {"notes_rating_rater_id_c193ac75", "notes_rating_pkey", "one_rating_per_rater_per_note"}
    assert set(keys) == set(schema[1]) and not any(keys.values())  # back, NOT VALID: new rows are checked
    with pytest.raises(IntegrityError):
        _insert_rating_of_a_missing_note()
    resumed = cni.ImportReport()
    cni.import_ratings_copy(ratings, resumed, chunk_lines=1000)  # resumes after 2,000 lines
    assert _rating_schema() == schema
    assert Rating.objects.count() == len(data.value)
    assert not ImportCheckpoint.objects.exists()


@pytest.mark.django_db
def test_an_online_import_after_an_interrupted_bulk_load_restores_the_keys_first(
    tmp_path: Path, interrupted_after: Callable[[int], Any]
) -> None:
    data, ratings = _synthetic_with_notes_imported(tmp_path, seed=10)
    schema = _rating_schema()
    with interrupted_after(1):
        cni.import_ratings_copy(ratings, cni.ImportReport(), chunk_lines=1000)
    assert "one_rating_per_rater_per_note" not in _rating_schema()[0]
    executed: list[str] = []

    def record(run: Any, sql: str, *args: Any) -> Any:
        executed.append(sql)
        return run(sql, *args)

    with connection.execute_wrapper(record):
        cni.import_ratings_copy(ratings, cni.ImportReport(), chunk_lines=1000, exclusive=False)
    # The constraints are back before the first row is written with ON CONFLICT (which needs them).
    first_write = next(i for i, sql in enumerate(executed) if "ON CONFLICT (note_id, rater_id)" in sql)
    assert any("one_rating_per_rater_per_note" in sql for sql in executed[:first_write])
    assert _rating_schema()[0] == schema[0] and Rating.objects.count() == len(data.value)


def _with_repeated_pairs(tmp_path: Path) -> tuple[Path, Path, list[str], list[str]]:
    """Synthetic files whose last chunk repeats one pair unchanged and one with another answer."""
    data = synthetic.generate(3000, seed=12)
    notes, ratings = synthetic.write_tsv(data, tmp_path)
    lines = ratings.read_text().splitlines(keepends=True)
    same, changed = lines[1].split("\t"), lines[2].split("\t")
    changed[4] = "NOT_HELPFUL" if changed[4] != "NOT_HELPFUL" else "HELPFUL"
    ratings.write_text("".join([*lines, "\t".join(same), "\t".join(changed)]))
    return notes, ratings, same, changed


@pytest.mark.django_db
def test_a_bulk_load_keeps_the_later_of_a_repeated_pair_and_counts_like_the_probing_path(tmp_path: Path) -> None:
    notes, ratings, same, changed = _with_repeated_pairs(tmp_path)
    _import("--notes", str(notes))
    schema = _rating_schema()
    online = cni.ImportReport()
    cni.import_ratings_copy(ratings, online, chunk_lines=1000, exclusive=False)  # probes every chunk
    by_online = _ratings_table()
    Rating.objects.all().delete()
    bulk = cni.ImportReport()
    cni.import_ratings_copy(ratings, bulk, chunk_lines=1000)  # empty table: bulk load
    assert _ratings_table() == by_online
    assert Rating.objects.get(note__external_id=changed[0], rater__external_id=changed[1]).level == changed[4]
    assert Rating.objects.filter(note__external_id=same[0], rater__external_id=same[1]).count() == 1
    # The unchanged repeat is not a write, the changed one is: as when each chunk probes.
    assert bulk.counts == online.counts
    assert bulk.counts["ratings inserted or changed"] == bulk.counts["ratings upserted"] - 1
    assert _rating_schema() == schema


@pytest.mark.django_db
def test_numpy_chunks_write_what_the_sql_chunks_write(
    tmp_path: Path, cn_data: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same files through the parser's vectorised path and through its line rule alone."""
    notes, ratings, _, _ = _with_repeated_pairs(tmp_path)
    _import("--notes", str(notes))
    _import("--notes", str(cn_data / "colin-fraser" / "notes-00000.tsv"))
    files = [ratings, cn_data / "colin-fraser" / "ratings-00000.tsv"]  # v1 answers, 21 tag columns
    parse = cnr.parse_block
    fast: list[bool] = []

    def spy(*args: Any, **kwargs: Any) -> cnr.RatingBlock:
        rows = parse(*args, **kwargs)
        fast.append(rows.slow_lines == 0)
        return rows

    def run(exclusive: bool) -> tuple[set[tuple[object, ...]], dict[str | None, int], cni.ImportReport]:
        Rating.objects.all().delete()
        Note.objects.update(num_ratings=0)
        report = cni.ImportReport()
        for path in files:
            cni.import_ratings_copy(path, report, chunk_lines=2000, exclusive=exclusive)
        return _ratings_table(), dict(Note.objects.values_list("external_id", "num_ratings")), report

    for exclusive, id_cache in ((True, cni.ID_CACHE_LIMIT), (True, 40), (False, cni.ID_CACHE_LIMIT)):
        monkeypatch.setattr(cni, "ID_CACHE_LIMIT", id_cache)  # 40: the cache empties itself often
        monkeypatch.setattr(cnr, "parse_block", spy)
        by_numpy = run(exclusive)
        assert fast and all(fast)  # every chunk of these files reads on the vectorised path
        monkeypatch.setattr(cnr, "parse_block", functools.partial(parse, line_by_line=True))
        by_sql = run(exclusive)
        assert by_numpy[:2] == by_sql[:2]
        assert by_numpy[2].counts == by_sql[2].counts and by_numpy[2].skipped == by_sql[2].skipped
        assert by_sql[2].skipped["ratings: no helpfulness answer"] == 259


@pytest.mark.django_db
def test_a_note_and_a_rater_deleted_during_an_exclusive_import_lose_their_ratings_as_a_cascade_would(
    tmp_path: Path,
) -> None:
    _, ratings = _synthetic_with_notes_imported(tmp_path, seed=13)
    cni.import_ratings_copy(ratings, cni.ImportReport(), chunk_lines=1000, exclusive=False)
    everything = _ratings_table()
    # A note and a rater with ratings in the first chunk and in later ones: after the first
    # chunk they are in the import's id cache, and their later ratings would point at nothing.
    rows = [line.split("\t") for line in ratings.read_text().splitlines()[1:]]
    first, later = rows[:1000], rows[1000:]
    note = next(r[0] for r in first if any(o[0] == r[0] for o in later))
    rater = next(r[1] for r in first if r[0] != note and any(o[1] == r[1] and o[0] != note for o in later))
    Rating.objects.all().delete()
    Note.objects.update(num_ratings=0)
    deleted: list[bool] = []

    def after_a_chunk(_line: str) -> None:
        if not deleted:
            Note.objects.filter(external_id=note).delete()
            Participant.objects.filter(external_id=rater).delete()
            deleted.append(True)

    report = cni.ImportReport()
    cni.import_ratings_copy(ratings, report, chunk_lines=1000, progress=after_a_chunk)
    # Deleting the participant also deletes the notes they wrote (cascade), with their ratings.
    notes_left = set(Note.objects.values_list("external_id", flat=True))
    raters_left = set(Participant.objects.values_list("external_id", flat=True))
    assert note not in notes_left and rater not in raters_left
    expected = {r for r in everything if r[0] in notes_left and r[1] in raters_left}
    assert len(expected) < len(everything)
    assert _ratings_table() == expected
    assert all(_rating_schema()[1].values())  # both foreign keys validated
    assert report.skipped["ratings: note or rater deleted during the import"] > 0


@pytest.mark.django_db
@pytest.mark.parametrize("ratings_path", ["copy", "rows"])
def test_a_nul_byte_skips_or_cleans_its_row_and_the_import_goes_on(
    cn_data: Path, tmp_path: Path, ratings_path: str
) -> None:
    """One NUL byte in one line of a notes or ratings TSV does not abort the import (PostgreSQL
    refuses NUL in text): a NUL in a note's text is removed (counted), a NUL in an id skips its row
    (counted), every other row is imported, and a rerun does the same."""
    notes_lines = (cn_data / "colin-fraser" / "notes-00000.tsv").read_text(encoding="utf-8").splitlines(True)
    ratings_lines = (cn_data / "colin-fraser" / "ratings-00000.tsv").read_text(encoding="utf-8").splitlines(True)
    # Line 5: a NUL inside the summary (the last column); line 6: a NUL inside the author's id.
    fields = notes_lines[5].split("\t")
    fields[-1] = fields[-1][:10] + "\x00" + fields[-1][10:]
    notes_lines[5] = "\t".join(fields)
    cleaned_id, cleaned_summary = fields[0], fields[-1].replace("\x00", "").rstrip("\r\n")
    fields = notes_lines[6].split("\t")
    skipped_note = fields[0]
    fields[1] = fields[1][:4] + "\x00" + fields[1][4:]
    notes_lines[6] = "\t".join(fields)
    # Rating line 1 (of a note that is imported): a NUL inside the rater's id.
    fields = ratings_lines[1].split("\t")
    rated_note, rater = fields[0], fields[1]
    fields[1] = rater[:4] + "\x00" + rater[4:]
    ratings_lines[1] = "\t".join(fields)
    of_skipped_note = sum(1 for line in ratings_lines[1:] if line.split("\t")[0] == skipped_note)
    notes_file, ratings_file = tmp_path / "notes-00000.tsv", tmp_path / "ratings-00000.tsv"
    notes_file.write_text("".join(notes_lines), encoding="utf-8")
    ratings_file.write_text("".join(ratings_lines), encoding="utf-8")
    args = ["--notes", str(notes_file), "--ratings", str(ratings_file)] + (
        ["--no-copy"] if ratings_path == "rows" else []
    )
    for _ in range(2):  # a rerun goes through the same way
        output = _import(*args)
        assert "notes upserted: 4879" in output
        assert "skipped (notes: control character (e.g. NUL) in author_id): 1" in output
        assert "cut (notes: control characters (e.g. NUL) removed from the text): 1" in output
        assert "skipped (ratings: control character (e.g. NUL) in " in output
        assert Note.objects.count() == 4879
        assert not Note.objects.filter(external_id=skipped_note).exists()
        assert Note.objects.get(external_id=cleaned_id).text == cleaned_summary
        # Every other rating: the 13,300 of the clean file less the NUL line and the skipped note's.
        assert Rating.objects.count() == 13300 - 1 - of_skipped_note
        assert not Rating.objects.filter(note__external_id=rated_note, rater__external_id=rater).exists()


@pytest.mark.django_db
@pytest.mark.parametrize("writer", ["copy", "orm"])
def test_the_import_stores_the_edge_lines_as_the_one_rule_reads_them(tmp_path: Path, writer: str) -> None:
    """tests/lib/scoring/test_ratings_rule.py's edge lines, each rated by a rater of its own, into
    the database: the ratings the rule keeps and the skips it names, through either writer."""
    notes = tmp_path / "notes.tsv"
    notes.write_text(
        "noteId\tnoteAuthorParticipantId\tcreatedAtMillis\ttweetId\tclassification\tsummary\n"
        + "".join(f"{i}\tZ\t{rule.MS}\t9\tMISINFORMED_OR_POTENTIALLY_MISLEADING\tx\n" for i in (12, 7, -5, 2**63 - 1))
    )
    _import("--notes", str(notes))
    lines, stored, skipped = [], set(), Counter[str]()
    for k, (text, outcome, _earlier) in enumerate(rule.CASES.values()):
        fields = text.split("\t")
        if len(fields) > 1 and fields[1] == "A":  # a rater of its own: no two lines are one pair
            fields[1] = f"R{k}"
        lines.append("\t".join(fields))
        if outcome[0] == "rating":
            _, note, rater, ms, level, tags = outcome
            stored.add((str(note), f"R{k}" if rater == "A" else rater, level, tags, ms))
        elif outcome[0] == "skip":
            skipped[f"ratings: {outcome[1]}"] += 1
    ratings = tmp_path / "ratings.tsv"
    ratings.write_bytes(("\t".join(rule.HEADER) + "\n" + "".join(t + "\n" for t in lines)).encode())
    report = cni.ImportReport()
    if writer == "copy":
        cni.import_ratings_copy(ratings, report)
    else:
        cni.import_ratings(ratings, report)
    rows = Rating.objects.values_list("note__external_id", "rater__external_id", "level", "tags", "created_at")
    assert {(n, u, lv, tuple(t), round(at.timestamp() * 1000)) for n, u, lv, t, at in rows} == stored
    assert {k: v for k, v in report.skipped.items() if v} == skipped
    assert report.counts["ratings upserted"] == len(stored)
