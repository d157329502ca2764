"""The benchmark's result files: where the runner writes a run's table and how the results page
finds the latest one."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

TABLE_JSON, TABLE_MD = "table.json", "table.md"


def latest_table(directory: Path) -> dict[str, Any] | None:
    """The most recently updated run's table under `directory` (the results page)."""
    tables = sorted(directory.glob(f"*/{TABLE_JSON}"), key=lambda p: p.stat().st_mtime, reverse=True)
    for path in tables:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            continue
        data["out_dir"] = str(path.parent)
        data["markdown"] = (
            (path.parent / TABLE_MD).read_text(encoding="utf-8") if (path.parent / TABLE_MD).exists() else ""
        )
        return data
    return None
