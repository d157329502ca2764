"""Search backends behind one small interface: `search(query, k=, cutoff=) -> list[SearchHit]`.

- the local evidence index (evidence.index.query.LocalIndexBackend, the offline default),
- SearXNG's JSON API (self-hosted metasearch),
- the Brave Search API (commercial).

The web adapters call operator-configured API endpoints (never user-supplied URLs, so not through
evidence/fetch.py; the result URLs they return are fetched through it later). They have a total
timeout, retry 429/503 with backoff (Retry-After honoured, capped) and normalize every result to
title, snippet, URL and published date when the service knows it. Pure: no ORM, no settings.
"""

from __future__ import annotations

import html
import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import Any, Protocol
from urllib.parse import urlencode

import urllib3


@dataclass(frozen=True)
class SearchHit:
    url: str
    title: str
    snippet: str
    published: date | None
    backend: str
    rank: int  # 1-based position in this backend's answer to this query
    query: str = ""
    # Known for local index documents (and URLs fetched before): the pool de-duplicates by them.
    final_url: str = ""
    content_hash: str = ""
    source_id: int | None = None
    category: str = ""
    copy_url: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


class BackendError(Exception):
    """A search backend failed (after its retries); the flow records a warning and goes on."""


class Backend(Protocol):
    name: str

    def search(self, query: str, *, k: int, cutoff: date | None) -> list[SearchHit]: ...


_TAG = re.compile(r"<[^>]+>")


def plain(text: str | None) -> str:
    """Result text without markup (APIs wrap matches in <strong>) and entities."""
    return " ".join(html.unescape(_TAG.sub("", text or "")).split())


def parse_date(value: Any) -> date | None:
    """An ISO date or datetime ("2021-03-04", "2021-03-04T10:00:00Z"), else None."""
    if not value or not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.strip().replace("Z", "+00:00")).date()
    except ValueError:
        try:
            return date.fromisoformat(value.strip()[:10])
        except ValueError:
            return None


def keep_by_date(published: date | None, cutoff: date | None, undated: str) -> bool:
    """The time restriction: published strictly before the cutoff; undated ones by the rule."""
    if cutoff is None:
        return True
    if published is None:
        return undated == "include"
    return published < cutoff


def normalize_hits(
    results: list[Any],
    *,
    date_key: str,
    snippet_key: str,
    cutoff: date | None,
    undated: str,
    backend: str,
    query: str,
    k: int,
) -> list[SearchHit]:
    """A web API's result list as at most `k` SearchHits: web URLs only, the date rule applied,
    ranks counted over the kept hits. Services differ only in their date and snippet keys."""
    hits: list[SearchHit] = []
    for item in results:
        if not isinstance(item, dict) or not str(item.get("url") or "").startswith(("http://", "https://")):
            continue
        published = parse_date(item.get(date_key))
        if not keep_by_date(published, cutoff, undated):
            continue
        hits.append(
            SearchHit(
                url=str(item["url"]),
                title=plain(item.get("title")) or str(item["url"]),
                snippet=plain(item.get(snippet_key)),
                published=published,
                backend=backend,
                rank=len(hits) + 1,
                query=query,
            )
        )
        if len(hits) >= k:
            break
    return hits


@dataclass
class HttpJson:
    """GET a JSON API with a timeout and bounded retries of 429/503 (and connection errors)."""

    timeout_s: float = 10.0
    retries: int = 2
    backoff_s: float = 0.5
    backoff_max_s: float = 5.0
    sleep: Callable[[float], None] = time.sleep

    def __post_init__(self) -> None:
        # Environment proxies are ignored on purpose, as for evidence fetching.
        self._pool = urllib3.PoolManager(retries=False, timeout=urllib3.Timeout(total=self.timeout_s))

    def get(self, url: str, *, headers: dict[str, str] | None = None, name: str) -> Any:
        attempt = 0
        while True:
            attempt += 1
            try:
                response = self._pool.request("GET", url, headers=headers or {}, redirect=False)
            except urllib3.exceptions.HTTPError as exc:
                if attempt > self.retries:
                    raise BackendError(f"{name}: cannot connect ({type(exc).__name__})") from exc
                self.sleep(self._delay(attempt, None))
                continue
            if response.status in (429, 503):
                if attempt > self.retries:
                    raise BackendError(f"{name}: HTTP {response.status} after {attempt} attempts (rate limited)")
                self.sleep(self._delay(attempt, response.headers.get("Retry-After")))
                continue
            if response.status != 200:
                raise BackendError(f"{name}: HTTP {response.status}")
            try:
                return json.loads(response.data)
            except ValueError as exc:
                raise BackendError(f"{name}: the answer is not JSON") from exc

    def _delay(self, attempt: int, retry_after: str | None) -> float:
        delay = self.backoff_s * (2 ** (attempt - 1))
        try:
            if retry_after is not None:
                delay = max(delay, float(retry_after))
        except ValueError:
            pass
        return min(delay, self.backoff_max_s)


@dataclass
class SearxngBackend:
    """A self-hosted SearXNG instance (its `/search?format=json` API must be enabled)."""

    base_url: str
    http: HttpJson = field(default_factory=HttpJson)
    undated: str = "exclude"
    name: str = "searxng"

    def search(self, query: str, *, k: int, cutoff: date | None) -> list[SearchHit]:
        url = self.base_url.rstrip("/") + "/search?" + urlencode({"q": query, "format": "json", "pageno": 1})
        data = self.http.get(url, headers={"Accept": "application/json"}, name=self.name)
        results = data.get("results") if isinstance(data, dict) else None
        if not isinstance(results, list):
            raise BackendError(f"{self.name}: no results list in the answer")
        return normalize_hits(
            results, date_key="publishedDate", snippet_key="content", cutoff=cutoff, undated=self.undated,
            backend=self.name, query=query, k=k,
        )  # fmt: skip


@dataclass
class BraveBackend:
    """The Brave Search web API (X-Subscription-Token)."""

    api_key: str
    base_url: str = "https://api.search.brave.com/res/v1"
    http: HttpJson = field(default_factory=HttpJson)
    undated: str = "exclude"
    name: str = "brave"

    def search(self, query: str, *, k: int, cutoff: date | None) -> list[SearchHit]:
        params: dict[str, Any] = {"q": query, "count": min(max(k, 1), 20)}
        if cutoff is not None:  # the API filters by page age; we check each date again below
            params["freshness"] = f"1990-01-01to{(cutoff - timedelta(days=1)).isoformat()}"
        headers = {"Accept": "application/json", "X-Subscription-Token": self.api_key}
        data = self.http.get(
            self.base_url.rstrip("/") + "/web/search?" + urlencode(params), headers=headers, name=self.name
        )
        web = data.get("web") if isinstance(data, dict) else None
        results = web.get("results") if isinstance(web, dict) else []
        if not isinstance(results, list):
            raise BackendError(f"{self.name}: no results list in the answer")
        return normalize_hits(
            results, date_key="page_age", snippet_key="description", cutoff=cutoff, undated=self.undated,
            backend=self.name, query=query, k=k,
        )  # fmt: skip
