"""Supernote principle checks (neutral wording, no opinion): prompt, LLM step, lexicon baseline
(hostile words, "!!", shouting in capitals that is not an acronym such as CDC or SIDS). Used by
notes.supernotes.filters."""

from __future__ import annotations

import re
import time

from crowdnotes_site.lib.llm.client import LLMClient
from crowdnotes_site.lib.llm.steps.common import (
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
    "principle_neutral": "principle-neutral-v2",
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


# All-caps words that are names, not shouting (health acronyms and agencies).
ACRONYMS = frozenset(
    "CDC WHO FDA NIH NHS EMA SIDS HIV AIDS COVID SARS MERS RSV HPV MMR DNA RNA MRNA BMI ADHD PTSD "
    "CEO USA UK EU UN US ICU ER PCR WHO'S FAQ PDF BBC CNN AP NYT".split()
)
_CAPS_WORD_RE = re.compile(r"\b[A-Z][A-Z']{2,}\b")


def shouting_words(text: str) -> list[str]:
    """All-caps words of 3+ letters that are not known acronyms. Acronyms of up to 5 letters are
    allowed on their own; shouting is two or more such words, or one long one (8+ letters)."""
    found = [w for w in _CAPS_WORD_RE.findall(text) if w not in ACRONYMS]
    if len(found) >= 2 or any(len(w) >= 8 for w in found):
        return found
    return []


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
        shouted = shouting_words(text)
        bad = bool(HOSTILE_RE.search(text)) or "!!" in text or bool(shouted)
        if shouted:
            reason = "shouting in capitals: " + ", ".join(shouted[:5])
        else:
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
