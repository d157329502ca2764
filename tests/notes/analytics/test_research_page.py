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
    assert run.statuses == {k: score[k] for k in ("helpful", "not_helpful", "needs_more_ratings")} == score["statuses"]
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


def _file_statuses(path: Path) -> dict[str, int]:
    rows = [line.rstrip("\n").split("\t") for line in path.read_text().splitlines()]
    column = rows[0].index("coreRatingStatus")
    names = {"helpful": "CURRENTLY_RATED_HELPFUL", "not_helpful": "CURRENTLY_RATED_NOT_HELPFUL",
             "needs_more_ratings": "NEEDS_MORE_RATINGS"}  # fmt: skip
    return {key: sum(1 for r in rows[1:] if r[column] == status) for key, status in names.items()}


def test_its_status_counts_are_those_of_scored_notes_tsv(
    outputs: Path, admin_client: Any, settings: Any, tmp_path: Path
) -> None:
    score = json.loads((outputs / "steps" / "score.json").read_text())
    written = _file_statuses(outputs / "scored_notes.tsv")
    # The download has ratings of notes it does not list (dropped as deleted notes): they are in no count.
    assert score["dropped"]["rating of a deleted note"] > 0
    assert sum(written.values()) == score["notes_written"]
    settings.RESEARCH_OUTPUTS_DIR = str(outputs)
    page = admin_client.get(reverse("analytics:research"))
    assert page.context["run"].statuses == written
    cells = f"<td>{written['helpful']}</td><td>{written['not_helpful']}</td><td>{written['needs_more_ratings']}</td>"
    assert cells in page.content.decode()
    # A score record written before the counts came from the file: the page counts the file itself.
    copy = tmp_path / "research"
    (copy / "steps").mkdir(parents=True)
    (copy / "scored_notes.tsv").write_bytes((outputs / "scored_notes.tsv").read_bytes())
    old = {k: v for k, v in score.items() if k != "statuses"}
    old["needs_more_ratings"] += score["dropped"]["rating of a deleted note"]
    (copy / "steps" / "score.json").write_text(json.dumps(old))
    settings.RESEARCH_OUTPUTS_DIR = str(copy)
    assert admin_client.get(reverse("analytics:research")).context["run"].statuses == written


def test_its_peak_memory_is_shown_in_a_unit_that_shows_it(outputs: Path, admin_client: Any, settings: Any) -> None:
    settings.RESEARCH_OUTPUTS_DIR = str(outputs)
    html = admin_client.get(reverse("analytics:research")).content.decode()
    score = json.loads((outputs / "steps" / "score.json").read_text())
    from crowdnotes_site.lib.communitynotes.research.outputs import memory_text

    # The step's peak is the whole process's (a test worker that loaded models can pass a GiB).
    assert score["peak_rss_bytes"] > 0
    assert f'<td class="peak-memory">{memory_text(score["peak_rss_bytes"])}</td>' in html
    assert ">0 GiB<" not in html and ">0.00 GiB<" not in html
    assert memory_text(300 * 2**20) == "300 MiB" and memory_text(3 * 2**30) == "3.00 GiB"
    assert memory_text(None) == memory_text(0) == "not measured"
