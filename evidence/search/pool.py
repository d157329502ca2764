"""The candidate pool: every query's top results merged, URLs normalized, duplicates removed
(pure: no ORM).

Two results are the same candidate when their normalized URLs match (scheme, host case, default
port, trailing slash, tracking parameters and fragments do not count: courlan does the
normalization; "www." and http/https do not count either), when one's final URL after redirects
is the other's URL or final URL, or when their contents have the same hash. Final URLs and
content hashes are known for local index documents and for URLs fetched before; for the rest the
flow checks again once the chosen sources are fetched (evidence.search.flow).

Pool order is search rank order: every query's first result, then every query's second, ...
(the "rank order" ablation takes candidates in this order).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import date
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from evidence.search.backends import SearchHit


def normalize_url(url: str) -> str:
    """A canonical spelling of a URL: tracking parameters and fragment dropped, host lower-case,
    no default port, no trailing slash (except the root)."""
    import courlan

    url = url.strip()
    try:
        normalized = courlan.normalize_url(url, strict=True)
    except (ValueError, AttributeError):
        normalized = url
    parts = urlsplit(normalized)
    path = parts.path.rstrip("/") if parts.path not in ("", "/") else ""
    return urlunsplit((parts.scheme.lower(), parts.netloc.lower(), path, parts.query, ""))


def url_key(url: str) -> str:
    """What two URLs must share to be one page: the normalized URL without scheme and "www."."""
    parts = urlsplit(normalize_url(url))
    host = parts.netloc.removeprefix("www.")
    return host + parts.path + ("?" + parts.query if parts.query else "")


@dataclass
class Candidate:
    url: str
    title: str
    snippet: str
    published: date | None = None
    category: str = ""
    domain: str = ""
    backends: list[str] = field(default_factory=list)
    queries: list[str] = field(default_factory=list)
    best_rank: int = 0
    final_url: str = ""
    content_hash: str = ""
    source_id: int | None = None
    copy_url: str = ""
    duplicates: list[str] = field(default_factory=list)  # other spellings merged into this one, and why
    # Cosine of the post with the document's best passage (the screen stage); None: not checked,
    # or the document could not be read.
    relevance: float | None = None
    # Share of the claim's key terms the document contains (the screen, when it weighs them).
    coverage: float | None = None
    screened: bool = False

    def keys(self) -> set[str]:
        keys = {"url:" + url_key(self.url)}
        if self.final_url:
            keys.add("url:" + url_key(self.final_url))
        if self.content_hash:
            keys.add("content:" + self.content_hash)
        return keys

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["published"] = self.published.isoformat() if self.published else None
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Candidate:
        values = dict(data)
        values["published"] = date.fromisoformat(values["published"]) if values.get("published") else None
        return cls(**values)


def _why(keys: set[str], other: set[str]) -> str:
    shared = keys & other
    if any(k.startswith("content:") for k in shared):
        return "same content"
    return "same URL (after normalization or redirects)"


def build_pool(result_lists: Sequence[Sequence[SearchHit]], *, limit: int = 50) -> list[Candidate]:
    """Merge the result lists (one per query and backend) into de-duplicated candidates, in
    search rank order, at most `limit`."""
    pool: list[Candidate] = []
    owner: dict[str, Candidate] = {}
    depth = max((len(results) for results in result_lists), default=0)
    for position in range(depth):
        for results in result_lists:
            if position >= len(results):
                continue
            hit = results[position]
            candidate = Candidate(
                # A stored document keeps its own spelling (the snippet finds it by that URL).
                url=hit.url if hit.source_id is not None else normalize_url(hit.url),
                title=hit.title,
                snippet=hit.snippet,
                published=hit.published,
                category=hit.category,
                backends=[hit.backend],
                queries=[hit.query] if hit.query else [],
                best_rank=hit.rank,
                final_url=normalize_url(hit.final_url) if hit.final_url else "",
                content_hash=hit.content_hash,
                source_id=hit.source_id,
                copy_url=hit.copy_url,
            )
            keys = candidate.keys()
            existing = next((owner[k] for k in keys if k in owner), None)
            if existing is not None:
                if hit.backend not in existing.backends:
                    existing.backends.append(hit.backend)
                if hit.query and hit.query not in existing.queries:
                    existing.queries.append(hit.query)
                if candidate.url != existing.url and candidate.url not in existing.duplicates:
                    existing.duplicates.append(f"{candidate.url} ({_why(keys, existing.keys())})")
                existing.best_rank = min(existing.best_rank, hit.rank)
                for key in keys:
                    owner.setdefault(key, existing)
                continue
            if len(pool) >= limit:
                continue
            pool.append(candidate)
            for key in keys:
                owner[key] = candidate
    return pool
