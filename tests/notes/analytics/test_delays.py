from __future__ import annotations

import json
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from crowdnotes_site.lib import xids
from crowdnotes_site.lib.communitynotes.research import delays
from crowdnotes_site.lib.communitynotes.research.delays import HOUR_MS
from crowdnotes_site.lib.xids import X_EPOCH_MS

H = HOUR_MS


def test_percentiles_use_linear_interpolation() -> None:
    p = delays.percentiles([1, 2, 3, 4, 5, 6, 7, 8, 9, 10])
    assert (p.p25, p.p50, p.p75, p.p90, p.n) == (3.25, 5.5, 7.75, 9.1, 10)
    empty = {"p25": None, "p50": None, "p75": None, "p90": None, "n": 0, "n_negative": 0}
    assert delays.percentiles([]).as_dict() == empty


def test_negative_delays_are_counted_and_left_out_never_drawn_as_zero() -> None:
    p = delays.percentiles([-0.8, -0.1, 0.0, 2.0, 4.0])
    assert (p.p50, p.n, p.n_negative) == (2.0, 3, 2)
    only_negative = delays.percentiles([-3.0])
    assert (only_negative.p25, only_negative.n, only_negative.n_negative) == (None, 0, 1)
    report = delays.delay_report(post_delays_hours=[-1.0, 1.0], notes_first_verdict=[(10 * H, 9 * H), (0, 5 * H)])
    assert report.post_to_first_note_hours.n_negative == 1
    assert (report.note_to_first_verdict_hours.n, report.note_to_first_verdict_hours.n_negative) == (1, 1)


def test_x_ids_encode_their_creation_time() -> None:
    assert xids.snowflake_ms(0) == X_EPOCH_MS
    assert xids.snowflake_ms(5 << 22) == X_EPOCH_MS + 5
    # A real note of the public data: noteId 1354870745806086150, createdAtMillis 1611861332737.
    assert abs(xids.snowflake_ms(1354870745806086150) - 1611861332737) <= 5
    assert xids.snowflake_time("1354870745806086150").isoformat().startswith("2021-01-28T19:15:32")
    assert delays.note_time_ms(5 << 22, 0) == X_EPOCH_MS + 5
    assert delays.note_time_ms(5 << 22, 1234) == 1234


def _id_at(ms: int) -> int:
    """An X id whose time is `ms` (Unix milliseconds)."""
    return (ms - X_EPOCH_MS) << 22


T0 = 1_600_000_000_000  # 2020-09-13


OLD_NOTES = "noteId\tparticipantId\tcreatedAtMillis\ttweetId\tclassification\tsummary\n"
NEW_NOTES = "noteId\tnoteAuthorParticipantId\tcreatedAtMillis\ttweetId\tclassification\tisMediaNote\tsummary\n"
OLD_STATUS = (
    "noteId\tparticipantId\tcreatedAtMillis\ttimestampMillisOfFirstNonNMRStatus\tfirstNonNMRStatus\t"
    "timestampMillisOfCurrentStatus\tcurrentStatus\ttimestampMillisOfMostRecentNonNMRStatus\tmostRecentNonNMRStatus\n"
)
NEW_STATUS = (
    "noteId\tnoteAuthorParticipantId\tcreatedAtMillis\ttimestampMillisOfFirstNonNMRStatus\tfirstNonNMRStatus\t"
    "timestampMillisOfCurrentStatus\tcurrentStatus\ttimestampMillisOfLatestNonNMRStatus\tmostRecentNonNMRStatus\t"
    "timestampMillisOfStatusLock\tlockedStatus\n"
)


def _write(tmp_path: Path, new_layout: bool) -> tuple[Path, Path]:
    post_a, post_b = _id_at(T0), _id_at(T0 + 10 * H)
    # Post A: notes after 2 h and 5 h (first note: 2 h); post B: one note after 4 h, whose
    # createdAtMillis is 0 so its time comes from its note id; a row without a tweet id.
    n1, n2, n3, n4 = 101, 102, _id_at(T0 + 14 * H), 104
    notes = [
        (n1, T0 + 2 * H, post_a),
        (n2, T0 + 5 * H, post_a),
        (n3, 0, post_b),
        (n4, T0 + 1 * H, ""),
    ]
    # Verdicts after 1 h (n1) and 3 h (n3, note time from its id); n2 and n4 never leave NMR.
    status = [
        (n1, T0 + 2 * H, T0 + 3 * H, "CURRENTLY_RATED_HELPFUL"),
        (n2, T0 + 5 * H, -1, ""),
        (n3, 0, T0 + 17 * H, "CURRENTLY_RATED_NOT_HELPFUL"),
        (n4, T0 + 1 * H, -1, ""),
    ]
    notes_path, status_path = tmp_path / "notes.tsv", tmp_path / "status.tsv"
    with notes_path.open("w") as fh:
        fh.write(NEW_NOTES if new_layout else OLD_NOTES)
        for nid, created, tweet in notes:
            extra = "\t0" if new_layout else ""
            fh.write(f"{nid}\tAUTH\t{created}\t{tweet}\tNOT_MISLEADING{extra}\ttext\n")
    with status_path.open("w") as fh:
        fh.write(NEW_STATUS if new_layout else OLD_STATUS)
        for nid, created, first, first_status in status:
            current = first_status or "NEEDS_MORE_RATINGS"
            tail = "\t-1\t" if new_layout else ""
            fh.write(
                f"{nid}\tAUTH\t{created}\t{first}\t{first_status}\t{first}\t{current}\t{first}\t{first_status}{tail}\n"
            )
    return notes_path, status_path


@pytest.mark.parametrize("new_layout", [False, True])
def test_the_command_prints_the_delays_from_files(tmp_path: Path, new_layout: bool) -> None:
    notes_path, status_path = _write(tmp_path, new_layout)
    out = StringIO()
    call_command("analytics_delays", notes=str(notes_path), status_history=str(status_path), json=True, stdout=out)
    data = json.loads(out.getvalue())
    assert set(data) == {"post_to_first_note_hours", "note_to_first_verdict_hours", "never_left_nmr_share"}
    post = data["post_to_first_note_hours"]
    assert post["n"] == 2 and post["p50"] == pytest.approx(3.0) and post["p25"] == pytest.approx(2.5)
    verdict = data["note_to_first_verdict_hours"]
    assert verdict["n"] == 2 and verdict["p50"] == pytest.approx(2.0) and verdict["p90"] == pytest.approx(2.8)
    assert data["never_left_nmr_share"] == pytest.approx(0.5)


def test_the_command_runs_on_the_real_sample(cn_data: Path) -> None:
    out = StringIO()
    call_command(
        "analytics_delays",
        notes=str(cn_data / "colin-fraser/notes-00000.tsv"),
        status_history=str(cn_data / "mcroston/noteStatusHistory-00000.tsv"),
        json=True,
        stdout=out,
    )
    data = json.loads(out.getvalue())
    post, verdict = data["post_to_first_note_hours"], data["note_to_first_verdict_hours"]
    assert 3000 < post["n"] < 4880  # one value per post, fewer posts than notes
    assert 0 < post["p25"] < post["p50"] < post["p75"] < post["p90"]
    assert verdict["n"] > 500 and 0 < verdict["p50"] < verdict["p90"]
    # n verdicts + notes that never left NMR = every status-history note (36,118)
    assert verdict["n"] / (1 - data["never_left_nmr_share"]) == pytest.approx(36118, abs=1)
