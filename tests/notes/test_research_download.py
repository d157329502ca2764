"""manage.py research_download: the research path's command (the path itself: tests/lib/scoring/test_download.py)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from crowdnotes_site.lib.communitynotes.data import synthetic_download as download_synth


def test_it_runs_the_steps_and_a_rerun_keeps_them(tmp_path: Path) -> None:
    download_synth.generate(tmp_path, scale=0.0005, seed=1)
    out = io.StringIO()
    call_command("research_download", str(tmp_path), stdout=out)
    assert "score: " in out.getvalue() and "rows/s" in out.getvalue()
    steps = {p.stem: json.loads(p.read_text()) for p in (tmp_path / "research" / "steps").glob("*.json")}
    assert set(steps) == {"convert", "score", "delays", "spikes"}
    assert (
        steps["score"]["notes_written"]
        == json.loads((tmp_path / "synthetic-truth.json").read_text())["status_history_rows"]
    )
    again = io.StringIO()
    call_command("research_download", str(tmp_path), stdout=again)
    assert "score: done earlier on the same inputs" in again.getvalue()
    assert f"RESEARCH_OUTPUTS_DIR={(tmp_path / 'research').resolve()}" in again.getvalue()


def test_a_bad_folder_is_a_command_error(tmp_path: Path) -> None:
    (tmp_path / "ratings-00000.tsv").write_text("noteId\n")
    with pytest.raises(CommandError, match="no notes-"):
        call_command("research_download", str(tmp_path))
