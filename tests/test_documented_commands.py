"""The management commands README.md and docs/research.md give run as written: through
scripts/manage.sh (the demo's settings), in a shell with nothing set, before the demo ever ran."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from pathlib import Path

from django.conf import settings

from crowdnotes_site.lib.communitynotes.data import synthetic_download

ROOT = Path(settings.BASE_DIR)
DOCS = [ROOT / "README.md", ROOT / "docs" / "research.md"]
# What a new shell has: none of the app's settings, no demo.env.
APP_VARIABLES = ("DEBUG", "SECRET_KEY", "DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE")


def test_the_docs_give_every_command_through_scripts_manage_sh() -> None:
    """`python manage.py COMMAND` in a new shell stops on a missing SECRET_KEY."""
    plain = [
        f"{doc.name}: {line.strip()}"
        for doc in DOCS
        for line in doc.read_text().splitlines()
        if re.search(r"(?<!scripts/)manage\.py [a-z_]+", line)
    ]
    assert plain == []


def test_the_documented_research_download_runs_as_written(tmp_path: Path) -> None:
    block = (ROOT / "docs" / "research.md").read_text()
    line = next(line.strip() for line in block.splitlines() if line.startswith("    ") and "research_download" in line)
    command = shlex.split(line.split("#")[0])
    at = command.index("research_download") + 1  # the folder
    folder = tmp_path / "download"
    synthetic_download.generate(folder, scale=0.0005, seed=1)
    env = {
        k: v for k, v in os.environ.items() if k not in APP_VARIABLES and not k.startswith(("CROWDNOTES_", "CELERY_"))
    }
    # No demo.env, and the checkout's var/ left alone.
    env.update(DEMO_ENV_FILE=str(tmp_path / "no-demo.env"), CROWDNOTES_VAR_DIR=str(tmp_path / "var"))
    ran = subprocess.run(
        [*command[:at], str(folder), *command[at + 1 :]], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert (folder / "research" / "delays.json").is_file() and (folder / "research" / "scored_notes.tsv").is_file()
