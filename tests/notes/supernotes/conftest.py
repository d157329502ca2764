from __future__ import annotations

from pathlib import Path

import pytest

from crowdnotes_site.lib.communitynotes.data import synthetic_download as download_synth
from crowdnotes_site.lib.communitynotes.research import run as download


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny synthetic download, converted and scored (each test module gets its own)."""
    path = tmp_path_factory.mktemp("download")
    download_synth.generate(path, scale=0.0005, seed=3)
    download.run(path, only=("convert", "score"), say=lambda _m: None)
    return path
