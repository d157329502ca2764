"""Local copies of real web pages (the demo serves the shared corpus of real pages on loopback):
a copy is read from where it is served, but it stands for the page it is a copy of. Everything
that says where a source is from (the snippet's and note's URL, the source category, the text
sent to X) uses the original address from the manifest; only the fetch goes to the copy.

Off unless both settings are set: EVIDENCE_LOCAL_COPIES_URL (where the copies are served, e.g.
http://127.0.0.1:8001/) and EVIDENCE_LOCAL_COPIES_MANIFEST (the corpus's manifest.tsv: local_file
and url columns). A file without a URL in the manifest has no known original and stays a copy."""

from __future__ import annotations

import functools
import re
from pathlib import Path
from urllib.parse import unquote, urlsplit

from django.conf import settings

from crowdnotes_site.lib.categories import is_loopback
from evidence.index.ingest import read_manifest


@functools.lru_cache(maxsize=4)
def _read(path: str, mtime: float) -> tuple[dict[str, str], dict[str, str]]:
    """(local file → original URL, original URL → local file) of a manifest version."""
    originals = {local: row.url for local, row in read_manifest(Path(path)).items() if row.url}
    copies: dict[str, str] = {}
    for local, url in originals.items():
        copies.setdefault(url, local)
    return originals, copies


def _tables() -> tuple[str, dict[str, str], dict[str, str]] | None:
    base = str(getattr(settings, "EVIDENCE_LOCAL_COPIES_URL", "") or "")
    manifest = str(getattr(settings, "EVIDENCE_LOCAL_COPIES_MANIFEST", "") or "")
    if not base or not manifest:
        return None
    try:
        mtime = Path(manifest).stat().st_mtime
    except OSError:
        return None
    originals, copies = _read(manifest, mtime)
    return base.rstrip("/") + "/", originals, copies


def _served_path(url: str, base: str) -> str | None:
    """The file `url` names under `base`, where the copies are served (None: not under it). The
    loopback names of this machine are one place: http://localhost:8001/x is http://127.0.0.1:8001/x."""
    try:
        u, b = urlsplit(url.strip()), urlsplit(base)
        same_port = (u.port or _DEFAULT_PORTS.get(u.scheme)) == (b.port or _DEFAULT_PORTS.get(b.scheme))
    except ValueError:
        return None
    host, base_host = (u.hostname or "").lower(), (b.hostname or "").lower()
    same_host = host == base_host or (is_loopback(host) and is_loopback(base_host))
    if u.scheme != b.scheme or not same_port or not same_host or not u.path.startswith(b.path):
        return None
    return unquote(u.path)[len(b.path) :]


_DEFAULT_PORTS = {"http": 80, "https": 443}


def original_of(url: str) -> str | None:
    """The real address of a local copy's URL (None: not a local copy, or its original is unknown)."""
    tables = _tables()
    if tables is None:
        return None
    base, originals, _ = tables
    local = _served_path(url, base)
    return originals.get(local) if local is not None else None


def copy_of(url: str) -> str | None:
    """Where the local copy of a real address is served (None: no local copy)."""
    tables = _tables()
    if tables is None:
        return None
    base, _, copies = tables
    local = copies.get(url)
    return base + local if local else None


def real_address(url: str) -> str:
    """The URL to show, store and send for `url`: its original when it is a local copy."""
    return original_of(url) or url


_URL = re.compile(r"https?://[^\s<>\"')\]]+")


def real_addresses(text: str) -> str:
    """`text` with every local copy's URL replaced by its original address."""
    if _tables() is None:
        return text
    return _URL.sub(lambda m: real_address(m.group(0)), text)
