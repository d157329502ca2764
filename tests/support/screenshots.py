"""Where the browser tests write their screenshots (defined once).

By default every screenshot goes to the git-ignored `artifacts/` folder, so a test run leaves a
clean checkout clean. The documentation's images (`docs/images/`) are refreshed on purpose only:
`scripts/screenshots.sh` runs the browser tests with CROWDNOTES_DOCS_SCREENSHOTS=1, and then the
shots the documentation shows are written to `docs/images/` instead of `artifacts/docs-images/`.
"""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "artifacts"
DOCS_IMAGES = ROOT / "docs" / "images"
REFRESH_ENV = "CROWDNOTES_DOCS_SCREENSHOTS"


def refreshing_docs() -> bool:
    """True when this run is meant to rewrite the documentation's images."""
    return os.environ.get(REFRESH_ENV, "") == "1"


def artifact_path(name: str) -> Path:
    """`artifacts/<name>`, its folder created: a screenshot kept for debugging only."""
    path = ARTIFACTS / name
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def docs_image_path(name: str) -> Path:
    """Where a documentation image (`docs/images/<name>`, e.g. "admin-scoring.png" or
    "demo/home.png") is written: there when refreshing, else under `artifacts/docs-images/`."""
    base = DOCS_IMAGES if refreshing_docs() else ARTIFACTS / "docs-images"
    path = base / name
    path.parent.mkdir(parents=True, exist_ok=True)
    return path
