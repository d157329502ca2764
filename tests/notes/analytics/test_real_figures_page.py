"""`manage.py real_figures` prints the source study's figures measured on the real folder and writes
the file /analytics/research/ shows, with each figure's n and which notes it counts."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from crowdnotes_site.lib.communitynotes.research import real_figures
from tests.support import real_folder as rf

pytestmark = pytest.mark.django_db


@pytest.fixture
def folder(tmp_path: Path, settings: Any) -> Path:
    settings.COMMUNITYNOTES_REAL_DIR = tmp_path / "real"
    return rf.write(tmp_path / "real", rf.figure_notes(), rf.figure_statuses())


def test_it_prints_the_table_and_writes_the_file_the_research_page_shows(
    folder: Path, admin_client: Any, settings: Any
) -> None:
    out, err = StringIO(), StringIO()
    call_command("real_figures", stdout=out, stderr=err)
    path = real_figures.figures_path(settings.VAR_DIR)
    assert f"figures written to {path}" in err.getvalue()
    table = out.getvalue().splitlines()
    assert ["2023", "4", "75.0", "25.0", "0.0", "4", "75.0", "25.0", "0.0"] in [line.split() for line in table]
    assert ["2025", "5", "60.0", "20.0", "20.0", "3", "33.3", "33.3", "33.3"] in [line.split() for line in table]
    assert "hours: p25 4.0, median 6.0, p75 8.0, p90 9.2" in out.getvalue()
    data = real_figures.read(path)
    assert data["source"]["folder"] == str(folder)

    page = admin_client.get(reverse("analytics:research"))
    assert page.status_code == 200
    html = page.content.decode()
    section = html[html.index('id="real-figures"') :]
    # The shares with their n, all notes and mature ones, per year and overall, beside the study's.
    assert (
        "<td>2025</td>\n    <td>5</td><td>60.0%</td><td>20.0%</td><td>20.0%</td>\n    <td>3</td><td>33.3%</td>"
        in section
    )
    assert "<td>all</td>\n    <td>9</td><td>66.7%</td>" in section
    assert "<td>the source study</td><td>30.8K health notes</td><td>87.9%</td>" in section
    assert "<td>travisbrown/birdwatch</td><td>8</td><td>62.5%</td>\n    <td>6</td><td>50.0%</td>" in section
    # The delay: which notes it counts, its n, what was left out, beside the study's median.
    assert "5 of the\n  8 notes of 2025" in section and "1 negative delay left out" in section
    assert "<td>5</td><td>4.0</td>\n    <td>6.0</td><td>8.0</td><td>9.2</td>" in section
    assert (
        "note → first helpfulness verdict (hours)</td><td>30.8K health notes</td><td>–</td>\n    <td>7.2</td>"
        in section
    )
    assert 'it is not the study\'s "first helpfulness verdict"' in section.replace("&quot;", '"')
    # Its source and the folder's own limits.
    assert str(folder) in section and "9 of 10 rows" in section
    assert "Known limits: texts of notes written from 2023-10" in section


def test_with_json_it_prints_what_it_writes(folder: Path, settings: Any) -> None:
    out = StringIO()
    call_command("real_figures", "--json", stdout=out, stderr=StringIO())
    assert json.loads(out.getvalue()) == real_figures.read(real_figures.figures_path(settings.VAR_DIR))


def test_without_the_file_the_page_says_how_to_make_it_and_shows_no_figure(admin_client: Any) -> None:
    html = admin_client.get(reverse("analytics:research")).content.decode()
    section = html[html.index('id="real-figures"') :]
    assert 'id="no-real-figures"' in section and "manage.py real_figures" in section
    assert "%" not in section and "real-statuses" not in section


def test_a_damaged_file_is_named_on_the_page(admin_client: Any, settings: Any) -> None:
    path = real_figures.figures_path(settings.VAR_DIR)
    path.parent.mkdir(parents=True)
    path.write_text('{"format": 1')
    html = admin_client.get(reverse("analytics:research")).content.decode()
    assert f"{path}: cannot be read" in html and 'id="real-figures-error"' in html


def test_a_missing_folder_stops_the_command_with_its_name(tmp_path: Path, settings: Any) -> None:
    settings.COMMUNITYNOTES_REAL_DIR = tmp_path / "absent"
    with pytest.raises(CommandError, match=f"{tmp_path / 'absent' / 'notes.tsv'}: not found"):
        call_command("real_figures", stdout=StringIO(), stderr=StringIO())
    assert not real_figures.figures_path(settings.VAR_DIR).exists()
