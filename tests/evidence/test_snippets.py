"""evidence.snippets: claiming, processing through the shared source cache, retries, reviews."""

from __future__ import annotations

from typing import Any

import pytest

from evidence import snippets
from evidence.models import EvidenceSource, Snippet
from tests.notes.factories import make_job
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
