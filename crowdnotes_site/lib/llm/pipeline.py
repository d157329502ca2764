"""The hierarchical judge: relevance -> correctness -> helpfulness, gated. Pure (no ORM).

A stage runs only if the previous one answered "yes". An answer whose final decision
cannot be parsed is asked again (bounded) and then reported as verdict "error": never
guessed. A note is helpful only when all three stages say "yes"; `helpful` is None when a
stage ended in error.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from crowdnotes_site.lib.hashing import sha256_hex
from crowdnotes_site.lib.llm.client import LLMClient, LLMError
from crowdnotes_site.lib.llm.steps import PROMPT_VERSIONS, judges
from crowdnotes_site.lib.llm.steps.common import Evidence, Similarity, StepResult
from crowdnotes_site.lib.text_rules import NOTE_MAX_CHARS, truncate_for_helpfulness

RELEVANCE, CORRECTNESS, HELPFULNESS = "relevance", "correctness", "helpfulness"
STAGES: tuple[str, ...] = (RELEVANCE, CORRECTNESS, HELPFULNESS)
YES, NO, ERROR = "yes", "no", "error"
NOT_REACHED = "not_reached"  # a stage after one that did not say yes (never judged, or gated out by an override)
BACKENDS = ("auto", "llm", "baseline", "classifier")


@dataclass(frozen=True)
class JudgeInput:
    post: str
    note: str
    urls: tuple[str, ...] = ()
    snippets: tuple[Evidence, ...] = ()


Judge = Callable[[JudgeInput], StepResult]


@dataclass(frozen=True)
class StageResult:
    stage: str
    verdict: str  # yes / no / error
    reasoning: str
    judge_kind: str
    judge_name: str
    prompt_version: str
    prompt: str
    raw_output: str
    note_text_judged: str
    inputs: dict[str, Any]
    latency_s: float = 0.0
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    attempts: int = 1
    error: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def judge(self) -> str:
        return f"{self.judge_kind}:{self.judge_name}"

    def summary(self) -> dict[str, Any]:
        """The CLI's per-stage object."""
        return {
            "stage": self.stage,
            "verdict": self.verdict,
            "reasoning": self.reasoning,
            "judge": self.judge,
            "note_text_judged": self.note_text_judged,
        }


@dataclass(frozen=True)
class PipelineResult:
    stages: list[StageResult]
    helpful: bool | None

    def summary(self) -> dict[str, Any]:
        return {"stages": [s.summary() for s in self.stages], "helpful": self.helpful}


def content_hash(inp: JudgeInput) -> str:
    """Identity of what is judged: post, note text, URLs and evidence. Editing any of them
    gives a new hash, so earlier decisions no longer apply."""
    payload = {
        "post": inp.post,
        "note": inp.note,
        "urls": list(inp.urls),
        "snippets": [[ev.text, ev.source] for ev in inp.snippets],
    }
    raw = json.dumps(payload, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return sha256_hex(raw)


def stage_input(stage: str, inp: JudgeInput, *, limit: int = NOTE_MAX_CHARS) -> tuple[JudgeInput, dict[str, Any]]:
    """What the judge of `stage` sees, and the exact inputs to store with its decision.

    Only helpfulness truncates: note text without URLs, cut so text + URLs <= limit."""
    snippets = [{"text": ev.text, "source": ev.source} for ev in inp.snippets]
    if stage == RELEVANCE:
        # The note is stored too: the audit shows the version judged (the offline judge checks
        # that it is about the post's claim; the LLM prompt asks about the snippets only).
        return inp, {"post": inp.post, "note_text_judged": inp.note, "snippets": snippets}
    if stage == CORRECTNESS:
        return inp, {
            "post": inp.post,
            "note_text_judged": inp.note,
            "snippets": snippets,
        }
    if stage == HELPFULNESS:
        judged = truncate_for_helpfulness(inp.note, inp.urls, limit=limit)
        return (
            replace(inp, note=judged.text, urls=judged.urls),
            {
                "post": inp.post,
                "note_text_judged": judged.text,
                "urls": list(judged.urls),
                "truncated": judged.truncated,
            },
        )
    raise ValueError(f"unknown stage {stage!r}")


def run_stage(
    stage: str,
    inp: JudgeInput,
    judge: Judge,
    *,
    max_attempts: int = 2,
    raise_llm_errors: bool = False,
) -> StageResult:
    """Run one stage; re-ask an unparsable answer up to `max_attempts` times in all.

    LLM failures (after the client's own retries) become verdict "error", unless
    `raise_llm_errors` (Celery retries the task instead)."""
    judged, inputs = stage_input(stage, inp)
    attempts = 0
    result: StepResult | None = None
    while attempts < max_attempts:
        attempts += 1
        try:
            result = judge(judged)
        except LLMError as exc:
            if raise_llm_errors:
                raise
            return StageResult(
                stage=stage,
                verdict=ERROR,
                reasoning="",
                judge_kind="llm",
                judge_name="",
                prompt_version=PROMPT_VERSIONS[stage],
                prompt="",
                raw_output="",
                note_text_judged=judged.note,
                inputs=inputs,
                attempts=attempts,
                error=str(exc),
            )
        if result.value is not None:
            break
    assert result is not None
    if result.value is None:
        verdict, error = ERROR, f"no parsable final decision after {attempts} attempts"
    else:
        verdict, error = (YES if result.value else NO), ""
    return StageResult(
        stage=stage,
        verdict=verdict,
        reasoning=result.reasoning,
        judge_kind=result.producer.kind,
        judge_name=result.producer.name,
        prompt_version=result.prompt_version,
        prompt=result.prompt,
        raw_output=result.raw_output,
        note_text_judged=judged.note,
        inputs=inputs,
        latency_s=result.latency_s,
        prompt_tokens=result.prompt_tokens,
        completion_tokens=result.completion_tokens,
        attempts=attempts,
        error=error,
        extra=dict(result.extra),
    )


def next_stage(verdicts: Sequence[str]) -> str | None:
    """The stage to run after the given ordered verdicts, or None when judging is over."""
    if any(v != YES for v in verdicts) or len(verdicts) >= len(STAGES):
        return None
    return STAGES[len(verdicts)]


def helpful_from(verdicts: Sequence[str]) -> bool | None:
    """True when all three stages passed; None when a stage errored; else False."""
    if ERROR in verdicts:
        return None
    return len(verdicts) == len(STAGES) and all(v == YES for v in verdicts)


def gated(verdicts: Mapping[str, str]) -> dict[str, str]:
    """The R -> C -> H gating applied to effective verdicts (overrides included): every stage
    after one that is not "yes" is NOT_REACHED, whatever a judge said about it before an admin
    overrode the earlier stage. Stages not judged yet (and not gated out) are left out."""
    out: dict[str, str] = {}
    stopped = False
    for stage in STAGES:
        if stopped:
            out[stage] = NOT_REACHED
        elif stage in verdicts:
            out[stage] = verdicts[stage]
            stopped = verdicts[stage] != YES
    return out


def stopped_by(verdicts: Mapping[str, str]) -> str | None:
    """The first stage whose effective verdict is not "yes" (the one gating the later stages)."""
    return next((stage for stage in STAGES if stage in verdicts and verdicts[stage] != YES), None)


def helpful_of(verdicts: Mapping[str, str]) -> bool | None:
    """helpful_from over gated effective verdicts: True when all three say yes, False when one
    says no before any error, None on an error or while a stage is still to come."""
    for stage in STAGES:
        verdict = verdicts.get(stage)
        if verdict == YES:
            continue
        return False if verdict == NO else None
    return True


def run_pipeline(inp: JudgeInput, judges: Mapping[str, Judge], *, max_attempts: int = 2) -> PipelineResult:
    """Run the gated stages synchronously (CLI, pre-flight, evaluations)."""
    results: list[StageResult] = []
    while (stage := next_stage([r.verdict for r in results])) is not None:
        results.append(run_stage(stage, inp, judges[stage], max_attempts=max_attempts))
    return PipelineResult(stages=results, helpful=helpful_from([r.verdict for r in results]))


def build_judges(
    *,
    client: LLMClient | None,
    backends: Mapping[str, str] | None = None,
    similarity: Similarity | None = None,
    classifier: judges.HelpfulnessModel | None = None,
    similarity_name: str = "",
) -> dict[str, Judge]:
    """Pick a judge per stage. Backend "auto": the LLM when a client is configured; else, for
    helpfulness, the trained classifier if one is given; else the offline baseline."""
    backends = backends or {}
    judges: dict[str, Judge] = {}
    for stage in STAGES:
        backend = backends.get(stage, "auto")
        if backend not in BACKENDS:
            raise ValueError(f"unknown judge backend {backend!r} for {stage}")
        if backend == "auto":
            backend = (
                "llm" if client is not None else ("classifier" if stage == HELPFULNESS and classifier else "baseline")
            )
        if backend == "llm" and client is None:
            raise ValueError(f"{stage}: judge backend 'llm' needs LLM_BASE_URL")
        if backend == "classifier" and (stage != HELPFULNESS or classifier is None):
            raise ValueError(f"{stage}: judge backend 'classifier' needs a trained helpfulness model")
        judges[stage] = _judge(stage, backend, client, similarity, classifier, similarity_name)
    return judges


def _judge(
    stage: str,
    backend: str,
    client: LLMClient | None,
    similarity: Similarity | None,
    classifier: judges.HelpfulnessModel | None,
    similarity_name: str = "",
) -> Judge:
    if backend == "llm":
        assert client is not None
        llm: Mapping[str, Judge] = {
            RELEVANCE: lambda i: judges.relevance_llm(client, post=i.post, snippets=i.snippets),
            CORRECTNESS: lambda i: judges.correctness_llm(client, post=i.post, note=i.note, snippets=i.snippets),
            HELPFULNESS: lambda i: judges.helpfulness_llm(client, post=i.post, note=i.note, urls=i.urls),
        }
        return llm[stage]
    if backend == "classifier":
        assert classifier is not None
        return lambda i: judges.helpfulness_classifier(classifier, post=i.post, note=i.note, urls=i.urls)
    baseline: Mapping[str, Judge] = {
        RELEVANCE: lambda i: judges.relevance_baseline(
            post=i.post, snippets=i.snippets, similarity=similarity, similarity_name=similarity_name, note=i.note
        ),
        CORRECTNESS: lambda i: judges.correctness_baseline(post=i.post, note=i.note, snippets=i.snippets),
        HELPFULNESS: lambda i: judges.helpfulness_baseline(post=i.post, note=i.note, urls=i.urls),
    }
    return baseline[stage]
