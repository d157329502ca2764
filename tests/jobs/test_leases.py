"""Leases, heartbeats and the sweeper: a real worker SIGKILLed mid-work; a new
worker completes the work exactly once after the sweeper re-queues it (no 1-hour visibility wait)."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import pytest
from django.conf import settings
from django.utils import timezone

from evidence import snippets
from evidence.models import EvidenceSource, Snippet
from notes import services
from notes.models import DraftJob
from tests.conftest import wait_for
from tests.evidence.conftest import MEASLES, article
from tests.notes.factories import make_job, make_post, make_ready_snippet
from tests.support.llm_server import Reply

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

# A short lease so the test waits seconds, not the default minute (the heartbeat renews it every second).
SHORT_LEASE = {"WORK_LEASE_S": "3"}


def _lease(model: Any, pk: int) -> Any:
    return model.objects.values_list("lease_until", flat=True).get(pk=pk)


def test_the_default_lease_and_sweep_recover_within_two_minutes() -> None:
    assert settings.WORK_LEASE_S + settings.WORK_SWEEP_INTERVAL_S <= 120
    assert settings.CELERY_BEAT_SCHEDULE["work-sweep"]["schedule"] == settings.WORK_SWEEP_INTERVAL_S
    assert settings.WORK_LEASE_S < settings.CELERY_VISIBILITY_TIMEOUT


def test_a_snippet_of_a_killed_worker_is_processed_once_by_a_new_worker(
    worker_factory: Any, web_server: Any, contributor: Any
) -> None:
    held = threading.Event()
    hits: list[int] = []
    body = article(MEASLES * 3, title="Measles").encode()

    def page(handler: Any) -> None:
        hits.append(1)
        if len(hits) == 1:
            held.wait(60)  # the first worker's fetch hangs here until it is killed
        handler.send_response(200)
        handler.send_header("Content-Type", "text/html; charset=utf-8")
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        try:
            handler.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass

    url = web_server.add_handler("/measles", page)
    first = worker_factory(extra_env=SHORT_LEASE)
    _, _, (snippet,), _ = services.draft_job_start(
        post=make_post("Measles vaccines do not work."), user=contributor, urls=[url]
    )
    wait_for(lambda: hits, timeout=60)
    leased = _lease(Snippet, snippet.pk)
    assert leased is not None
    # The heartbeat keeps a live worker's lease ahead of the clock (work may outlast the lease).
    wait_for(lambda: _lease(Snippet, snippet.pk) > leased + timedelta(seconds=1), timeout=15)
    assert snippets.snippets_sweep() == []  # a live lease is never swept
    first.kill()
    held.set()
    second = worker_factory(extra_env=SHORT_LEASE)
    # Before leases, the snippet stayed "fetching" until the broker's 1-hour visibility timeout.
    requeued = wait_for(snippets.snippets_sweep, timeout=30)
    assert requeued == [snippet.pk]
    wait_for(lambda: Snippet.objects.get(pk=snippet.pk).state in ("ready", "failed"), timeout=120)
    done = Snippet.objects.get(pk=snippet.pk)
    assert done.state == "ready", (done.error_code, done.error_message, second.output())
    assert done.passage is not None and "97 percent" in done.passage.text
    assert done.lease_until is None
    assert EvidenceSource.objects.count() == 1
    assert len(hits) == 2  # the killed attempt and the one that completed
    assert snippets.snippets_sweep() == []


def test_a_draft_of_a_killed_worker_is_written_once_by_a_new_worker(
    worker_factory: Any, llm_server: Any, contributor: Any
) -> None:
    held = threading.Event()
    llm_server.script(Reply(content="Never used: this worker is killed.", hold=held))
    llm_server.respond_with(lambda messages: "Controlled trials show vitamin C does not prevent flu.")
    job = make_job(contributor)
    kept = make_ready_snippet(job, "https://a.example/trials", "Trials found vitamin C does not prevent flu.")
    snippets.snippet_review(snippet=kept, user=contributor, confirmed=True)
    first = worker_factory(extra_env=SHORT_LEASE)
    services.draft_job_request_draft(job=job, seen_round=0)
    wait_for(lambda: llm_server.requests, timeout=60)
    assert _lease(DraftJob, job.pk) is not None
    first.kill()
    held.set()
    worker_factory(extra_env=SHORT_LEASE)
    assert wait_for(services.draft_jobs_sweep, timeout=30) == [job.pk]
    wait_for(lambda: DraftJob.objects.get(pk=job.pk).state != DraftJob.State.DRAFTING, timeout=90)
    job.refresh_from_db()
    assert (job.state, job.draft_round, job.lease_until) == (DraftJob.State.DRAFTED, 1, None)
    assert job.draft_text.startswith("Controlled trials show vitamin C does not prevent flu.")
    assert len(llm_server.requests) == 2
    assert services.draft_jobs_sweep() == []


def test_the_sweeper_leaves_live_and_finished_work_alone(contributor: Any) -> None:
    job = make_job(contributor)
    live = Snippet.objects.create(
        post=job.post, draft_job=job, url="https://a.org/1", state="embedding",
        lease_until=timezone.now() + timedelta(seconds=30),
    )  # fmt: skip
    lost = Snippet.objects.create(
        post=job.post, draft_job=job, url="https://a.org/2", state="embedding",
        lease_until=timezone.now() - timedelta(seconds=1),
    )  # fmt: skip
    Snippet.objects.create(post=job.post, draft_job=job, url="https://a.org/3", state="ready")
    assert snippets.snippets_sweep() == [lost.pk]
    assert Snippet.objects.get(pk=lost.pk).state == "queued"
    assert Snippet.objects.get(pk=live.pk).state == "embedding"
    assert snippets.snippets_sweep() == []  # re-queued once: a second sweep does nothing
