from __future__ import annotations

from pathlib import Path

import pytest

from crowdnotes_site.lib.communitynotes.data import real
from tests.support import real_folder as rf
from tests.support.real_folder import CRH, CRNH, DAY, NMR, at


def _folder(tmp_path: Path) -> Path:
    day = at(2025, 3, 1)
    old = at(2021, 2, 1)
    notes = [
        # A post with two intercepts: the highest wins.
        rf.note(
            old, "p-int", 1, noteIntercept="0.41", status=NMR, statusMature="1", statusSource="travisbrown/birdwatch"
        ),
        rf.note(old, "p-int", 2, noteIntercept="0.12", status=NMR, statusMature="1"),
        # A post judged by mature statuses: the Helpful note beside a mature Needs More Ratings one.
        rf.note(
            day,
            "p-status",
            3,
            postText="Vaccines cause X &amp; Y",
            lang="en",
            status=CRH,
            statusMature="1",
            statusSource="vulonviing/cross-constituency-aggregation-community-notes",
        ),
        rf.note(day, "p-status", 4, status=NMR, statusMature="1", statusSource="rocdav/community-notes-br-argmining"),
        # A young Helpful status: no verdict, and no truth for its post.
        rf.note(day, "p-young", 5, status=CRH, statusMature="0"),
        rf.note(day, "p-young", 6, status=NMR, statusMature="0"),
        # A note without a post, and one with a mature Not Helpful verdict and an <a> tag in its text.
        rf.note(day, "", 7, status=CRNH, statusMature="1"),
        rf.note(
            day,
            "p-one",
            8,
            summary='Wrong: <a href="https://cdc.gov/x">CDC</a> says so',
            status=CRNH,
            statusMature="1",
            createdAtMillis="",
        ),
    ]
    statuses = [rf.status(day, 3, CRH, 20 * DAY), rf.status(day, 5, CRH, 2 * DAY), rf.status(old, 9, "", None)]
    return rf.write(tmp_path / "real", notes, statuses)


def test_it_reads_each_source_a_young_status_and_a_note_without_a_post(tmp_path: Path) -> None:
    notes = {n.note_id: n for n in real.read_notes(_folder(tmp_path))}
    by_seq = {int(i) & 0xFFF: n for i, n in notes.items()}
    assert {n.status_source for n in notes.values()} >= {
        "travisbrown/birdwatch",
        "vulonviing/cross-constituency-aggregation-community-notes",
        "rocdav/community-notes-br-argmining",
    }
    assert by_seq[5].status == CRH and by_seq[5].verdict is None  # young: not a verdict
    assert by_seq[3].verdict is True and by_seq[8].verdict is False and by_seq[7].verdict is False
    assert by_seq[7].post_id == ""
    assert by_seq[3].post_text == "Vaccines cause X & Y"  # entities decoded
    assert by_seq[8].summary == "Wrong: CDC says so"  # link tags dropped, their text kept
    assert by_seq[8].created_at_ms == rf.ms(at(2025, 3, 1))  # no time given: the snowflake id's
    assert by_seq[1].intercept == pytest.approx(0.41) and by_seq[3].intercept is None
    assert [n.note_id for n in real.verdict_notes(list(notes.values()))] == [by_seq[s].note_id for s in (3, 7, 8)]


def test_it_finds_the_posts_whose_truth_separates_their_notes(tmp_path: Path) -> None:
    posts = {p.post_id: p for p in real.posts_with_truth(real.read_notes(_folder(tmp_path)))}
    assert set(posts) == {"p-int", "p-status"}  # the young post and the one-note post have no truth
    by_intercept = posts["p-int"]
    assert by_intercept.truth == real.TRUTH_INTERCEPT
    assert [by_intercept.notes[i].intercept for i in by_intercept.best] == [pytest.approx(0.41)]
    by_status = posts["p-status"]
    assert by_status.truth == real.TRUTH_STATUS and len(by_status.notes) == 2
    assert [by_status.notes[i].status for i in by_status.best] == [CRH]
    assert by_status.post_text == "Vaccines cause X & Y"


def test_it_reads_statuses_as_columns_with_their_maturity(tmp_path: Path) -> None:
    statuses = real.read_statuses(_folder(tmp_path))
    assert len(statuses) == 3
    assert statuses.status.tolist() == [CRH, CRH, ""]
    assert statuses.mature.tolist() == [True, False, False]
    assert statuses.year.tolist() == [2025, 2025, 2021]


def test_it_names_the_line_of_a_malformed_row(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    path = folder / real.NOTES_FILE
    path.write_text(path.read_text(encoding="utf-8") + "123\tonly two fields\n", encoding="utf-8")
    with pytest.raises(real.RealDataError, match=r"notes.tsv: line 10 has 2 fields"):
        real.read_notes(folder)
    with pytest.raises(real.RealDataError, match="not found"):
        real.read_notes(tmp_path / "missing")
