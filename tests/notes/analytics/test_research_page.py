"""/analytics/research/: the research command's outputs over a whole download, shown as read."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from django.urls import reverse

from crowdnotes_site.lib.communitynotes.data import synthetic_download as synth
from crowdnotes_site.lib.communitynotes.research import run as research

pytestmark = pytest.mark.django_db


@pytest.fixture(scope="module")
def outputs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("download")
    synth.generate(folder, scale=0.0005, seed=5)
    research.run(folder, say=lambda _m: None)
    return folder / "research"


def test_the_page_shows_the_research_files_figures(outputs: Path, admin_client: Any, settings: Any) -> None:
    settings.RESEARCH_OUTPUTS_DIR = str(outputs)
    response = admin_client.get(reverse("analytics:research"))
    assert response.status_code == 200
    html = response.content.decode()
    delays = json.loads((outputs / "delays.json").read_text())
    spikes = json.loads((outputs / "spikes.json").read_text())
    score = json.loads((outputs / "steps" / "score.json").read_text())
    run = response.context["run"]
    # The table rows are the file's numbers, in the page's order, and the median is printed as the
    # database page prints it.
    assert [label for label, _ in run.delay_rows][:2] == ["post → first note (hours)", "note → first verdict (hours)"]
    assert run.delay_rows[0][1] == delays["post_to_first_note_hours"]
    assert f"{delays['post_to_first_note_hours']['p50']:.1f}" in html
    assert run.statuses == {k: score[k] for k in ("helpful", "not_helpful", "needs_more_ratings")}
    assert run.statuses["helpful"] > 0 and run.statuses["needs_more_ratings"] > 0
    # Every spike of the file is listed and marked on the chart.
    assert spikes["spikes"], "the generator plants spikes"
    for s in spikes["spikes"]:
        assert f"<td>{s['day']}</td>" in html
    assert sum(r.spike for r in run.daily) == len(spikes["spikes"])
    assert html.count("<svg") == 2
    assert "computed outside this app's database" in html and str(outputs) in html


def test_without_a_research_run_the_page_says_how_to_make_one(admin_client: Any, settings: Any, tmp_path: Path) -> None:
    settings.RESEARCH_OUTPUTS_DIR = ""
    page = admin_client.get(reverse("analytics:research"))
    assert page.status_code == 200 and "research_download FOLDER" in page.content.decode()
    settings.RESEARCH_OUTPUTS_DIR = str(tmp_path)  # a folder with no step record
    page = admin_client.get(reverse("analytics:research"))
    assert page.status_code == 200
    assert f"{tmp_path}: no research run here" in page.content.decode()


def test_a_damaged_output_file_is_named_not_a_server_error(
    outputs: Path, admin_client: Any, settings: Any, tmp_path: Path
) -> None:
    copy = tmp_path / "research"
    (copy / "steps").mkdir(parents=True)
    for f in outputs.glob("steps/*.json"):
        (copy / "steps" / f.name).write_bytes(f.read_bytes())
    (copy / "delays.json").write_text('{"post_to_first_note_hours": ')  # cut short
    settings.RESEARCH_OUTPUTS_DIR = str(copy)
    page = admin_client.get(reverse("analytics:research"))
    assert page.status_code == 200
    assert f"{copy / 'delays.json'}: cannot be read" in page.content.decode()


@pytest.mark.parametrize(
    ("name", "content", "problem"),
    [
        ("spikes.json", {"days": [], "found": []}, "window is missing"),
        ("spikes.json", [1, 2], "the file is a list, expected an object"),
        (
            "spikes.json",
            {"window": 28, "k": 3.0, "rule": "mean + k sd", "spikes": [{"day": "2024-01-05", "count": "many"}]},
            "spikes[0].count is text, expected a number",
        ),
        ("delays.json", {"post_to_first_note_hours": 5}, "post_to_first_note_hours is a number, expected an object"),
        ("steps/score.json", [], "the file is a list, expected an object"),
    ],
)
def test_an_output_file_of_another_shape_is_named_with_what_is_wrong(
    outputs: Path, admin_client: Any, settings: Any, tmp_path: Path, name: str, content: Any, problem: str
) -> None:
    copy = tmp_path / "research"
    (copy / "steps").mkdir(parents=True)
    for f in [*outputs.glob("steps/*.json"), *outputs.glob("*.json"), outputs / "spikes_daily.tsv"]:
        (copy / f.relative_to(outputs)).write_bytes(f.read_bytes())
    (copy / name).write_text(json.dumps(content))
    settings.RESEARCH_OUTPUTS_DIR = str(copy)
    page = admin_client.get(reverse("analytics:research"))
    assert page.status_code == 200
    html = page.content.decode()
    assert f"{copy / name}: not the shape this page reads: {problem}" in html
    assert "-day rolling window" not in html
