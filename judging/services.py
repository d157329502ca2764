"""Writes for the judges: request a run, execute one stage under a claim, override, pre-flight.

A run is judged one stage per task (the task re-enqueues itself for the next stage). The
run row is the work queue: a task may judge only after winning a conditional UPDATE (the
claim), and decisions are unique per (note, stage, content hash), so double delivery or
concurrent tasks store one decision per stage.
"""

from __future__ import annotations

import datetime as dt
import functools
import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from crowdnotes_site import leases
from crowdnotes_site.lib.communitynotes.data import real
from crowdnotes_site.lib.llm import classifier as clf
from crowdnotes_site.lib.llm import pipeline
from crowdnotes_site.lib.llm.pipeline import JudgeInput, PipelineResult, StageResult
from crowdnotes_site.lib.llm.steps.common import Evidence
from crowdnotes_site.llm import llm_answers, llm_client
from crowdnotes_site.queue import enqueue_on_commit
from crowdnotes_site.transitions import transition_rows
from evidence.embedding import MINILM, cosine
from judging.models import OVERRIDE_REASON_MAX_CHARS, JudgeDecision, JudgeOverride, JudgeRun, PreflightCheck
from judging.selectors import decisions_for_run, judge_input_for_note, unjudgeable_reason

if TYPE_CHECKING:
    from django.contrib.auth.models import User

    from notes.models import Note  # type hints only: a Note is reached through JudgeRun.note

logger = logging.getLogger(__name__)


# --- Judge configuration --------------------------------------------------------------------


@functools.lru_cache(maxsize=4)
def _load_classifier(directory: str, version: str) -> clf.HelpfulnessClassifier | None:
    return clf.load(Path(directory), version=version)


def helpfulness_classifier_train(
    *, folder: Path, directory: Path, examples: Sequence[clf.Example] | None = None
) -> clf.HelpfulnessClassifier:
    """Train the helpfulness judge on the crowd's verdicts in the real Community Notes folder (or
    `examples`, when the caller has already read them from it) and save it as the latest model (the
    stage uses it from the next judgement on)."""
    if examples is None:
        examples = clf.real_examples(real.read_notes(folder))
    model = clf.train(examples, source=f"{folder.name}/{real.NOTES_FILE}: mature Helpful / Not Helpful verdicts")
    clf.save(model, directory)
    _load_classifier.cache_clear()
    return model


def helpfulness_classifier() -> clf.HelpfulnessClassifier | None:
    """The latest trained helpfulness classifier, if one was saved."""
    directory = Path(settings.HELPFULNESS_CLASSIFIER_DIR)
    version = clf.latest_version(directory)
    return _load_classifier(str(directory), version) if version else None


def judges_from_settings(*, owner: int | None = None) -> dict[str, pipeline.Judge]:
    backends = {
        pipeline.RELEVANCE: settings.JUDGE_BACKEND_RELEVANCE,
        pipeline.CORRECTNESS: settings.JUDGE_BACKEND_CORRECTNESS,
        pipeline.HELPFULNESS: settings.JUDGE_BACKEND_HELPFULNESS,
    }
    client = llm_client(owner=owner)
    model = None
    if backends[pipeline.HELPFULNESS] == "classifier" or (client is None and backends[pipeline.HELPFULNESS] == "auto"):
        model = helpfulness_classifier()
    similarity, similarity_name = None, ""
    needs_baseline_relevance = backends[pipeline.RELEVANCE] == "baseline" or (
        client is None and backends[pipeline.RELEVANCE] == "auto"
    )
    if needs_baseline_relevance and settings.JUDGE_BASELINE_SIMILARITY == "embedding":
        similarity, similarity_name = cosine, MINILM
    return pipeline.build_judges(
        client=client, backends=backends, similarity=similarity, classifier=model, similarity_name=similarity_name
    )


# --- Runs -------------------------------------------------------------------------------------


class NotJudgeable(ValueError):
    """The note cannot be judged as it stands (e.g. its post was imported without text)."""


def judge_run_request(*, note: Note) -> JudgeRun:
    """Queue judging of the note's current text and evidence (once per content hash).

    Editing the note gives a new hash, hence a new run; decisions of older versions stay
    in the audit but no longer describe the note. Raises NotJudgeable for a note the judges
    must not see (see judging.selectors.unjudgeable_reason)."""
    reason = unjudgeable_reason(note)
    if reason:
        raise NotJudgeable(f"note {note.pk}: {reason}")
    content_hash = pipeline.content_hash(judge_input_for_note(note))
    run, created = JudgeRun.objects.get_or_create(
        note=note, content_hash=content_hash, defaults={"stage": pipeline.RELEVANCE}
    )
    if created:
        _enqueue_after_commit(run.pk)
    return run


def judge_run_retry(*, run: JudgeRun) -> bool:
    """Put a failed run back in the queue (admin action). False if it was not failed."""
    updated = transition_rows(
        JudgeRun.objects.filter(pk=run.pk, state=JudgeRun.State.FAILED),
        JudgeRun.State.QUEUED, error="", attempts=0, claimed_until=None, finished_at=None,
    )  # fmt: skip
    if updated:
        _enqueue_after_commit(run.pk)
    return bool(updated)


# The error of a run failed by the LLM being unreachable (transient errors past the task's retries):
# the beat sweep queues such a run once more when the LLM answers again.
LLM_OUTAGE = "LLM unavailable: "


def judge_runs_retry_after_outage(*, llm_answers: Callable[[], bool]) -> list[int]:
    """Queue again, once each, the runs that failed during an LLM outage, if `llm_answers()` (a
    probe, asked only when there is such a run) says the LLM is back. Beat: work_sweep. The note
    page shows the re-run (JudgeRun.outage_retried_at)."""
    failed = JudgeRun.objects.filter(
        state=JudgeRun.State.FAILED, error__startswith=LLM_OUTAGE, outage_retried_at__isnull=True
    )
    ids = list(failed.values_list("pk", flat=True)[:100])
    if not ids or not llm_answers():
        return []
    retried: list[int] = []
    now = timezone.now()
    for run_id in ids:
        with transaction.atomic():
            if transition_rows(
                failed.filter(pk=run_id), JudgeRun.State.QUEUED, attempts=0, claimed_until=None, finished_at=None,
                outage_retried_at=now, error="",
            ):  # fmt: skip
                _enqueue_after_commit(run_id)
                retried.append(run_id)
    if retried:
        logger.warning("the LLM answers again: re-queued judge runs failed during the outage: %s", retried)
    return retried


@leases.sweep("judge_runs_after_outage")
def judge_runs_outage_sweep() -> list[int]:
    """The beat's retry after an LLM outage: its probe is one call to the configured LLM."""
    return judge_runs_retry_after_outage(llm_answers=llm_answers)


def _judge_owner(run_id: int) -> int | None:
    """Whose work a judge run is (its fair turn on the llm queue, the daily LLM budget it spends):
    the note's author, or for a Supernote (no author) whoever started the run that proposed it."""
    row = (
        JudgeRun.objects.filter(pk=run_id)
        .values_list("note__author__user_id", "note__supernote_run__requested_by_id")
        .first()
    )
    if row is None:
        return None
    return row[0] if row[0] is not None else row[1]


def _enqueue_after_commit(run_id: int) -> None:
    enqueue_on_commit("judging.tasks.judge_run_step", run_id, owner=_judge_owner(run_id))


@leases.sweep("judge_runs")
def judge_runs_sweep() -> list[int]:
    """Re-queue the judge runs whose worker stopped renewing the claim (beat: work_sweep)."""
    return leases.runs_sweep(JudgeRun, _enqueue_after_commit)


def judge_run_claim(*, run_id: int) -> bool:
    """Take the run if it is queued, or running under an expired claim (its worker was lost).
    Exactly one of several concurrent callers wins."""
    return leases.run_claim(JudgeRun, run_id=run_id)


def judge_run_release(*, run_id: int, error: str = "") -> None:
    """Give the claim back so a retry (or another worker) can take the run."""
    transition_rows(
        JudgeRun.objects.filter(pk=run_id, state=JudgeRun.State.RUNNING),
        JudgeRun.State.QUEUED, claimed_until=None, error=error,
    )  # fmt: skip


def judge_run_fail(*, run_id: int, error: str) -> None:
    """Visible failure: the run stops with its error (an admin can retry it)."""
    leases.run_fail(JudgeRun, run_id=run_id, error=error)
    logger.warning("judge run %s failed: %s", run_id, error)


def judge_run_step(*, run_id: int) -> str | None:
    """Judge the run's next stage if this caller wins the claim; return the stage judged.

    LLM errors propagate (the task retries or fails the run); an unparsable answer after
    JUDGE_PARSE_ATTEMPTS is stored as verdict "error" and fails the run."""
    if not judge_run_claim(run_id=run_id):
        return None
    with leases.heartbeat(JudgeRun, run_id, field="claimed_until"):
        return _judge_claimed(run_id)


def _judge_claimed(run_id: int) -> str | None:
    run = JudgeRun.objects.select_related("note__post", "note__author").get(pk=run_id)
    if run.attempts > settings.JUDGE_MAX_CLAIMS:
        judge_run_fail(run_id=run_id, error=f"gave up after {run.attempts - 1} attempts (workers lost or retries)")
        return None
    reason = unjudgeable_reason(run.note)
    if reason:
        judge_run_fail(run_id=run_id, error=f"not judged: {reason}")
        return None
    inp = judge_input_for_note(run.note)
    if pipeline.content_hash(inp) != run.content_hash:
        judge_run_fail(run_id=run_id, error="superseded: the note or its evidence changed; a new run judges it")
        judge_run_request(note=run.note)
        return None
    stage = pipeline.next_stage([d.verdict for d in decisions_for_run(run)])
    if stage is not None:
        judges = judges_from_settings(owner=_judge_owner(run.pk))
        result = pipeline.run_stage(
            stage, inp, judges[stage], max_attempts=settings.JUDGE_PARSE_ATTEMPTS, raise_llm_errors=True
        )
        _store_decision(run=run, result=result)
    _advance(run)
    return stage


def _store_decision(*, run: JudgeRun, result: StageResult) -> None:
    # ON CONFLICT DO NOTHING: if a concurrent task already stored this stage, keep the first.
    JudgeDecision.objects.bulk_create(
        [
            JudgeDecision(
                run=run,
                note_id=run.note_id,
                content_hash=run.content_hash,
                stage=result.stage,
                verdict=result.verdict,
                reasoning=result.reasoning,
                judge_kind=result.judge_kind,
                judge_name=result.judge_name[:120],
                prompt_version=result.prompt_version,
                inputs=result.inputs,
                prompt=result.prompt,
                raw_output=result.raw_output,
                latency_ms=round(result.latency_s * 1000),
                prompt_tokens=result.prompt_tokens,
                completion_tokens=result.completion_tokens,
                attempts=result.attempts,
                error=result.error,
            )
        ],
        ignore_conflicts=True,
    )


@transaction.atomic
def _advance(run: JudgeRun) -> None:
    verdicts = [d.verdict for d in decisions_for_run(run)]
    nxt = pipeline.next_stage(verdicts)
    if nxt is not None:
        if transition_rows(
            JudgeRun.objects.filter(pk=run.pk), JudgeRun.State.QUEUED, stage=nxt, claimed_until=None, error=""
        ):
            _enqueue_after_commit(run.pk)
        return
    errored = [d for d in decisions_for_run(run) if d.verdict == JudgeDecision.Verdict.ERROR]
    transition_rows(
        JudgeRun.objects.filter(pk=run.pk),
        JudgeRun.State.FAILED if errored else JudgeRun.State.DONE,
        helpful=pipeline.helpful_from(verdicts),
        error=f"{errored[0].stage}: {errored[0].error}" if errored else "",
        claimed_until=None,
        finished_at=timezone.now(),
    )


# --- Overrides ----------------------------------------------------------------------------------


@transaction.atomic
def decision_override(*, decision: JudgeDecision, verdict: str, reason: str, user: User) -> JudgeOverride:
    """Override a verdict with a required reason; every override is kept in the trail."""
    reason = reason.strip()
    if not reason:
        raise ValueError("an override needs a reason")
    if len(reason) > OVERRIDE_REASON_MAX_CHARS:
        raise ValueError(f"an override's reason has at most {OVERRIDE_REASON_MAX_CHARS} characters")
    if verdict not in JudgeDecision.Verdict.values:
        raise ValueError(f"unknown verdict {verdict!r}")
    locked = JudgeDecision.objects.select_for_update().get(pk=decision.pk)
    entry = JudgeOverride.objects.create(
        decision=locked, previous_verdict=locked.effective_verdict, verdict=verdict, reason=reason, by=user
    )
    locked.override_verdict = verdict
    locked.override_reason = reason
    locked.overridden_by = user
    locked.overridden_at = entry.at
    locked.save(update_fields=["override_verdict", "override_reason", "overridden_by", "overridden_at"])
    return entry


# --- Pre-flight and CLI ----------------------------------------------------------------------------


def preflight_run(
    *,
    post_text: str,
    note_text: str,
    urls: Sequence[str] = (),
    snippets: Sequence[str | Evidence] = (),
    owner: int | None = None,
) -> PipelineResult:
    """Run the three judges synchronously on a draft, without storing anything.

    For the contributor's pre-flight and the `judge_note` command: it shows verdicts and
    reasoning, and never submits or rejects anything."""
    evidence = tuple(s if isinstance(s, Evidence) else Evidence(text=s) for s in snippets)
    inp = JudgeInput(post=post_text, note=note_text, urls=tuple(urls), snippets=evidence)
    judges = judges_from_settings(owner=owner)
    return pipeline.run_pipeline(inp, judges, max_attempts=settings.JUDGE_PARSE_ATTEMPTS)


# --- Pre-flight as background work ------------------------------------------------------------


@transaction.atomic
def preflight_request(
    *,
    user: User,
    post_text: str,
    note_text: str,
    urls: Sequence[str] = (),
    snippets: Sequence[str | Evidence] = (),
    draft_job_id: int | None = None,
) -> PreflightCheck:
    """Queue a pre-flight (task `judging.tasks.preflight_check`, llm queue); the page polls it.
    A pre-flight of a draft also queues `xnotes.tasks.x_preflight_evaluate` (X's evaluator)."""
    evidence = [s if isinstance(s, Evidence) else Evidence(text=s) for s in snippets]
    check = PreflightCheck.objects.create(
        requested_by=user,
        draft_job_id=draft_job_id,
        post_text=post_text,
        note_text=note_text,
        urls=list(urls),
        snippets=[{"text": ev.text, "source": ev.source} for ev in evidence],
    )
    enqueue_on_commit("judging.tasks.preflight_check", check.pk, owner=user.pk)
    if draft_job_id is not None:
        # The one upward call (README, "Layers"): by task name, never an import. xnotes asks X's
        # evaluator on the same text when the post is on X and X is connected; otherwise a no-op.
        enqueue_on_commit("xnotes.tasks.x_preflight_evaluate", check.pk)
    return check


def _preflight_enqueue(check_id: int) -> None:
    owner = PreflightCheck.objects.filter(pk=check_id).values_list("requested_by_id", flat=True).first()
    enqueue_on_commit("judging.tasks.preflight_check", check_id, owner=owner)


@leases.sweep("preflights")
def preflight_checks_sweep() -> list[int]:
    """Re-queue the pre-flights whose worker stopped renewing the claim (beat: work_sweep), in
    their contributor's fair turn: the contributor is waiting on the page for this advice."""
    return leases.runs_sweep(PreflightCheck, _preflight_enqueue)


def preflight_prune(*, days: int) -> int:
    """Delete the pre-flights that finished more than `days` ago: advice shown once to its
    contributor, which nothing else refers to. Queued or running ones are left to the lease."""
    cutoff = timezone.now() - dt.timedelta(days=days)
    finished = (PreflightCheck.State.DONE, PreflightCheck.State.FAILED)
    deleted, _ = PreflightCheck.objects.filter(state__in=finished, finished_at__lt=cutoff).delete()
    return deleted


def preflight_fail(*, check_id: int, error: str) -> None:
    """The pre-flight ends with its error shown to the contributor (unless it already ended)."""
    leases.run_fail(PreflightCheck, run_id=check_id, error=error)


def preflight_check_run(*, check_id: int) -> PreflightCheck | None:
    """Run a queued pre-flight (in a worker). Claimed first, so a duplicate delivery does nothing;
    a claim older than the lease (a lost worker) may be taken again, JUDGE_MAX_CLAIMS times in all
    (then the check fails: a pre-flight that kills its worker is not retried for ever)."""
    if not leases.run_claim(PreflightCheck, run_id=check_id):
        return None
    check = PreflightCheck.objects.get(pk=check_id)
    if check.attempts > settings.JUDGE_MAX_CLAIMS:
        preflight_fail(
            check_id=check_id,
            error=f"gave up after {check.attempts - 1} attempts (workers lost); ask for the check again",
        )
        return None
    try:
        with leases.heartbeat(PreflightCheck, check_id, field="claimed_until"):
            result = preflight_run(
                post_text=check.post_text,
                note_text=check.note_text,
                urls=check.urls,
                snippets=[Evidence(text=s["text"], source=s.get("source", "")) for s in check.snippets],
                owner=check.requested_by_id,
            )
    except Exception as exc:
        preflight_fail(check_id=check_id, error=f"{type(exc).__name__}: {exc}")
        raise
    stages = [
        {
            "stage": st.stage,
            "verdict": st.verdict,
            "reasoning": st.reasoning,
            "judge_kind": st.judge_kind,
            "judge_name": st.judge_name,
            "error": st.error,
            "note_text_judged": st.note_text_judged,
        }
        for st in result.stages
    ]
    transition_rows(
        PreflightCheck.objects.filter(pk=check_id),
        PreflightCheck.State.DONE,
        result={"stages": stages, "helpful": result.helpful},
        claimed_until=None,
        finished_at=timezone.now(),
    )
    check.refresh_from_db()
    return check
