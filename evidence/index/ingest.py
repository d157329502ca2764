"""What `index_documents` reads (pure: no ORM): a folder of HTML/PDF/text files with an optional
manifest (TSV read by header name: local_file, url, title, category, language), or a text file
of URLs (one per line, # comments)."""

from __future__ import annotations

import csv
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from evidence.fetch import HTML, PDF, TEXT

SUFFIX_TYPES = {".html": HTML, ".htm": HTML, ".xhtml": HTML, ".pdf": PDF, ".txt": TEXT}
_LANG = re.compile(rb"<html[^>]*\blang\s*=\s*[\"']?([a-zA-Z]{2,3}(?:-[a-zA-Z0-9]+)?)", re.IGNORECASE)


@dataclass(frozen=True)
class ManifestRow:
    url: str = ""
    title: str = ""
    category: str = ""
    language: str = ""


@dataclass(frozen=True)
class LocalDocument:
    path: Path
    relative: str  # path inside the folder, with forward slashes
    content_type: str
    row: ManifestRow


def read_manifest(path: Path) -> dict[str, ManifestRow]:
    """local_file → its row; columns are found by header name, extra columns are ignored."""
    with path.open(newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle, delimiter="\t")
        if "local_file" not in (reader.fieldnames or []):
            raise ValueError(f"{path}: the manifest needs a local_file column")
        return {
            row["local_file"].strip(): ManifestRow(
                url=(row.get("url") or "").strip(),
                title=(row.get("title") or "").strip(),
                category=(row.get("category") or "").strip(),
                language=(row.get("language") or "").strip(),
            )
            for row in reader
            if (row.get("local_file") or "").strip()
        }


def folder_documents(folder: Path, manifest: dict[str, ManifestRow] | None = None) -> Iterator[LocalDocument]:
    """The folder's HTML, PDF and text files in name order (manifest rows joined by relative path)."""
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        content_type = SUFFIX_TYPES.get(path.suffix.lower())
        if content_type is None:
            continue
        relative = path.relative_to(folder).as_posix()
        yield LocalDocument(path, relative, content_type, (manifest or {}).get(relative, ManifestRow()))


def read_url_list(path: Path) -> list[str]:
    lines = (line.strip() for line in path.read_text(encoding="utf-8").splitlines())
    return list(dict.fromkeys(line for line in lines if line and not line.startswith("#")))


def html_language(body: bytes) -> str:
    match = _LANG.search(body[:20000])
    return match.group(1).decode("ascii").lower() if match else ""
