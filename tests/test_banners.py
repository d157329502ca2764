"""The warm-up banner says what the warm-up does now and how long each step took when it last ran
on this machine, from the durations scripts/lib/warmup.sh records; never a guessed range."""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from crowdnotes_site.banners import warmup_progress

pytestmark = pytest.mark.django_db


def test_a_first_run_says_there_is_no_measurement_yet(anon_client: Any, settings: Any, tmp_path: Path) -> None:
    settings.VAR_DIR = tmp_path
    (tmp_path / "warmup.running").write_text("06:12\n")
    (tmp_path / "warmup.step").write_text(f"index\t{time.time() - 75:.0f}\n")
    html = anon_client.get("/banners/").content.decode()
    assert re.search(r"now indexing the demo&#x27;s evidence pages, for 7[5-9] s so far", html)
    assert "first time on this machine: no measurement of this step yet" in html
    assert "First run on this machine: no measurement yet" in html
    assert "2½" not in html and "10 minutes" not in html  # no made-up range
    assert "finds only the pages indexed so far" in html


def test_the_banner_reads_the_measured_step_durations(anon_client: Any, settings: Any, tmp_path: Path) -> None:
    settings.VAR_DIR = tmp_path
    (tmp_path / "warmup.running").write_text("06:12\n")
    (tmp_path / "warmup-steps.tsv").write_text(
        "index\t150\t2026-12-01T06:15:00Z\t0\n"
        "embedding\t549\t2026-12-01T06:24:00Z\t0\n"
        "embedding\t3\t2026-12-02T06:24:00Z\t1\n"  # a failed run is no measure
    )
    (tmp_path / "warmup.step").write_text(f"embedding\t{time.time() - 30:.0f}\n")
    html = anon_client.get("/").content.decode()
    assert "it took 9.2 min when it last ran on this machine" in html
    assert "indexing the demo&#x27;s evidence pages 2.5 min;" in html
    assert "preparing the embedding model and building its pre-filter table 9.2 min" in html
    assert "First run on this machine" not in html
    assert "ranks passages by their words alone until the table is built" in html


def test_warmup_sh_records_each_step_it_runs(tmp_path: Path) -> None:
    """The step function of scripts/lib/warmup.sh, run as the script runs it."""
    script = (Path(__file__).resolve().parents[1] / "scripts" / "lib" / "warmup.sh").read_text()
    function = script[script.index("step() {") : script.index("\n}\n") + 3]
    (tmp_path / "var").mkdir()
    bash = shutil.which("bash")
    assert bash is not None
    subprocess.run(
        [bash, "-c", f"{function}\nstep index sleep 1\nstep embedding false\nexit 0"], cwd=tmp_path, check=True
    )
    lines = (tmp_path / "var" / "warmup-steps.tsv").read_text().splitlines()
    assert [line.split("\t")[0] for line in lines] == ["index", "embedding"]
    assert int(lines[0].split("\t")[1]) >= 1 and lines[1].endswith("\t1")
    assert not (tmp_path / "var" / "warmup.step").exists()
    progress = warmup_progress(tmp_path / "var")
    assert [(s.name, s.seconds >= 1) for s in progress.measured] == [("index", True)]
    assert progress.step is None
