"""Fair ordering of the CPU queue across users and of the LLM queue, where a long Supernote run is
done in slices; and the lease of the snippet refine (a lost
refine is queued again by the sweeper and completes once). Real worker, Redis, PostgreSQL."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from crowdnotes_site.models import OutboxMessage
from crowdnotes_site.queue import fair_priority
from evidence import snippets
from evidence.models import Snippet
from judging import services as judging_services
from judging.models import PreflightCheck
from notes.models import SupernoteRun
from notes.roles import ADMIN, CONTRIBUTOR
from notes.supernotes import services as supernotes
from tests.conftest import _make_user, wait_for
from tests.evidence.conftest import MEASLES, article
from tests.notes.factories import make_job, make_post
from tests.notes.supernotes.test_run_limits import _plain_stuck_post
from tests.support.llm_server import Reply
from tests.support.worker import purge_broker

pytestmark = [pytest.mark.django_db(transaction=True)]


def test_each_users_kth_recent_message_gets_priority_k(contributor: Any, settings: Any) -> None:
    other = _make_user("bea", CONTRIBUTOR)
    job = make_job(contributor)
    snippets.snippets_add(job=job, urls=[f"https://example.org/a{i}" for i in range(12)])
    mine = list(OutboxMessage.objects.filter(owner_id=contributor.pk).order_by("pk").values_list("priority", flat=True))
    assert mine == [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 9, 9]  # capped at the last priority step
    assert fair_priority(other.pk) == 0  # somebody else's first message goes ahead of all of them
    # Outside the window a message no longer counts against its owner.
    OutboxMessage.objects.update(created_at=timezone.now() - timedelta(seconds=settings.FAIR_QUEUE_WINDOW_S + 1))
    assert fair_priority(contributor.pk) == 0


@pytest.mark.worker
def test_a_second_users_first_job_overtakes_the_first_users_backlog(
    worker_factory: Any, web_server: Any, contributor: Any
) -> None:
    other = _make_user("bea", CONTRIBUTOR)
    body = article(MEASLES, title="Measles").encode()
    a_urls = [web_server.add(f"/a{i}", body) for i in range(6)]
    b_url = web_server.add("/b0", body)
    # Both users queue before the worker starts, A first: a plain FIFO queue would serve B last.
    snippets.snippets_add(job=make_job(contributor, make_post("Measles vaccines do not work.")), urls=a_urls)
    snippets.snippets_add(job=make_job(other, make_post("The measles vaccine causes autism.")), urls=[b_url])
    assert OutboxMessage.objects.filter(delivered_at__isnull=True).count() == 0  # all sent to Redis
    worker = worker_factory(queues="cpu", extra_env={"EVIDENCE_REFINE": "0"})
    wait_for(lambda: Snippet.objects.filter(state__in=("ready", "failed")).count() == 7, timeout=180)
    assert set(Snippet.objects.values_list("state", flat=True)) == {"ready"}, worker.output()
    # One solo worker: the order the pages were fetched is the order the jobs ran and completed.
    served = [r["path"] for r in web_server.requests]
    assert sorted(served) == sorted(["/b0", *(f"/a{i}" for i in range(6))])
    # B's only job runs second at the latest (A's first shares priority 0 and was queued earlier).
    assert served.index("/b0") <= 1, served
    # Each user's own jobs stay first in, first out.
    assert [p for p in served if p.startswith("/a")] == [f"/a{i}" for i in range(6)]
    # The same order in the rows: B's snippet was ready before 5 of A's 6.
    ready_at = dict(Snippet.objects.values_list("url", "updated_at"))
    assert sum(ready_at[url] > ready_at[b_url] for url in a_urls) >= 5


def _llm_answer(messages: list[dict[str, Any]]) -> str:
    """A Supernote candidate names the run's post (Alpha or Bravo), so the principle checks of its
    text can be told apart too; every other call (checks, the pre-flight's judges) is a yes."""
    if "consensus Community Notes" in messages[0]["content"]:
        run = "Alpha" if "Alpha" in messages[-1]["content"] else "Bravo"
        return f"{run}: studies of millions of children found no link between vaccines and autism."
    return "Fine.\nFinal decision: yes"


def _whose(request: dict[str, Any]) -> str:
    text = " ".join(str(m.get("content", "")) for m in request["messages"])
    return "B" if "Garlic" in text else "A1" if "Alpha" in text else "A2"


@pytest.mark.worker
def test_a_second_users_preflight_goes_between_the_slices_of_the_first_users_supernote_runs(
    worker_factory: Any, llm_server: Any, tmp_path: Any
) -> None:
    """A has two Supernote runs going (slices of 2 candidates, each slice a message in A's fair
    turn); B asks for a pre-flight while A's first slice is on the LLM. B's check is served as soon
    as that slice ends: before the second run's first slice, which was queued earlier (plain FIFO
    would serve that one first) and long before A's runs finish."""
    starter, other = _make_user("ann", ADMIN), _make_user("bea", CONTRIBUTOR)
    alpha = _plain_stuck_post("Alpha claim: vaccines cause autism.")
    bravo = _plain_stuck_post("Bravo claim: vaccines cause autism.")
    purge_broker()  # the posts' topic classifications: not part of this test
    held = threading.Event()
    llm_server.script(Reply(content="Alpha: no link between vaccines and autism was found.", hold=held))
    llm_server.respond_with(_llm_answer)
    env = {"SUPERNOTE_SLICE_CANDIDATES": "2", "PHM_DIR": str(tmp_path / "no-phm")}  # no jury: candidates only
    worker = worker_factory(queues="llm", extra_env=env)
    runs = [supernotes.supernote_run_start(post=p, user=starter, n_candidates=4, jury_size=10) for p in (alpha, bravo)]
    wait_for(lambda: llm_server.requests, timeout=60)  # A's first slice (run Alpha) holds the worker
    check = judging_services.preflight_request(
        user=other, post_text="Garlic cures flu.", note_text="Trials found garlic does not cure flu.",
        snippets=["Trials found that garlic does not prevent or cure flu."],
    )  # fmt: skip
    wait_for(lambda: not OutboxMessage.objects.filter(delivered_at__isnull=True).exists(), timeout=10)
    held.set()
    wait_for(lambda: SupernoteRun.objects.filter(state__in=("done", "failed")).count() == 2, timeout=180)
    check.refresh_from_db()
    assert check.state == PreflightCheck.State.DONE, (check.error, worker.output())
    ends = [run.finished_at for run in SupernoteRun.objects.filter(pk__in=[r.pk for r in runs], state="done")]
    assert len(ends) == 2, worker.output()
    assert check.finished_at is not None and all(end is not None and check.finished_at < end for end in ends)
    # The LLM's log, in the order the calls arrived: A's first slice, then B's whole check, then
    # the rest of A's work (more of run Alpha and all of run Bravo).
    order = [_whose(r) for r in llm_server.requests]
    b_calls = [k for k, who in enumerate(order) if who == "B"]
    assert len(b_calls) == 3 and b_calls == list(range(b_calls[0], b_calls[0] + 3)), order
    assert set(order[: b_calls[0]]) == {"A1"}, order
    assert "A2" in order and order.index("A2") > b_calls[-1], order
    assert "A1" in order[b_calls[-1] :], order


def test_a_users_messages_on_another_queue_do_not_push_back_their_llm_turn(contributor: Any) -> None:
    job = make_job(contributor)
    snippets.snippets_add(job=job, urls=[f"https://example.org/a{i}" for i in range(5)])  # cpu queue
    assert fair_priority(contributor.pk, "evidence.tasks.snippet_process") == 5
    assert fair_priority(contributor.pk, "judging.tasks.preflight_check") == 0  # the llm queue's first


def _call(request: dict[str, Any]) -> tuple[str, str]:
    """(whose, what) of an LLM call: a run's candidate writing or principle check, or B's judge."""
    who = _whose(request)
    if who == "B":
        return who, "judge"
    return who, "write" if "consensus Community Notes" in str(request["messages"][0]["content"]) else "check"


@pytest.mark.worker
def test_a_preflight_goes_before_a_second_supernote_run_of_an_admin(
    worker_factory: Any, llm_server: Any, tmp_path: Any, settings: Any
) -> None:
    """An admin starts two Supernote runs (slices of the default SUPERNOTE_SLICE_CANDIDATES = 5);
    another contributor, who has just queued evidence pages on the CPU queue (as a contributor writing
    a note does), asks for a pre-flight while the first run's first slice is on the LLM (its first
    call is held until the pre-flight is queued, so the order does not depend on timing). The LLM
    sees the first run's first slice (5 candidates written, the 2 checks of its one distinct text),
    then the pre-flight's 3 judges, and only then the second run's first slice: the pre-flight does
    not wait behind the admin's second run. The seconds: bench/bench_fairness.py."""
    assert settings.SUPERNOTE_SLICE_CANDIDATES == 5
    starter, other = _make_user("ann", ADMIN), _make_user("bea", CONTRIBUTOR)
    alpha = _plain_stuck_post("Alpha claim: vaccines cause autism.")
    bravo = _plain_stuck_post("Bravo claim: vaccines cause autism.")
    job = make_job(other)
    purge_broker()
    held = threading.Event()
    # Held, the first candidate's answer is the text the others get too: one distinct text per run.
    llm_server.script(Reply(content=_llm_answer([{"content": "consensus Community Notes"}, {"content": "Alpha"}]),
                            hold=held))  # fmt: skip
    llm_server.respond_with(_llm_answer)
    worker = worker_factory(queues="llm", extra_env={"PHM_DIR": str(tmp_path / "no-phm")})  # no jury
    for post in (alpha, bravo):
        supernotes.supernote_run_start(post=post, user=starter, n_candidates=10, jury_size=10)
    wait_for(lambda: llm_server.requests, timeout=60)  # run 5's first slice holds the worker
    # The contributor's evidence pages wait on the CPU queue (no CPU worker in this test).
    snippets.snippets_add(job=job, urls=[f"https://example.org/page{i}" for i in range(5)])
    check = judging_services.preflight_request(
        user=other, post_text="Garlic cures flu.", note_text="Trials found garlic does not cure flu.",
        snippets=["Trials found that garlic does not prevent or cure flu."],
    )  # fmt: skip
    wait_for(lambda: not OutboxMessage.objects.filter(delivered_at__isnull=True).exists(), timeout=10)
    held.set()
    wait_for(lambda: PreflightCheck.objects.filter(pk=check.pk, state__in=("done", "failed")).exists(), timeout=120)
    wait_for(lambda: sum(_whose(r) == "A2" for r in llm_server.requests) >= 7, timeout=120)
    check.refresh_from_db()
    assert check.state == PreflightCheck.State.DONE, (check.error, worker.output())
    calls = [_call(r) for r in llm_server.requests]
    first_slice = [("A1", "write")] * 5 + [("A1", "check")] * 2
    second_runs_slice = [("A2", "write")] * 5 + [("A2", "check")] * 2
    assert calls[:17] == first_slice + [("B", "judge")] * 3 + second_runs_slice, calls
    print(f"LLM call order {''.join(w[-1] for w, _ in calls)} (B = the pre-flight)")


@pytest.mark.worker
def test_a_refine_whose_worker_was_lost_is_requeued_by_the_sweeper_and_completes_once(
    worker_factory: Any, web_server: Any, contributor: Any, settings: Any
) -> None:
    settings.PASSAGE_TOKENS, settings.PASSAGE_OVERLAP = 96, 24  # several passages: the pre-filter skips some
    url = web_server.add("/article", article(MEASLES * 3, title="Measles").encode())
    (snippet,) = snippets.snippets_add(
        job=make_job(contributor, make_post("Measles vaccines do not work.")), urls=[url]
    )
    purge_broker()  # no worker yet: process here, so the refine's message can be lost on purpose
    snippets.snippet_process(snippet_id=snippet.pk)
    row = Snippet.objects.get(pk=snippet.pk)
    assert row.state == "ready" and row.refine_pending and None in row.scores
    purge_broker()  # the refine's message is lost ...
    assert snippets.snippet_refine_claim(snippet_id=snippet.pk)  # ... after a worker took it, and died:
    Snippet.objects.filter(pk=snippet.pk).update(lease_until=timezone.now() - timedelta(seconds=1))
    assert snippets.snippets_sweep() == []  # not a processing job: that sweeper leaves it alone
    worker = worker_factory(
        queues="cpu", extra_env={"WORK_LEASE_S": "3", "PASSAGE_TOKENS": "96", "PASSAGE_OVERLAP": "24"}
    )
    assert snippets.snippet_refines_sweep() == [snippet.pk]
    wait_for(lambda: not Snippet.objects.get(pk=snippet.pk).refine_pending, timeout=120)
    done = Snippet.objects.get(pk=snippet.pk)
    assert None not in done.scores, worker.output()
    assert "refine" in done.timings_ms and done.lease_until is None
    # Done once: nothing left to sweep, and a duplicate delivery finds nothing to claim.
    assert snippets.snippet_refines_sweep() == []
    assert not snippets.snippet_refine_claim(snippet_id=snippet.pk)


def test_a_refine_whose_message_was_lost_before_any_worker_took_it_is_requeued(contributor: Any, settings: Any) -> None:
    job = make_job(contributor)
    (snippet,) = snippets.snippets_add(job=job, urls=["https://example.org/a"])
    Snippet.objects.filter(pk=snippet.pk).update(state="ready", refine_pending=True, scores=[0.5, None])
    assert snippets.snippet_refines_sweep() == []  # just queued: its message may still be on its way
    old = timezone.now() - timedelta(seconds=settings.CELERY_TASK_TIME_LIMIT + 31)
    Snippet.objects.filter(pk=snippet.pk).update(updated_at=old)
    assert snippets.snippet_refines_sweep() == [snippet.pk]
    assert OutboxMessage.objects.filter(task_name="evidence.tasks.snippet_refine").count() == 1
    assert snippets.snippet_refines_sweep() == []  # queued again once, not on every sweep
