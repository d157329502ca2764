"""The source study's figures on the real folder: status shares by year (all and mature), the 2025
note -> first shown as Helpful delay, each with its n, from the loader's output."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from crowdnotes_site.lib.communitynotes.data import real
from crowdnotes_site.lib.communitynotes.research import real_figures
from tests.support import real_folder as rf

NOW = datetime(2026, 12, 8, tzinfo=UTC)


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    return rf.write(tmp_path / "real", rf.figure_notes(), rf.figure_statuses())


def _figures(folder: Path) -> dict[str, object]:
    readme = (folder / "README.md").read_text()
    return real_figures.figures(
        real.read_notes(folder), real.read_statuses(folder), folder=folder, readme=readme, now=NOW
    )


def test_it_counts_the_status_shares_by_year_over_all_notes_and_over_mature_ones(folder: Path) -> None:
    st = real_figures.status_shares(real.read_statuses(folder))
    assert st["n_rows"] == 10 and st["n_without_status"] == 1
    all_, mature = st["all"], st["mature"]
    assert all_["by_year"]["2023"] == {
        "n": 4, "needs_more_ratings": 3, "helpful": 1, "not_helpful": 0,
        "needs_more_ratings_pct": 75.0, "helpful_pct": 25.0, "not_helpful_pct": 0.0,
    }  # fmt: skip
    # 2025: the two young statuses are Needs More Ratings; without them the share falls.
    assert all_["by_year"]["2025"]["n"] == 5 and all_["by_year"]["2025"]["needs_more_ratings_pct"] == 60.0
    assert mature["by_year"]["2025"]["n"] == 3 and mature["by_year"]["2025"]["needs_more_ratings_pct"] == 33.3
    assert mature["by_year"]["2025"]["helpful_pct"] == 33.3 and mature["by_year"]["2025"]["not_helpful_pct"] == 33.3
    assert all_["overall"]["n"] == 9 and all_["overall"]["needs_more_ratings"] == 6
    assert all_["overall"]["needs_more_ratings_pct"] == 66.7
    assert mature["overall"]["n"] == 7 and mature["overall"]["needs_more_ratings_pct"] == 57.1
    # Per source: the travisbrown statuses, and the one from the study's diagnostic notes.
    by_source = st["by_source"]
    assert set(by_source) == {"travisbrown/birdwatch", "vulonviing/cross-constituency-aggregation-community-notes"}
    assert by_source["vulonviing/cross-constituency-aggregation-community-notes"]["mature"]["needs_more_ratings"] == 1
    assert by_source["travisbrown/birdwatch"]["all"]["n"] == 8
    assert by_source["travisbrown/birdwatch"]["mature"]["needs_more_ratings_pct"] == 50.0


def test_it_measures_note_to_first_shown_as_helpful_for_the_notes_of_2025_only(folder: Path) -> None:
    d = real_figures.shown_delay(real.read_notes(folder))
    h = d["hours"]
    # Five delays of 2, 4, 6, 8, 10 h (numpy's linear interpolation); the one shown before its note is
    # left out and counted; the 2024 note is not of the year.
    assert (h["n"], h["n_negative"]) == (5, 1)
    assert (h["p25"], h["p50"], h["p75"]) == (4.0, 6.0, 8.0) and h["p90"] == pytest.approx(9.2)
    assert d["n_notes_of_year"] == 8 and d["n_without_shown_time"] == 2 and d["n_recorded_by_explorer"] == 7


def test_the_figures_carry_their_source_limits_and_the_study_and_read_back_as_written(
    folder: Path, tmp_path: Path
) -> None:
    data = _figures(folder)
    assert data["source"]["limits"].startswith("Known limits: texts of notes written from 2023-10")  # type: ignore[index]
    assert "statusMature" in data["source"]["limits"]  # type: ignore[index]
    assert data["study"] == {
        "never_left_nmr_pct": 87.9,
        "note_to_first_verdict_p50_hours": 7.2,
        "notes": "30.8K health notes",
        "wording": real_figures.STUDY_WORDING,
    }
    path = real_figures.figures_path(tmp_path)
    real_figures.write(path, data)
    assert real_figures.read(path) == data
    lines = real_figures.table_lines(data)
    assert any(line.split()[:4] == ["2025", "5", "60.0", "20.0"] for line in lines), lines
    assert any("n=5 of 8 notes of 2025" in line for line in lines)


def test_a_file_it_did_not_write_is_refused_with_its_name(tmp_path: Path) -> None:
    path = tmp_path / "real_figures.json"
    with pytest.raises(real_figures.RealFiguresError, match="not found"):
        real_figures.read(path)
    path.write_text('{"format": 1, "source": ')
    with pytest.raises(real_figures.RealFiguresError, match=f"{path}: cannot be read"):
        real_figures.read(path)
    path.write_text('{"format": 1, "source": {}}')
    with pytest.raises(real_figures.RealFiguresError, match="lacks statuses, shown_delay, study"):
        real_figures.read(path)


def test_a_readme_without_limits_gives_none() -> None:
    assert real_figures.readme_limits("# A folder\n\nNo such paragraph.\n") == ""
