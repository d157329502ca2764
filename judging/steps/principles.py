"""Supernote principle checks (neutral wording, no opinion): prompt, LLM step, lexicon baseline.
(Not wired into a flow yet.)"""

from __future__ import annotations

import time

from judging.llm import LLMClient
from judging.steps.common import (
    DECISION_RULE,
    HOSTILE_RE,
    OPINION_RE,
    Messages,
    StepResult,
    baseline_result,
    decision_step,
    messages,
)

VERSIONS: dict[str, str] = {
    "principle_neutral": "principle-neutral-v1",
    "principle_no_opinion": "principle-no-opinion-v1",
}

PRINCIPLE_QUESTIONS = {
    "neutral": (
        "Question: is the text written in neutral, unbiased language (no loaded words, "
        "no taking sides, no mockery)?\nAnswer yes if it is neutral, no if it is not."
    ),
    "no_opinion": (
        "Question: does the text state only verifiable facts, with no opinion and no "
        "speculation?\nAnswer yes if it contains no opinion or speculation, no otherwise."
    ),
}
PRINCIPLES = tuple(PRINCIPLE_QUESTIONS)


def principle_prompt(text: str, name: str) -> Messages:
    return messages(
        "You review candidate Community Notes against writing principles.",
        f"Text:\n{text.strip()}\n\n{PRINCIPLE_QUESTIONS[name]}\n{DECISION_RULE}",
    )


def principle_check_llm(client: LLMClient, *, text: str, principle: str) -> StepResult:
    return decision_step(
        client,
        task="principle",
        prompt_version=VERSIONS[f"principle_{principle}"],
        messages=principle_prompt(text, principle),
    )


def principle_check_baseline(*, text: str, principle: str) -> StepResult:
    started = time.monotonic()
    if principle == "neutral":
        bad = bool(HOSTILE_RE.search(text)) or "!!" in text
        reason = "hostile or loaded wording found" if bad else "no hostile or loaded wording found"
    elif principle == "no_opinion":
        bad = bool(OPINION_RE.search(text))
        reason = "opinion/speculation markers found" if bad else "no opinion/speculation markers found"
    else:
        raise ValueError(f"unknown principle {principle!r}")
    return baseline_result(
        "lexicon-v1",
        VERSIONS[f"principle_{principle}"],
        not bad,
        reason.capitalize() + ".",
        started,
    )
