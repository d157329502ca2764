"""Local copies of real pages carry their original URL: the demo serves the shared
corpus of real pages on loopback, and a CDC page pasted from there is a CDC source — stored,
categorised and sent to X under https://www.cdc.gov/…, read from the copy."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from crowdnotes_site.lib import categories
from crowdnotes_site.lib.categories import HEALTH_AUTHORITY
from evidence import local_copies
from evidence.matching import Matcher
from evidence.models import Snippet
from evidence.pipeline import PipelineResult
from evidence.services import source_obtain
from notes.models import DraftJob, Note, Post
from notes.services import draft_job_add_urls
from tests.support.web_server import WebServer
from xnotes.services import proposals as x_proposals

LOCAL = "health/cdc.gov__about-sids.html"
REAL = "https://www.cdc.gov/vaccine-safety/about/sids.html"


@pytest.fixture
def served_copies(web_server: WebServer, shared_data: Path, settings: Any) -> str:
    """The demo's arrangement: the corpus's pages served on loopback, the manifest naming originals."""
    pages = shared_data / "webpages"
    copy = web_server.add(f"/{LOCAL}", (pages / LOCAL).read_bytes())
    settings.EVIDENCE_LOCAL_COPIES_URL = web_server.url("/")
    settings.EVIDENCE_LOCAL_COPIES_MANIFEST = str(pages / "manifest.tsv")
    return copy


def test_a_copys_url_maps_to_its_original_and_back(served_copies: str, settings: Any) -> None:
    assert local_copies.original_of(served_copies) == REAL
    assert local_copies.copy_of(REAL) == served_copies
    assert local_copies.real_address("https://example.org/a") == "https://example.org/a"
    assert (
        local_copies.real_addresses(f"See {served_copies} and https://a.example/x.")
        == f"See {REAL} and https://a.example/x."
    )
    settings.EVIDENCE_LOCAL_COPIES_MANIFEST = ""  # off: nothing is rewritten
    assert local_copies.real_address(served_copies) == served_copies


def test_a_pasted_cdc_copy_is_a_cdc_source_read_from_the_copy_and_sent_to_x_under_its_real_url(
    served_copies: str, web_server: WebServer, minilm_matcher: Matcher, contributor: Any, settings: Any
) -> None:
    post = Post.objects.create(text="Vaccines cause SIDS, the CDC hides it.", text_hash="sids")
    job = DraftJob.objects.create(post=post, contributor=contributor)
    (snippet,) = draft_job_add_urls(job=job, urls=[served_copies])
    assert snippet.url == REAL  # what the draft, the note and X see

    source = source_obtain(url=snippet.url, matcher=minilm_matcher, run=PipelineResult())
    assert [r["path"] for r in web_server.requests] == [f"/{LOCAL}"]  # read from the copy, nothing else asked
    assert (source.url, source.copy_url, source.domain) == (REAL, served_copies, "cdc.gov")
    assert source.category == HEALTH_AUTHORITY and source.category_method.startswith(("rule:", "mapping:"))
    assert "Sudden Infant Death" in source.title

    note = Note.objects.create(post=post, text="Studies find no link between vaccines and SIDS.", evidence_urls=[REAL])
    assert x_proposals.x_note_text(note) == f"Studies find no link between vaccines and SIDS. {REAL}"
    assert x_proposals.trustworthy_sources(note)
    # A note stored before (its URL the loopback copy's) is sent with the real address too.
    old = Note.objects.create(post=post, text=f"No link between vaccines and SIDS: {served_copies}",
                              evidence_urls=[served_copies])  # fmt: skip
    assert x_proposals.x_note_text(old) == f"No link between vaccines and SIDS: {REAL}"
    assert x_proposals.trustworthy_sources(old)
    assert Snippet.objects.filter(url__startswith="http://127.0.0.1").count() == 0


def test_the_same_copy_under_localhost_and_127_0_0_1_is_one_source_with_one_category(
    served_copies: str, contributor: Any
) -> None:
    as_localhost = served_copies.replace("://127.0.0.1:", "://localhost:")
    assert as_localhost != served_copies
    assert local_copies.original_of(as_localhost) == local_copies.original_of(served_copies) == REAL
    assert local_copies.real_addresses(f"See {as_localhost}") == f"See {REAL}"
    # Another port on this machine is another server, not the copies.
    other_port = as_localhost.replace(f":{urlsplit(served_copies).port}/", ":1/")
    assert local_copies.original_of(other_port) is None
    post = Post.objects.create(text="Vaccines cause SIDS, the CDC hides it.", text_hash="sids-2")
    job = DraftJob.objects.create(post=post, contributor=contributor)
    (snippet,) = draft_job_add_urls(job=job, urls=[as_localhost])
    assert snippet.url == REAL
    assert categories.category_by_rules(snippet.url).category == HEALTH_AUTHORITY


@pytest.mark.parametrize("url", ["http://localhost:8001/a.html", "http://127.0.0.1:8001/a.html", "http://[::1]:8001/a"])
def test_a_page_on_this_machine_that_is_no_copy_is_no_known_publisher_under_any_of_its_names(url: str) -> None:
    """No rule knows it (an LLM, when configured, may still name its kind from the page itself)."""
    decision = categories.category_by_rules(url)
    assert (decision.category, decision.rule) == (categories.OTHER, "no rule")
    assert categories.is_loopback(urlsplit(url).hostname)
