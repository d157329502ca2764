"""Pure rules (writing limit, admission, parsing) and the tasks' re-queue on a rate limit."""

from __future__ import annotations

from typing import Any

import pytest
from celery.exceptions import Retry

from crowdnotes_site.lib import xids
from notes.models import Post
from tests.support.x_server import FakeX
from tests.xnotes.factories import tweet
from xnotes import rules, tasks
from xnotes.models import XFetchRun, XPost, XTaskRun

CRH, CRNH, NMR = "CURRENTLY_RATED_HELPFUL", "CURRENTLY_RATED_NOT_HELPFUL", "NEEDS_MORE_RATINGS"


def test_writing_limit_rules_in_order() -> None:
    assert rules.writing_limit([CRNH] * 8 + [CRH] * 2, 10).limit == 2  # NH_10 ≥ 8
    assert rules.writing_limit([NMR, CRNH, CRNH, CRNH, CRH, CRH], 6).limit == 5  # NH_5 ≥ 3 (NMR skipped)
    assert rules.writing_limit([CRH] * 19, 19).limit == 10  # T < 20
    # T = 40, 20 CRH then 20 NMR: HR_R = 20/20 = 1 → 200; DN_30 = 30/30 = 1 → 5; min = 5, max(5, 5) = 5.
    wl = rules.writing_limit([CRH] * 20 + [NMR] * 20, 30)
    assert (wl.limit, wl.hr_r, wl.hr_l, wl.dn_30) == (5, 1.0, 0.5, 1.0)
    # DN_30 = 300/30 = 10 → 50; HR_L = (30 − 10) / 100 = 0.2 → 40; HR_R 0 → floor(min(50, 40)) = 40.
    statuses = [NMR] * 20 + [CRH] * 30 + [CRNH] * 10 + [NMR] * 40
    wl = rules.writing_limit(statuses, 300)
    assert (wl.nh_5, wl.hr_r, wl.hr_l, wl.limit) == (0, 0.0, 0.2, 40)


def test_admission_thresholds_at_the_edge() -> None:
    def outcome(co: str, url: str = "High", ha: str = "High") -> list[dict[str, str]]:
        return [{"evaluator_type": "ClaimOpinion", "evaluator_score_bucket": co},
                {"evaluator_type": "UrlValidity", "evaluator_score_bucket": url},
                {"evaluator_type": "HarassmentAbuse", "evaluator_score_bucket": ha}]  # fmt: skip

    notes = (
        [outcome("High")] * 15 + [outcome("Low")] * 15 + [outcome("Medium")] * 17 + [outcome("Medium", url="Low")] * 2
    )
    notes += [outcome("Medium", ha="Medium")]
    adm = rules.admission(notes)
    by = adm.by_name()
    assert (by["claim_opinion_high"].share, by["claim_opinion_high"].passed) == (0.3, True)
    assert (by["claim_opinion_low"].share, by["claim_opinion_low"].passed) == (0.3, True)
    assert (by["url_validity_high"].share, by["url_validity_high"].passed) == (0.96, True)
    assert (by["harassment_abuse_high"].share, by["harassment_abuse_high"].passed) == (0.98, True)
    assert adm.eligible
    assert not rules.admission(notes[:49]).eligible  # fewer than 50 notes


def test_suggested_choice_comes_from_the_ratings_tags_and_the_passing_judges_reasoning() -> None:
    J = rules.JudgeReason
    # Nothing to go on: the note's classification, no tag (the person picks).
    bare = rules.suggest_choice(note_misleading=True, rating_tags=[], judge_reasons=[])
    assert (bare.classification, bare.tags) == (rules.MISLEADING, [])
    assert bare.reasons == ["Misinformed or potentially misleading: the note's own classification."]
    # Ratings saying the note provides important context; a relevance judge saying the claim is false.
    s = rules.suggest_choice(
        note_misleading=True,
        rating_tags=[["helpfulImportantContext", "helpfulClear"], ["helpfulGoodSources"], []],
        judge_reasons=[J("relevance", "The snippet shows the post's claim is false: studies of 650,000 children."),
                       J("correctness", "No statement of the note is incorrect."),  # about the note: ignored
                       J("helpfulness", "Clear and sourced.")],
    )  # fmt: skip
    assert (s.classification, s.tags) == (rules.MISLEADING, ["factual_error", "missing_important_context"])
    assert "Missing important context: 1 of 3 ratings say the note provides important context." in s.reasons
    assert any(r.startswith("Factual error: the relevance judge wrote “") and "claim is false" in r for r in s.reasons)
    assert not any("correctness" in r for r in s.reasons)
    # Most ratings (2 of 3) say the note is not needed: not misleading, no tags.
    nn = rules.suggest_choice(
        note_misleading=True,
        rating_tags=[["notHelpfulNoteNotNeeded"], ["notHelpfulNoteNotNeeded", "helpfulImportantContext"], []],
        judge_reasons=[J("relevance", "The claim is false.")],
    )
    assert (nn.classification, nn.tags) == (rules.NOT_MISLEADING, [])
    assert nn.reasons[0].startswith("Not misleading: 2 of 3 ratings say the note is not needed")
    # One of one is not enough to overturn the note's classification; outdated, from helpfulness.
    one = rules.suggest_choice(note_misleading=True, rating_tags=[["notHelpfulNoteNotNeeded"]],
                               judge_reasons=[J("helpfulness", "It notes the advice is outdated since 2021.")])  # fmt: skip
    assert (one.classification, one.tags) == (rules.MISLEADING, ["outdated_information"])
    # A note that says "not misleading" keeps it, with no tags.
    nm = rules.suggest_choice(note_misleading=False, rating_tags=[["helpfulImportantContext"]],
                              judge_reasons=[J("relevance", "The claim is false.")])  # fmt: skip
    assert (nm.classification, nm.tags) == (rules.NOT_MISLEADING, [])


def test_parse_posts_and_lookup_errors() -> None:
    payload = {"data": [tweet("5", "short", note_tweet={"text": "the long one"}), {"id": "bad"}],
               "errors": [{"resource_id": "6", "title": "Not Found Error"}, {"value": "7", "title": "Authorization Error"}]}  # fmt: skip
    assert [p.text for p in rules.parse_posts(payload)] == ["the long one"]
    assert rules.lookup_errors(payload) == {"6": "Not Found Error", "7": "Authorization Error"}
    when = xids.x_id_time("1930672414444372186")
    assert when is not None and when.year == 2025


def test_fetch_task_requeues_itself_with_the_reset_as_countdown(
    x_api: FakeX, monkeypatch: pytest.MonkeyPatch, db: None
) -> None:
    x_api.eligible_pages = [[tweet("1900000000000000001", "x")]]
    x_api.rate_limit_next("/2/notes/search/posts_eligible_for_notes", reset_in_s=5)
    calls: list[dict[str, Any]] = []

    def fake_retry(**kwargs: Any) -> Retry:
        calls.append(kwargs)
        return Retry("re-queued")

    monkeypatch.setattr(tasks.x_fetch_eligible, "retry", fake_retry)
    with pytest.raises(Retry):
        tasks.x_fetch_eligible.run()
    run = XFetchRun.objects.get()
    assert run.state == XFetchRun.State.WAITING
    assert calls[0]["args"] == [run.pk]
    assert 4 <= calls[0]["countdown"] <= 6.5
    # The re-queued task, run before the reset, sends nothing (budget closed) and re-queues again.
    with pytest.raises(Retry):
        tasks.x_fetch_eligible.run(run.pk)
    assert len(x_api.requests) == 1
    assert calls[1]["countdown"] <= calls[0]["countdown"]


def test_propose_task_retries_an_unanswered_send_with_backoff(
    x_api: FakeX, monkeypatch: pytest.MonkeyPatch, db: None
) -> None:
    from tests.support.x_server import Scripted
    from tests.xnotes.factories import proposable_note
    from xnotes.models import XProposal
    from xnotes.services import proposals

    note = proposable_note()
    proposal, _ = proposals.proposal_request(note=note, user=None, classification=rules.NOT_MISLEADING, tags=[])
    x_api.script("/2/notes", Scripted(503, {"title": "Service Unavailable"}))
    calls: list[dict[str, Any]] = []

    def fake_retry(**kwargs: Any) -> Retry:
        calls.append(kwargs)
        return Retry("re-queued")

    monkeypatch.setattr(tasks.x_propose_note, "retry", fake_retry)
    with pytest.raises(Retry):
        tasks.x_propose_note.run(proposal.pk)
    assert calls[0]["args"] == [proposal.pk] and calls[0]["countdown"] == pytest.approx(0.05)
    assert XProposal.objects.get().state == XProposal.State.UNCERTAIN
    assert tasks.x_propose_note.run(proposal.pk) == XProposal.State.SENT  # checked X first, then sent once
    assert len(x_api.of("/2/notes", "POST")) == 2 and len(x_api.notes) == 1


def test_propose_task_does_nothing_without_credentials(no_x_credentials: None, db: None) -> None:
    assert tasks.x_propose_note.run(1) is None


def _imported(n: int, start: int = 1700000000000000000) -> list[Any]:
    from crowdnotes_site.lib.hashing import sha256_hex
    from notes.models import Post

    return [
        Post.objects.create(
            text="[imported]", text_hash=sha256_hex(f"t{i}"), external_id=str(start + i), text_available=False
        )
        for i in range(n)
    ]


def test_hydrate_task_records_its_run_with_progress_and_waits_for_the_reset(
    x_api: FakeX, monkeypatch: pytest.MonkeyPatch, settings: Any, db: None
) -> None:
    """The button's run (or beat's) holds the counts the writer page shows; a rate limit leaves it
    waiting until X's reset, and the retry goes on from there into the same run."""
    settings.X_HYDRATE_BATCH_LIMIT = 150
    posts = _imported(160)
    for post in posts[:120]:
        x_api.tweets[post.external_id] = tweet(post.external_id, f"Text of {post.external_id}")
    seen: list[dict[str, Any]] = []
    real_progress = tasks.runs.task_run_progress

    def progress(run: XTaskRun, **kw: Any) -> None:
        seen.append(dict(kw["counts"]))
        real_progress(run, **kw)

    monkeypatch.setattr(tasks.runs, "task_run_progress", progress)
    run = XTaskRun.objects.create(kind=XTaskRun.Kind.HYDRATE)
    assert tasks.x_hydrate_posts.run(run.pk) == {"requests": 2, "looked_up": 150, "hydrated": 120, "not_found": 30,
                                                 "skipped": 0}  # fmt: skip
    run.refresh_from_db()
    assert run.state == XTaskRun.State.DONE and run.total == 150 and run.finished_at is not None
    assert run.counts["hydrated"] == 120
    assert [c["looked_up"] for c in seen] == [0, 100, 150]  # saved before the first request and after each batch

    # Beat's run, into a closed window: waiting, re-queued for the reset, nothing sent.
    x_api.rate_limit_next("/2/tweets", reset_in_s=5)
    calls: list[dict[str, Any]] = []

    def fake_retry(**kw: Any) -> Retry:
        calls.append(kw)
        return Retry("re-queued")

    monkeypatch.setattr(tasks.x_hydrate_posts, "retry", fake_retry)
    XPost.objects.update(lookup_error_at=None, hydrated_at=None)
    Post.objects.filter(pk__in=[p.pk for p in posts[120:]]).update(text_available=False)
    with pytest.raises(Retry):
        tasks.x_hydrate_posts.run()
    waiting = XTaskRun.objects.exclude(pk=run.pk).get()
    assert waiting.state == XTaskRun.State.WAITING and waiting.wait_until is not None
    assert calls[0]["args"] == [waiting.pk] and 4 <= calls[0]["countdown"] <= 6.5
    assert tasks.x_hydrate_posts.run() is None  # beat again meanwhile: one run at a time


def test_sync_task_records_its_run(x_api: FakeX, db: None) -> None:
    for i in range(3):
        x_api.notes.append({"id": str(1940000000000000000 + (i << 22)), "info": {"post_id": str(1800000000000000000 + i)},
                            "status": "needs_more_ratings", "test_result": {"evaluation_outcome": x_api.outcomes}})  # fmt: skip
    x_api.written_page_size = 2
    run = XTaskRun.objects.create(kind=XTaskRun.Kind.SYNC)
    assert tasks.x_sync_written.run(run.pk) == {"requests": 2, "notes": 3}
    run.refresh_from_db()
    assert run.state == XTaskRun.State.DONE and run.counts == {"requests": 2, "pages": 2, "notes": 3}
    assert tasks.x_sync_written.run(run.pk) is None  # a finished run is not run again
