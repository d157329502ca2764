"""import_communitynotes on every sample file, idempotence, and score_communitynotes without a database."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest
from django.core.management import call_command

from notes import synthetic
from notes.models import Note, NoteStatus, NoteStatusChange, Participant, Post, Rating, RatingLevel

HISTORY = Path("mcroston") / "noteStatusHistory-00000.tsv"  # under the communitynotes data


def _import(*args: str) -> str:
    out = io.StringIO()
    call_command("import_communitynotes", *args, stdout=out)
    return out.getvalue()


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
    assert header == ["noteId", "numRatings", "coreNoteIntercept", "coreNoteFactor1", "coreRatingStatus"]
    assert (
        (tmp_path / "helpfulness_scores.tsv")
        .read_text()
        .startswith("raterParticipantId\tcoreRaterIntercept\tcoreRaterFactor1\n")
    )
