from __future__ import annotations

from datetime import date
from typing import Any

from evidence.search.backends import SearchHit
from evidence.search.pool import build_pool, normalize_url, url_key


def hit(url: str, rank: int, query: str = "q", **extra: Any) -> SearchHit:
    return SearchHit(
        url=url, title=url, snippet="", published=date(2020, 1, 1), backend="test", rank=rank, query=query, **extra
    )  # type: ignore[arg-type]


def test_it_normalizes_urls() -> None:
    assert (
        normalize_url("HTTPS://WWW.Example.com:443/a/b/?utm_source=x&id=3#frag") == "https://www.example.com/a/b?id=3"
    )
    assert url_key("http://example.com/a/") == url_key("https://www.example.com/a?fbclid=1#top")


def test_duplicates_never_reach_the_pool_twice() -> None:
    q1 = [
        hit("https://site.org/flu/?utm_source=twitter", 1, "q1"),
        hit("https://short.example/abc", 2, "q1", final_url="https://news.example/story"),
        hit("https://mirror.example/copy", 3, "q1", content_hash="h1"),
    ]
    q2 = [
        hit("https://site.org/flu#section", 1, "q2"),  # tracking parameters and fragments
        hit("https://news.example/story/", 2, "q2"),  # the redirect's target
        hit("https://original.example/page", 3, "q2", content_hash="h1"),  # same content elsewhere
        hit("https://other.example/", 4, "q2"),
    ]
    pool = build_pool([q1, q2])
    assert [c.url for c in pool] == [
        "https://site.org/flu",
        "https://short.example/abc",
        "https://mirror.example/copy",
        "https://other.example",
    ]
    assert pool[0].queries == ["q1", "q2"]
    assert "same URL" in pool[1].duplicates[0] and "same content" in pool[2].duplicates[0]


def test_the_pool_keeps_search_rank_order_and_its_limit() -> None:
    pool = build_pool([[hit("https://a/1", 1), hit("https://a/2", 2)], [hit("https://b/1", 1)]], limit=2)
    assert [c.url for c in pool] == ["https://a/1", "https://b/1"]
