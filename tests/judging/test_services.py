from __future__ import annotations

import datetime as dt
import threading
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from crowdnotes_site.lib.llm.pipeline import StageResult
from judging import services
from judging.models import JudgeDecision, JudgeOverride, JudgeRun
from judging.selectors import crowd_agreement, excluded_groups, funnel
from notes.models import NoteStatus
from tests.judging.factories import SNIPPET, answers, note_with_evidence, stage_of

pytestmark = pytest.mark.django_db

ALL_YES = answers(
    relevance="Snippet 1 is on point.\nFinal decision: yes",
    correctness="Faithful.\nFinal decision: yes",
    helpfulness="Clear and sourced.\n**Final decision: yes**",
)


def _run_to_end(run: JudgeRun) -> None:
    while services.judge_run_step(run_id=run.pk) is not None:
        pass


def test_it_requests_one_run_per_content_hash_and_enqueues_after_commit(
    django_capture_on_commit_callbacks: Any,
) -> None:
    note = note_with_evidence()
    with django_capture_on_commit_callbacks() as callbacks:
        run = services.judge_run_request(note=note)
        again = services.judge_run_request(note=note)
    assert run.pk == again.pk and len(callbacks) == 1
    note.text += " Edited."
    note.save()
    edited = services.judge_run_request(note=note)
    assert edited.pk != run.pk and edited.content_hash != run.content_hash


def test_it_judges_stage_by_stage_and_stores_everything_for_audit(llm_server: Any) -> None:
    llm_server.respond_with(ALL_YES)
    run = services.judge_run_request(note=note_with_evidence())
    _run_to_end(run)
    run.refresh_from_db()
    assert (run.state, run.helpful, run.attempts) == ("done", True, 3)
    decisions = {d.stage: d for d in JudgeDecision.objects.filter(run=run)}
    assert set(decisions) == {"relevance", "correctness", "helpfulness"}
    rel = decisions["relevance"]
    assert (rel.verdict, rel.judge_kind, rel.judge_name) == ("yes", "llm", "scripted-model")
    assert rel.reasoning == "Snippet 1: Snippet 1 is on point."
    assert rel.inputs["snippets"][0]["text"] == SNIPPET
    assert SNIPPET in rel.prompt and rel.raw_output.endswith("Final decision: yes")
    assert rel.prompt_version == "relevance-v3" and rel.prompt_tokens and rel.completion_tokens
    assert [stage_of(r["messages"]) for r in llm_server.requests] == ["relevance", "correctness", "helpfulness"]


def test_it_does_not_rejudge_a_stored_stage_on_redelivery(llm_server: Any) -> None:
    llm_server.respond_with(ALL_YES)
    run = services.judge_run_request(note=note_with_evidence())
    assert services.judge_run_step(run_id=run.pk) == "relevance"
    # A redelivered message for the same run finds relevance decided and moves on.
    assert services.judge_run_step(run_id=run.pk) == "correctness"
    assert JudgeDecision.objects.filter(run=run, stage="relevance").count() == 1
    assert [stage_of(r["messages"]) for r in llm_server.requests] == ["relevance", "correctness"]


def test_it_keeps_the_first_decision_when_two_are_stored() -> None:
    run = services.judge_run_request(note=note_with_evidence())

    def result(verdict: str) -> StageResult:
        return StageResult(
            stage="relevance", verdict=verdict, reasoning=verdict, judge_kind="llm", judge_name="m",
            prompt_version="relevance-v1", prompt="p", raw_output="r", note_text_judged="n", inputs={},
        )  # fmt: skip

    services._store_decision(run=run, result=result("yes"))
    services._store_decision(run=run, result=result("no"))
    assert list(JudgeDecision.objects.filter(run=run).values_list("verdict", flat=True)) == ["yes"]


def test_it_claims_once_and_takes_over_an_expired_claim() -> None:
    run = services.judge_run_request(note=note_with_evidence())
    assert services.judge_run_claim(run_id=run.pk)
    assert not services.judge_run_claim(run_id=run.pk)  # held by a live worker
    JudgeRun.objects.filter(pk=run.pk).update(claimed_until=timezone.now() - dt.timedelta(seconds=1))
    assert services.judge_run_claim(run_id=run.pk)  # the worker was lost
    run.refresh_from_db()
    assert run.attempts == 2


@pytest.mark.django_db(transaction=True)
def test_it_lets_one_of_two_concurrent_claims_win() -> None:
    # A queued run that nothing was told about: a worker still alive from an earlier test must not
    # take it first (judge_run_request would publish it after commit).
    run = JudgeRun.objects.create(note=note_with_evidence(), content_hash="h", stage="relevance")
    barrier = threading.Barrier(2)
    wins: list[bool] = []

    def claim() -> None:
        barrier.wait()
        wins.append(services.judge_run_claim(run_id=run.pk))
        connection.close()

    threads = [threading.Thread(target=claim) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(wins) == [False, True]


def test_it_fails_the_run_visibly_on_an_unparsable_answer(llm_server: Any, settings: Any) -> None:
    settings.JUDGE_PARSE_ATTEMPTS = 2
    llm_server.respond_with(lambda messages: "It depends on the snippet.")
    run = services.judge_run_request(note=note_with_evidence())
    _run_to_end(run)
    run.refresh_from_db()
    decision = JudgeDecision.objects.get(run=run)
    assert (decision.stage, decision.verdict, decision.attempts) == ("relevance", "error", 2)
    assert (run.state, run.helpful) == ("failed", None)
    assert "relevance: no parsable final decision" in run.error
    assert len(llm_server.requests) == 2


def test_it_supersedes_a_run_when_the_note_changes_before_judging(django_capture_on_commit_callbacks: Any) -> None:
    note = note_with_evidence()
    run = services.judge_run_request(note=note)
    note.text = "A different note."
    note.save()
    with django_capture_on_commit_callbacks():
        assert services.judge_run_step(run_id=run.pk) is None
    run.refresh_from_db()
    assert run.state == "failed" and "superseded" in run.error
    assert JudgeRun.objects.filter(note=note).count() == 2


def test_it_keeps_every_override_with_reason_who_and_when(admin_user: Any, llm_server: Any) -> None:
    llm_server.respond_with(answers(relevance="Final decision: no"))
    run = services.judge_run_request(note=note_with_evidence())
    _run_to_end(run)
    decision = JudgeDecision.objects.get(run=run)
    with pytest.raises(ValueError, match="reason"):
        services.decision_override(decision=decision, verdict="yes", reason="  ", user=admin_user)
    services.decision_override(decision=decision, verdict="yes", reason="Snippet 1 is the CDC page.", user=admin_user)
    services.decision_override(decision=decision, verdict="no", reason="Second look: off topic.", user=admin_user)
    decision.refresh_from_db()
    assert (decision.verdict, decision.effective_verdict, decision.overridden_by) == ("no", "no", admin_user)
    trail = list(JudgeOverride.objects.filter(decision=decision).values_list("previous_verdict", "verdict", "reason"))
    assert trail == [("no", "yes", "Snippet 1 is the CDC page."), ("yes", "no", "Second look: off topic.")]


def test_it_computes_the_funnel_and_crowd_agreement(llm_server: Any) -> None:
    outcomes = [
        (NoteStatus.HELPFUL, "yes", "yes", "yes"),
        (NoteStatus.HELPFUL, "no", None, None),
        (NoteStatus.HELPFUL, "yes", "no", None),
        (NoteStatus.NOT_HELPFUL, "yes", "yes", "no"),
    ]
    for i, (status, r, c, h) in enumerate(outcomes):
        note = note_with_evidence(text=f"Note {i} about studies of the MMR vaccine.", status=status)
        llm_server.respond_with(
            answers(
                relevance=f"Final decision: {r}", correctness=f"Final decision: {c}", helpfulness=f"Final decision: {h}"
            )
        )
        _run_to_end(services.judge_run_request(note=note))
    f = funnel()
    assert (f.n_notes, f.n_relevant, f.n_correct, f.n_helpful) == (4, 3, 2, 1)
    assert f.p_r == pytest.approx(0.75) and f.p_c_given_r == pytest.approx(2 / 3)
    assert f.p_h_given_cr == pytest.approx(0.5) and f.overall == pytest.approx(0.25)
    helpful_row, not_helpful_row = crowd_agreement()
    assert (helpful_row.n_notes, helpful_row.fail_relevance, helpful_row.fail_correctness) == (3, 1, 1)
    assert (not_helpful_row.n_notes, not_helpful_row.judged_helpful) == (1, 0)


def test_it_runs_preflight_offline_without_writing(settings: Any) -> None:
    settings.LLM_BASE_URL = ""
    settings.JUDGE_BASELINE_SIMILARITY = "lexical"
    settings.HELPFULNESS_CLASSIFIER_DIR = "/nonexistent"
    result = services.preflight_run(post_text="MMR vaccine causes autism", note_text="x", snippets=[SNIPPET])
    assert result.stages[0].judge == "baseline:lexical-overlap-v1+claim-terms-v1+note-on-claim-v1"
    assert JudgeDecision.objects.count() == 0 and JudgeRun.objects.count() == 0


def test_agreement_and_funnel_exclude_notes_judged_without_real_inputs(llm_server: Any) -> None:
    """A crowd-Helpful note judged without evidence snippets fails relevance by rule: it says
    nothing about the judges, so it is counted as excluded, not as a failure."""
    from notes.models import Note, Post

    llm_server.respond_with(ALL_YES)
    _run_to_end(services.judge_run_request(note=note_with_evidence(status=NoteStatus.HELPFUL)))
    post = Post.objects.create(text="The MMR vaccine causes autism.", text_hash="x")
    bare = Note.objects.create(post=post, text="No link was found.", status=NoteStatus.HELPFUL)
    _run_to_end(services.judge_run_request(note=bare))
    assert JudgeDecision.objects.get(note=bare, stage="relevance").verdict == "no"
    helpful_row, not_helpful_row = crowd_agreement()
    assert (helpful_row.n_notes, helpful_row.fail_relevance, helpful_row.n_excluded) == (1, 0, 1)
    assert (not_helpful_row.n_notes, not_helpful_row.n_excluded) == (0, 0)
    f = funnel()
    assert (f.n_notes, f.n_helpful, f.n_excluded) == (1, 1, 1)
    # Shown apart, with what the judges said and why it is not counted.
    (group,) = excluded_groups()
    assert (group.reason, group.n_notes, group.n_demo, group.relevance) == ("no_snippets", 1, 0, {"no": 1})
    assert group.judges == ["no-evidence-rule-v1"]


def test_a_note_on_an_imported_post_without_text_is_never_judged(llm_server: Any) -> None:
    note = note_with_evidence(status=NoteStatus.HELPFUL)
    run = services.judge_run_request(note=note)  # queued before the post was known to be a placeholder
    note.post.text_available = False
    note.post.save()
    with pytest.raises(services.NotJudgeable):
        services.judge_run_request(note=note)
    assert services.judge_run_step(run_id=run.pk) is None
    run.refresh_from_db()
    assert run.state == JudgeRun.State.FAILED and "without its text" in run.error
    assert llm_server.requests == [] and not JudgeDecision.objects.exists()
