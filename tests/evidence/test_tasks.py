from __future__ import annotations

import json
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from evidence import services
from evidence.models import EvidenceSource, Passage, Snippet
from tests.conftest import wait_for
from tests.notes.factories import make_job

from .conftest import LoopbackServer, article, make_pdf, slow_drip

MEASLES = [
    "Measles is a highly contagious viral disease that spreads through the air when an infected person coughs or sneezes.",
    "Two doses of the measles, mumps and rubella vaccine are about 97 percent effective at preventing measles infection.",
    "Volcanic ash clouds can disrupt air travel for days, and lava flows destroy roads and farmland on the slopes.",
    "The football championship was decided by a penalty shootout after a goalless final at the national stadium.",
    "Sourdough bread needs an active starter, a long cold fermentation and a very hot oven with steam.",
]
POST = "The MMR vaccine does not protect kids from measles at all."


def _snippets(job: Any, urls: list[str]) -> list[Snippet]:
    return [Snippet.objects.create(post=job.post, draft_job=job, url=url, position=i) for i, url in enumerate(urls)]


@pytest.mark.worker
def test_it_processes_every_source_even_when_one_fails_and_one_is_slow(
    worker_factory: Any, contributor: Any, evidence_server: LoopbackServer
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
        evidence_server.add("/slow", slow_drip(pieces=400, delay=0.05)),
        evidence_server.add("/article", article(MEASLES * 3, title="Measles").encode()),
        evidence_server.url("/missing"),
        evidence_server.add("/guide.pdf", make_pdf(MEASLES), content_type="application/pdf"),
        evidence_server.add(
            "/consent",
            b"<html><body><h1>Before you continue</h1><p>We use cookies. Accept all or Reject all.</p></body></html>",
        ),
    ]
    job = make_job(contributor)
    snippets = _snippets(job, urls)
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
        assert ready.similarity == pytest.approx(max(s for s in ready.scores if s is not None))
        assert {"fetch", "extract", "match", "total"} <= set(ready.timings_ms)
    assert good.source.title == "Measles"
    assert len(good.scores) > 2  # several passages at 96 tokens
    # The refine task embeds the passages the pre-filter skipped.
    wait_for(lambda: all(s is not None for s in Snippet.objects.get(pk=good.pk).scores), timeout=60)
    assert Passage.objects.filter(source=good.source, embedding__isnull=True).count() == 0


@pytest.mark.django_db
def test_it_claims_a_snippet_only_once(contributor: Any) -> None:
    snippet = _snippets(make_job(contributor), ["https://example.org/a"])[0]
    assert services.snippet_claim(snippet_id=snippet.pk)
    assert not services.snippet_claim(snippet_id=snippet.pk)
    assert Snippet.objects.get(pk=snippet.pk).state == Snippet.State.FETCHING


@pytest.mark.django_db
def test_it_serves_a_fresh_source_from_the_database(
    contributor: Any, evidence_server: LoopbackServer, settings: Any
) -> None:
    settings.EVIDENCE_REFINE = False
    url = evidence_server.add("/article", article(MEASLES * 3, title="Measles").encode())
    first, second = _snippets(make_job(contributor), [url]) + _snippets(make_job(contributor), [url])
    services.snippet_process(snippet_id=first.pk)
    services.snippet_process(snippet_id=second.pk)
    first.refresh_from_db()
    second.refresh_from_db()
    assert first.state == second.state == Snippet.State.READY
    assert len([r for r in evidence_server.requests if r["path"] == "/article"]) == 1
    assert second.timings_ms.get("cache_hit") == 1
    assert second.passage_id == first.passage_id
    assert EvidenceSource.objects.count() == 1


@pytest.mark.django_db
def test_it_puts_transient_failures_back_in_the_queue(contributor: Any, settings: Any) -> None:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    snippet = _snippets(make_job(contributor), [f"http://127.0.0.1:{port}/"])[0]
    with pytest.raises(services.TransientEvidenceError):
        services.snippet_process(snippet_id=snippet.pk, final_attempt=False)
    snippet.refresh_from_db()
    assert (snippet.state, snippet.error_code) == ("queued", "connection_error")
    services.snippet_process(snippet_id=snippet.pk, final_attempt=True)
    snippet.refresh_from_db()
    assert (snippet.state, snippet.error_code) == ("failed", "connection_error")


@pytest.mark.django_db
def test_it_never_retries_permanent_failures(contributor: Any) -> None:
    snippet = _snippets(make_job(contributor), ["http://169.254.169.254/latest/meta-data/"])[0]
    services.snippet_process(snippet_id=snippet.pk, final_attempt=False)
    snippet.refresh_from_db()
    assert (snippet.state, snippet.error_code) == ("failed", "blocked_address")


def _probe(*args: str) -> dict[str, Any]:
    out = StringIO()
    call_command("evidence_probe", *args, stdout=out)
    return json.loads(out.getvalue())


@pytest.mark.django_db
def test_it_probes_a_url_and_prints_json(evidence_server: LoopbackServer) -> None:
    url = evidence_server.add("/article", article(MEASLES * 3, title="Measles").encode())
    result = _probe(url, "--post", POST, "--strategy", "exhaustive")
    assert result["ok"] is True
    assert result["error_code"] is None
    assert result["final_url"] == url
    assert result["content_type"] == "text/html"
    assert result["title"] == "Measles"
    assert result["n_passages"] >= 1
    assert "97 percent" in result["best_passage"]["text"]
    assert set(result["best_passage"]) >= {"text", "score", "chunk_index"}
    assert set(result["timings_ms"]) >= {"fetch", "extract", "match"}


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("url", "code"), [("http://10.0.0.1/", "blocked_address"), ("ftp://example.org/", "bad_scheme")]
)
def test_it_probes_failures_with_exit_status_zero(url: str, code: str) -> None:
    result = _probe(url, "--post", POST)
    assert result["ok"] is False
    assert result["error_code"] == code
    assert result["best_passage"] is None


def test_it_refuses_probe_misuse() -> None:
    with pytest.raises(CommandError):
        call_command("evidence_probe", "http://example.org/", "--post", "   ")
    with pytest.raises(CommandError):
        call_command("evidence_probe", "http://example.org/")


def test_it_warms_up_the_model_and_its_prefilter_table(settings: Any, tmp_path: Any) -> None:
    settings.MODEL_CACHE_DIR = tmp_path
    out = StringIO()
    call_command("evidence_warmup", "--model", "all-MiniLM-L6-v2", stdout=out)
    assert (tmp_path / "static-all-MiniLM-L6-v2.npy").exists()
    assert "all-MiniLM-L6-v2: ready" in out.getvalue()
