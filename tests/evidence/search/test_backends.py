"""The web search adapters against loopback fakes of the SearXNG and Brave APIs."""

from __future__ import annotations

import json
from datetime import date
from http.server import BaseHTTPRequestHandler

import pytest

from evidence.search.backends import BackendError, BraveBackend, HttpJson, SearxngBackend
from tests.support.web_server import WebServer

SEARXNG_ANSWER = {
    "query": "measles vaccine",
    "results": [
        {"url": "https://www.who.int/measles", "title": "Measles &amp; <b>vaccines</b>", "content": "Two doses ...",
         "publishedDate": "2021-03-04T10:00:00"},
        {"url": "https://blog.example/new", "title": "New post", "content": "fresh", "publishedDate": "2024-05-01"},
        {"url": "https://undated.example/page", "title": "Undated", "content": "no date", "publishedDate": None},
        {"url": "javascript:alert(1)", "title": "not a web page"},
    ],
}  # fmt: skip
BRAVE_ANSWER = {
    "web": {
        "results": [
            {"url": "https://www.cdc.gov/measles", "title": "About <strong>Measles</strong>", "description":
             "Measles is <strong>highly</strong> contagious.", "page_age": "2022-01-10T00:00:00"},
            {"url": "https://example.com/x", "title": "X", "description": "no age"},
        ]
    }
}  # fmt: skip


def _http() -> HttpJson:
    sleeps: list[float] = []
    return HttpJson(timeout_s=2, retries=2, backoff_s=0.01, sleep=sleeps.append)


def test_searxng_results_are_normalized_and_filtered_by_the_cutoff(web_server: WebServer) -> None:
    web_server.add("/search", json.dumps(SEARXNG_ANSWER), content_type="application/json")
    backend = SearxngBackend(base_url=web_server.url(""), http=_http())
    hits = backend.search("measles vaccine", k=10, cutoff=None)
    assert [h.url for h in hits] == [
        "https://www.who.int/measles",
        "https://blog.example/new",
        "https://undated.example/page",
    ]
    assert hits[0].title == "Measles & vaccines" and hits[0].published == date(2021, 3, 4) and hits[0].rank == 1
    assert "format=json" in web_server.requests[0]["path"] and "q=measles+vaccine" in web_server.requests[0]["path"]
    # Published before the cutoff only; undated ones by the rule.
    assert [h.url for h in backend.search("m", k=10, cutoff=date(2023, 1, 1))] == ["https://www.who.int/measles"]
    backend.undated = "include"
    assert len(backend.search("m", k=10, cutoff=date(2023, 1, 1))) == 2


def test_brave_sends_its_key_and_the_date_range(web_server: WebServer) -> None:
    web_server.add("/res/v1/web/search", json.dumps(BRAVE_ANSWER), content_type="application/json")
    backend = BraveBackend(api_key="secret-key", base_url=web_server.url("/res/v1"), http=_http())
    hits = backend.search("measles", k=5, cutoff=date(2023, 1, 1))
    assert [(h.url, h.title, h.snippet) for h in hits] == [
        ("https://www.cdc.gov/measles", "About Measles", "Measles is highly contagious.")
    ]
    request = web_server.requests[0]
    assert request["x-subscription-token"] == "secret-key"
    assert "freshness=1990-01-01to2022-12-31" in request["path"] and "count=5" in request["path"]


def test_a_429_is_retried_with_backoff_then_succeeds(web_server: WebServer) -> None:
    calls: list[int] = []

    def handler(request: BaseHTTPRequestHandler) -> None:
        calls.append(1)
        status, body = (429, b"slow down") if len(calls) < 3 else (200, json.dumps(SEARXNG_ANSWER).encode())
        request.send_response(status)
        request.send_header("Retry-After", "0")
        request.send_header("Content-Length", str(len(body)))
        request.end_headers()
        request.wfile.write(body)

    web_server.add_handler("/search", handler)
    sleeps: list[float] = []
    backend = SearxngBackend(base_url=web_server.url(""), http=HttpJson(retries=2, backoff_s=0.01, sleep=sleeps.append))
    assert len(backend.search("m", k=2, cutoff=None)) == 2
    assert len(calls) == 3 and sleeps == [0.01, 0.02]


def test_persistent_rate_limits_and_errors_raise_a_backend_error(web_server: WebServer) -> None:
    web_server.add("/search", "busy", status=429, content_type="text/plain")
    with pytest.raises(BackendError, match="rate limited"):
        SearxngBackend(base_url=web_server.url(""), http=_http()).search("m", k=2, cutoff=None)
    web_server.add("/search", "<html>not json</html>")
    with pytest.raises(BackendError, match="not JSON"):
        SearxngBackend(base_url=web_server.url(""), http=_http()).search("m", k=2, cutoff=None)
    with pytest.raises(BackendError, match="HTTP 404"):
        BraveBackend(api_key="k", base_url=web_server.url("/nothing"), http=_http()).search("m", k=2, cutoff=None)
