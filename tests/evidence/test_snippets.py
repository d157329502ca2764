"""evidence.snippets: claiming, processing through the shared source cache, retries, reviews."""

from __future__ import annotations

from typing import Any

import pytest

from evidence import snippets
from evidence.models import EvidenceSource, Snippet
from tests.notes.factories import make_job, make_post
from tests.support.web_server import WebServer

from .conftest import MEASLES, article, snippets_for


@pytest.mark.django_db
def test_it_claims_a_snippet_only_once(contributor: Any) -> None:
    snippet = snippets_for(make_job(contributor), ["https://example.org/a"])[0]
    assert snippets.snippet_claim(snippet_id=snippet.pk)
    assert not snippets.snippet_claim(snippet_id=snippet.pk)
    assert Snippet.objects.get(pk=snippet.pk).state == Snippet.State.FETCHING


@pytest.mark.django_db
def test_it_serves_a_fresh_source_from_the_database(contributor: Any, web_server: WebServer, settings: Any) -> None:
    settings.EVIDENCE_REFINE = False
    url = web_server.add("/article", article(MEASLES * 3, title="Measles").encode())
    first, second = snippets_for(make_job(contributor), [url]) + snippets_for(make_job(contributor), [url])
    snippets.snippet_process(snippet_id=first.pk)
    snippets.snippet_process(snippet_id=second.pk)
    first.refresh_from_db()
    second.refresh_from_db()
    assert first.state == second.state == Snippet.State.READY
    assert len([r for r in web_server.requests if r["path"] == "/article"]) == 1
    assert second.timings_ms.get("cache_hit") == 1
    assert second.passage_id == first.passage_id
    assert EvidenceSource.objects.count() == 1


@pytest.mark.django_db
def test_it_puts_transient_failures_back_in_the_queue(contributor: Any, settings: Any) -> None:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    settings.EVIDENCE_ALLOWED_LOCAL = [f"127.0.0.1:{port}"]  # nothing listens there: refused, a transient error
    snippet = snippets_for(make_job(contributor), [f"http://127.0.0.1:{port}/"])[0]
    with pytest.raises(snippets.TransientEvidenceError):
        snippets.snippet_process(snippet_id=snippet.pk, final_attempt=False)
    snippet.refresh_from_db()
    assert (snippet.state, snippet.error_code) == ("queued", "connection_error")
    snippets.snippet_process(snippet_id=snippet.pk, final_attempt=True)
    snippet.refresh_from_db()
    assert (snippet.state, snippet.error_code) == ("failed", "connection_error")


@pytest.mark.django_db
def test_it_never_retries_permanent_failures(contributor: Any) -> None:
    snippet = snippets_for(make_job(contributor), ["http://169.254.169.254/latest/meta-data/"])[0]
    snippets.snippet_process(snippet_id=snippet.pk, final_attempt=False)
    snippet.refresh_from_db()
    assert (snippet.state, snippet.error_code) == ("failed", "blocked_address")


@pytest.mark.django_db
def test_it_stores_the_sentence_of_the_passage_that_matches_the_post(
    contributor: Any, web_server: WebServer, settings: Any
) -> None:
    settings.EVIDENCE_REFINE = False
    url = web_server.add("/measles", article(MEASLES, title="Measles facts").encode())
    job = make_job(contributor, make_post("The MMR jab does nothing against measles, two doses are useless."))
    snippet = snippets_for(job, [url])[0]
    snippets.snippet_process(snippet_id=snippet.pk)
    snippet.refresh_from_db()
    assert snippet.state == Snippet.State.READY
    assert snippet.sentence == MEASLES[1]
    assert (
        snippet.passage is not None
        and snippet.passage.text[snippet.sentence_start : snippet.sentence_end] == MEASLES[1]
    )
    assert "sentence" in snippet.timings_ms
    # A retry starts over: no sentence until the page is matched again.
    snippets.snippet_fail(snippet_id=snippet.pk, error_code="http_error", message="gone")
    snippets.snippet_retry(snippet=Snippet.objects.get(pk=snippet.pk))
    snippet.refresh_from_db()
    assert (snippet.sentence_start, snippet.sentence_end, snippet.sentence) == (None, None, "")


@pytest.mark.django_db
def test_the_refine_moves_the_sentence_with_the_passage(contributor: Any, web_server: WebServer, settings: Any) -> None:
    settings.EVIDENCE_REFINE = False
    filler = MEASLES[2:] * 8
    url = web_server.add("/long-measles", article([*filler, MEASLES[0] + " " + MEASLES[1], *filler]).encode())
    job = make_job(contributor, make_post("Two doses of MMR don't prevent measles."))
    snippet = snippets_for(job, [url])[0]
    snippets.snippet_process(snippet_id=snippet.pk)
    snippet.refresh_from_db()
    assert snippet.passage is not None and snippet.sentence == MEASLES[1]
    passages = list(snippet.source.passages.order_by("chunk_index")) if snippet.source else []
    wrong = next(p for p in passages if MEASLES[1] not in p.text)
    # As a pre-filter miss would leave it: a filler passage and that passage's own sentence.
    Snippet.objects.filter(pk=snippet.pk).update(passage=wrong, sentence_start=0, sentence_end=20, refine_pending=True)
    snippets.snippet_refine(snippet_id=snippet.pk)
    snippet.refresh_from_db()
    assert snippet.passage is not None and snippet.passage.pk != wrong.pk and MEASLES[1] in snippet.passage.text
    assert snippet.sentence == MEASLES[1]
