from __future__ import annotations

import pytest

from evidence.fetch import FetchPolicy
from evidence.matching import Matcher
from evidence.pipeline import retrieve_and_match
from tests.support.web_server import WebServer

from .conftest import article, make_pdf, slow_drip

HEALTH = [
    "Measles is a highly contagious viral disease that spreads through the air when an infected person coughs or sneezes.",
    "Two doses of the measles, mumps and rubella vaccine are about 97 percent effective at preventing measles infection.",
    "Volcanic ash clouds can disrupt air travel for days, and lava flows destroy roads and farmland on the slopes.",
    "The football championship was decided by a penalty shootout after a goalless final at the national stadium.",
] * 10
POST = "The MMR vaccine does not protect children against measles."


def _run(url: str, matcher: Matcher, policy: FetchPolicy):
    return retrieve_and_match(url, POST, matcher=matcher, policy=policy)


def test_it_runs_retrieve_and_match_on_a_page(
    web_server: WebServer, test_policy: FetchPolicy, minilm_matcher: Matcher
) -> None:
    url = web_server.add("/article", article(HEALTH, title="Measles").encode())
    stages: list[str] = []
    result = retrieve_and_match(url, POST, matcher=minilm_matcher, policy=test_policy, on_stage=stages.append)
    assert result.ok and result.error_code is None
    assert stages == ["fetching", "extracting", "embedding"]
    summary = result.summary()
    assert summary["title"] == "Measles"
    assert summary["n_passages"] == len(result.chunks) > 1
    best, timings = summary["best_passage"], summary["timings_ms"]
    assert isinstance(best, dict) and "measles" in best["text"].lower()
    assert isinstance(timings, dict) and set(timings) >= {"fetch", "extract", "match"}


def test_it_matches_a_pdf(web_server: WebServer, test_policy: FetchPolicy, minilm_matcher: Matcher) -> None:
    url = web_server.add("/doc.pdf", make_pdf(HEALTH[:4] * 2), content_type="application/pdf")
    result = _run(url, minilm_matcher, test_policy)
    assert result.ok
    assert result.fetched.content_type == "application/pdf"
    assert "97 percent" in result.summary()["best_passage"]["text"]


@pytest.mark.parametrize(
    ("setup", "code"),
    [
        (lambda s: s.url("/missing"), "http_error"),
        (lambda s: s.add("/empty", b"<html><body><nav><a href='/'>Home</a></nav></body></html>"), "empty_text"),
        (
            lambda s: s.add(
                "/blocked",
                b"<html><head><title>Just a moment...</title></head><body><div id='cf-chl-widget'>Checking your browser</div></body></html>",
            ),
            "block_page",
        ),
        (lambda s: s.add("/image", b"GIF89a" + bytes(range(256)) * 8, content_type="text/html"), "unsupported_type"),
        (lambda s: s.add("/big", b"x", headers={"Content-Length": "50000000"}), "too_large"),
        (lambda s: s.add("/slow", slow_drip(pieces=100, delay=0.05)), "timeout"),
        (
            lambda s: s.add(
                "/to-metadata", status=302, headers={"Location": "http://169.254.169.254/latest/meta-data/"}
            ),
            "blocked_address",
        ),
        (lambda s: "gopher://127.0.0.1/", "bad_scheme"),
    ],
)
def test_it_reports_each_failure_as_an_error_code(
    setup, code: str, web_server: WebServer, test_policy: FetchPolicy, minilm_matcher: Matcher
) -> None:
    policy = FetchPolicy(**{**test_policy.__dict__, "total_timeout": 1.5})
    result = _run(setup(web_server), minilm_matcher, policy)
    assert not result.ok
    assert result.error_code == code
    assert result.match is None
    assert result.summary()["error_code"] == code
