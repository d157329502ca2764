"""`index_documents` and `find_evidence` exactly as an operator types them, on the embedded
defaults: a fresh SQLite database (FTS5), the filesystem broker, no LLM endpoint configured."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from django.conf import settings

ROOT = Path(__file__).resolve().parents[3]


def _manage(*args: str, var: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DATABASE_URL", "REDIS_URL", "CELERY_", "LLM_"))}
    env.update(
        DJANGO_SETTINGS_MODULE="crowdnotes_site.settings",
        DEBUG="1",
        CROWDNOTES_VAR_DIR=str(var),
        EMBEDDING_MODEL=settings.EMBEDDING_MODEL,
        MODEL_CACHE_DIR=str(settings.MODEL_CACHE_DIR),
        LOG_LEVEL="WARNING",
    )
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_the_commands_run_as_written_on_a_fresh_sqlite_database(tmp_path: Path, corpus: tuple[Path, Path]) -> None:
    folder, manifest = corpus
    var = tmp_path / "var"
    assert _manage("migrate", "--noinput", "-v0", var=var).returncode == 0
    indexed = _manage("index_documents", str(folder), "--manifest", str(manifest), var=var)
    assert indexed.returncode == 0, indexed.stderr
    assert "indexed: 6" in indexed.stdout and "the index now holds 6" in indexed.stdout
    found = _manage(
        "find_evidence", "--post", "The MMR vaccine causes autism in children", "--tau", "2", "--cutoff", "2020-01-01",
        "--json", var=var,
    )  # fmt: skip
    assert found.returncode == 0, found.stderr
    result = json.loads(found.stdout)
    assert set(result) == {"queries", "pool_size", "chosen", "warnings"}
    assert result["chosen"][0]["url"] == "https://www.who.int/news-room/fact-sheets/detail/measles"
    assert result["chosen"][0]["producer"].startswith("baseline:")  # no LLM configured: the labelled baseline
    assert all(c["url"] != "https://news.example/2024/measles-outbreak" for c in result["chosen"])  # after the cutoff
    misuse = _manage("find_evidence", "--tau", "2", "--json", var=var)
    assert misuse.returncode != 0 and "--post" in misuse.stderr
