"""The evidence tasks in a real Celery worker: every source settles, failures are stored, refine runs."""

from __future__ import annotations

from typing import Any

import pytest

from evidence.models import Passage, Snippet
from tests.conftest import wait_for
from tests.notes.factories import make_job
from tests.support.web_server import WebServer

from .conftest import MEASLES, article, make_pdf, slow_drip, snippets_for


@pytest.mark.worker
def test_it_processes_every_source_even_when_one_fails_and_one_is_slow(
    worker_factory: Any, contributor: Any, web_server: WebServer
) -> None:
    from evidence.tasks import snippet_process

    worker_factory(
        queues="cpu",
        extra_env={
            "EVIDENCE_FETCH_TIMEOUT": "1.5",
            "EVIDENCE_FETCH_RETRIES": "1",
            "EVIDENCE_RETRY_BACKOFF": "0.2",
            "PASSAGE_TOKENS": "96",
            "PASSAGE_OVERLAP": "24",
        },
    )
    urls = [
        web_server.add("/slow", slow_drip(pieces=400, delay=0.05)),
        web_server.add("/article", article(MEASLES * 3, title="Measles").encode()),
        web_server.url("/missing"),
        web_server.add("/guide.pdf", make_pdf(MEASLES), content_type="application/pdf"),
        web_server.add(
            "/consent",
            b"<html><body><h1>Before you continue</h1><p>We use cookies. Accept all or Reject all.</p></body></html>",
        ),
    ]
    job = make_job(contributor)
    snippets = snippets_for(job, urls)
    for snippet in snippets:
        snippet_process.delay(snippet.pk)

    def settled() -> list[Snippet] | None:
        rows = list(Snippet.objects.filter(draft_job=job).order_by("position"))
        return rows if all(s.state in (Snippet.State.READY, Snippet.State.FAILED) for s in rows) else None

    slow, good, missing, pdf, consent = wait_for(settled, timeout=120)
    assert (slow.state, slow.error_code) == ("failed", "timeout")
    assert (missing.state, missing.error_code) == ("failed", "http_error")
    assert (consent.state, consent.error_code) == ("failed", "block_page")
    for ready in (good, pdf):
        assert ready.state == "ready", (ready.error_code, ready.error_message)
        assert "97 percent" in ready.passage.text
        # The shown passage is the best after the prose demotion (evidence/prose.py), so its raw
        # similarity is one of the stored scores, not necessarily the largest.
        scored = [s for s in ready.scores if s is not None]
        assert any(ready.similarity == pytest.approx(s) for s in scored)
        assert ready.similarity >= max(scored) * 0.5
        assert {"fetch", "extract", "match", "total"} <= set(ready.timings_ms)
    assert good.source.title == "Measles"
    assert len(good.scores) > 2  # several passages at 96 tokens
    # The refine task embeds the passages the pre-filter skipped.
    wait_for(lambda: all(s is not None for s in Snippet.objects.get(pk=good.pk).scores), timeout=60)
    assert Passage.objects.filter(source=good.source, embedding__isnull=True).count() == 0
