"""The refine in bounded slices: each task embeds at most
EVIDENCE_SLICE_PASSAGES passages and queues the next slice at the back, in the contributor's fair
turn; the best passage so far improves in place; a lost slice resumes; the draft page says how
many sources are ahead of a queued one. The interleaving of two users runs on a real worker."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from crowdnotes_site.models import OutboxMessage
from evidence import prefetch, snippets
from evidence.models import Passage, Prefetch, Snippet
from notes.roles import CONTRIBUTOR
from tests.conftest import _make_user, wait_for
from tests.notes.factories import make_job, make_post
from tests.support.web_server import WebServer

from .conftest import MEASLES, article

REFINE = "evidence.tasks.snippet_refine"
# Many short passages, of which exactly one answers the post (the rest are off-topic filler).
FILLER = MEASLES[2:] * 8
LONG_DOC = [*FILLER, MEASLES[1], *FILLER]


def long_doc(tag: str, copies: int = 1) -> str:
    """LONG_DOC as a page whose passages no other test embedded (the matcher caches vectors by
    text hash across tests, and a page whose passages are all cached is matched exhaustively)."""
    paragraphs = [f"{p} ({tag} {i})" for i, p in enumerate(LONG_DOC * copies)]
    return article(paragraphs, title="Notes")


def _first_pick(contributor: Any, web_server: WebServer, settings: Any, tag: str) -> Snippet:
    """A long page (short passages, one of them the answer) read and matched with a pre-filter of
    one passage, so nearly all of it is left to the refine; the test's slice settings apply."""
    settings.PASSAGE_TOKENS, settings.PASSAGE_OVERLAP = 48, 8
    settings.EVIDENCE_PREFILTER_K = 1
    url = web_server.add("/long", long_doc(tag).encode())
    (snippet,) = snippets.snippets_add(
        job=make_job(contributor, make_post("How effective is the measles vaccine?")), urls=[url]
    )
    snippets.snippet_process(snippet_id=snippet.pk)
    return snippet


def _refine_messages() -> int:
    return OutboxMessage.objects.filter(task_name=REFINE).count()


def test_the_plan_takes_unscored_passages_in_prerank_order_within_top_k() -> None:
    scores: list[float | None] = [0.2, None, None, 0.5, None]
    order = [4, 3, 1, 0, 2]
    assert snippets.refine_plan(scores=scores, order=order, top_k=0) == [4, 1, 2]
    assert snippets.refine_plan(scores=scores, order=order, top_k=3) == [4, 1]
    assert snippets.refine_plan(scores=[0.1, 0.2], order=[1, 0], top_k=0) == []


@pytest.mark.django_db
def test_a_refine_runs_in_slices_and_ends_on_the_exhaustive_best(
    contributor: Any, web_server: WebServer, settings: Any
) -> None:
    settings.EVIDENCE_SLICE_PASSAGES = 3
    snippet = _first_pick(contributor, web_server, settings, "slices")
    row = Snippet.objects.get(pk=snippet.pk)
    total = len(row.scores)
    assert row.refine_pending and total > 3 * settings.EVIDENCE_SLICE_PASSAGES
    slices = 0
    while Snippet.objects.get(pk=snippet.pk).refine_pending:
        before = sum(s is not None for s in Snippet.objects.get(pk=snippet.pk).scores)
        queued = _refine_messages()
        snippets.snippet_refine(snippet_id=snippet.pk)
        slices += 1
        row = Snippet.objects.get(pk=snippet.pk)
        scored = sum(s is not None for s in row.scores)
        # One slice embeds at most EVIDENCE_SLICE_PASSAGES passages (its best so far is cached).
        assert 0 < scored - before <= settings.EVIDENCE_SLICE_PASSAGES
        if row.refine_pending:
            assert _refine_messages() == queued + 1  # the next slice is a new message, at the back
            assert row.lease_until is None  # and nobody holds the snippet between slices
        assert slices < total
    row = Snippet.objects.get(pk=snippet.pk)
    assert None not in row.scores and row.timings_ms["refine_slices"] == slices >= 3
    best = max(range(total), key=lambda i: row.scores[i])
    assert row.passage is not None
    assert row.passage.chunk_index == best and "97 percent" in row.passage.text
    assert row.similarity == pytest.approx(row.scores[best])


@pytest.mark.django_db
def test_top_k_refines_only_the_prerank_top_k(contributor: Any, web_server: WebServer, settings: Any) -> None:
    settings.EVIDENCE_SLICE_PASSAGES = 50
    settings.EVIDENCE_REFINE_TOP_K = 4
    snippet = _first_pick(contributor, web_server, settings, "topk")
    snippets.snippet_refine(snippet_id=snippet.pk)
    row = Snippet.objects.get(pk=snippet.pk)
    assert not row.refine_pending
    assert sum(s is not None for s in row.scores) == 4  # the first pick is one of the top 4
    assert row.passage is not None and "97 percent" in row.passage.text


@pytest.mark.django_db
def test_a_time_bounded_refine_embeds_one_step_per_slice_on_a_slow_machine(
    contributor: Any, web_server: WebServer, settings: Any
) -> None:
    settings.EVIDENCE_SLICE_PASSAGES = 10
    settings.EVIDENCE_SLICE_SECONDS = 1e-6  # every step exceeds it, as a long step on a slow CPU would
    settings.EVIDENCE_SLICE_STEP = 2
    snippet = _first_pick(contributor, web_server, settings, "budget")
    for _ in range(2):
        before = sum(s is not None for s in Snippet.objects.get(pk=snippet.pk).scores)
        snippets.snippet_refine(snippet_id=snippet.pk)
        row = Snippet.objects.get(pk=snippet.pk)
        assert sum(s is not None for s in row.scores) - before == settings.EVIDENCE_SLICE_STEP
        assert row.refine_pending


@pytest.mark.django_db
def test_a_slice_whose_worker_was_lost_resumes_from_the_stored_slices(
    contributor: Any, web_server: WebServer, settings: Any
) -> None:
    settings.EVIDENCE_SLICE_PASSAGES = 3
    snippet = _first_pick(contributor, web_server, settings, "lost")
    snippets.snippet_refine(snippet_id=snippet.pk)  # slice 1 stored
    scored = sum(s is not None for s in Snippet.objects.get(pk=snippet.pk).scores)
    # Slice 2's worker claims it and dies (SIGKILL: no code of ours runs): the lease lapses.
    assert snippets.snippet_refine_claim(snippet_id=snippet.pk)
    Snippet.objects.filter(pk=snippet.pk).update(lease_until=timezone.now() - timedelta(seconds=1))
    queued = _refine_messages()
    assert snippets.snippet_refines_sweep() == [snippet.pk]
    assert _refine_messages() == queued + 1
    snippets.snippet_refine(snippet_id=snippet.pk)
    row = Snippet.objects.get(pk=snippet.pk)
    assert sum(s is not None for s in row.scores) == scored + settings.EVIDENCE_SLICE_PASSAGES  # nothing redone


@pytest.mark.django_db
def test_the_draft_page_says_how_many_sources_are_ahead(client: Any, contributor: Any, settings: Any) -> None:
    other = _make_user("bea", CONTRIBUTOR)
    theirs = snippets.snippets_add(job=make_job(other), urls=["https://example.org/a", "https://example.org/b"])
    job = make_job(contributor)
    (mine,) = snippets.snippets_add(job=job, urls=["https://example.org/c"])
    # Fair priorities: their 1st (0), my 1st (0), their 2nd (1) -> one source ahead of mine.
    assert snippets.snippets_ahead(snippets=[mine]) == {mine.pk: 1}
    client.force_login(contributor)
    page = client.get(f"/drafts/{job.pk}/").content.decode()
    assert "1 source ahead of yours" in page
    Snippet.objects.filter(pk=theirs[0].pk).update(state="fetching")  # being worked on: not ahead
    assert snippets.snippets_ahead(snippets=[mine]) == {mine.pk: 0}
    assert "next in line" in client.get(f"/drafts/{job.pk}/").content.decode()
    settings.CELERY_BROKER_URL = "filesystem://"  # a broker without priorities: first in, first out
    assert snippets.snippets_ahead(snippets=[mine]) == {mine.pk: 1}


@pytest.mark.worker
def test_two_users_slices_interleave_on_a_real_worker(
    worker_factory: Any, web_server: WebServer, contributor: Any
) -> None:
    """User A's long document refines in many slices; user B's page, queued while A's refine runs,
    is read between two of A's slices, long before A's refine ends."""
    env = {"PASSAGE_TOKENS": "48", "PASSAGE_OVERLAP": "8", "EVIDENCE_PREFILTER_K": "1", "EVIDENCE_SLICE_PASSAGES": "2"}
    other = _make_user("bea", CONTRIBUTOR)
    long_url = web_server.add("/long", long_doc("worker", copies=2).encode())
    b_url = web_server.add("/b", article(MEASLES, title="Measles").encode())
    worker = worker_factory(queues="cpu", extra_env=env)
    (a,) = snippets.snippets_add(
        job=make_job(contributor, make_post("How effective is the measles vaccine?")), urls=[long_url]
    )
    wait_for(lambda: Snippet.objects.get(pk=a.pk).timings_ms.get("refine_slices", 0) >= 2, timeout=180)
    (b,) = snippets.snippets_add(job=make_job(other, make_post("Measles spreads through the air.")), urls=[b_url])
    wait_for(lambda: Snippet.objects.get(pk=b.pk).state in ("ready", "failed"), timeout=120)
    b_row, a_row = Snippet.objects.get(pk=b.pk), Snippet.objects.get(pk=a.pk)
    assert b_row.state == "ready", worker.output()
    # B was served while A's refine still had slices to go.
    assert a_row.refine_pending and None in a_row.scores, worker.output()
    wait_for(lambda: not Snippet.objects.get(pk=a.pk).refine_pending, timeout=300)
    a_row = Snippet.objects.get(pk=a.pk)
    assert a_row.passage is not None
    assert None not in a_row.scores and "97 percent" in a_row.passage.text


@pytest.mark.django_db
def test_a_head_start_embeds_a_long_page_in_slices(contributor: Any, web_server: WebServer, settings: Any) -> None:
    settings.PASSAGE_TOKENS, settings.PASSAGE_OVERLAP = 48, 8
    settings.EVIDENCE_SLICE_PASSAGES = 3
    settings.EVIDENCE_ALLOWED_LOCAL = [f"127.0.0.1:{web_server.port}"]
    url = web_server.add("/long", long_doc("prefetch").encode())
    prefetch.prefetch_request(user=contributor, urls=[url])
    row = Prefetch.objects.get(url=url)
    tasks = 0
    while Prefetch.objects.get(pk=row.pk).state == Prefetch.State.QUEUED:
        prefetch.prefetch_run(prefetch_id=row.pk)
        tasks += 1
        embedded = Passage.objects.filter(source__url=url, embedding__isnull=False).count()
        assert embedded <= tasks * settings.EVIDENCE_SLICE_PASSAGES  # one slice per task
        assert tasks < 100
    done = Prefetch.objects.get(pk=row.pk)
    total = Passage.objects.filter(source__url=url).count()
    assert done.state == Prefetch.State.READY and total > 2 * settings.EVIDENCE_SLICE_PASSAGES
    assert Passage.objects.filter(source__url=url, embedding__isnull=True).count() == 0
    assert tasks == -(-total // settings.EVIDENCE_SLICE_PASSAGES) and done.timings_ms["embedded"] == total
    assert OutboxMessage.objects.filter(task_name="evidence.tasks.prefetch_url").count() == tasks
