"""Supernote principle checks (neutral wording, no opinion): prompt, LLM step, and the offline
baseline. Neutral offline: no insult or swearing by a maintained classifier (alt-profanity-check),
no loaded phrase of common.LOADED_PHRASES (scorn in clean words, which the classifier misses), no
"!!", no shouting in capitals that is not an acronym such as CDC or SIDS. Used by
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
    data_messages,
    decision_step,
    sentences,
)

VERSIONS: dict[str, str] = {
    "principle_neutral": "principle-neutral-v3",
    "principle_no_opinion": "principle-no-opinion-v2",
}

# alt-profanity-check's probability that a sentence is offensive, at or above which the neutral
# filter fails it (chosen on the tuning cases, bench/README.md "Offline checks a moderator can trust").
OFFENSIVE_THRESHOLD = 0.5

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
    return data_messages(
        "You review candidate Community Notes against writing principles.",
        {"text": text},
        f"The text is the one in the data.\n{PRINCIPLE_QUESTIONS[name]}\n{DECISION_RULE}",
    )


def principle_check_llm(client: LLMClient, *, text: str, principle: str) -> StepResult:
    return decision_step(
        client,
        task="principle",
        prompt_version=VERSIONS[f"principle_{principle}"],
        messages=principle_prompt(text, principle),
    )


def offensive_probability(text: str) -> float:
    """The highest probability, over the text's sentences, that a sentence is offensive (insults,
    swearing), by alt-profanity-check's classifier (a linear model over word n-grams trained on
    labelled toxic comments; it loads in about half a second on first use). Sentence by sentence,
    so one insult in a long calm note is not averaged away."""
    from profanity_check import predict_prob

    parts = sentences(text) or [text]
    return max(float(p) for p in predict_prob(parts))


def principle_check_baseline(*, text: str, principle: str) -> StepResult:
    started = time.monotonic()
    if principle == "neutral":
        problems = []
        loaded = sorted({m.group(0).lower() for m in HOSTILE_RE.finditer(text)})
        if loaded:
            problems.append("loaded wording: " + ", ".join(f'"{w}"' for w in loaded[:5]))
        offensive = offensive_probability(text) if text.strip() else 0.0
        if offensive >= OFFENSIVE_THRESHOLD:
            problems.append(
                f"insulting or offensive wording (classifier: {offensive:.2f} >= {OFFENSIVE_THRESHOLD:.2f})"
            )
        shouted = shouting_words(text)
        if shouted:
            problems.append("shouting in capitals: " + ", ".join(shouted[:5]))
        elif "!!" in text:
            problems.append("shouting (repeated exclamation marks)")
        bad = bool(problems)
        reason = "; ".join(problems) if problems else "no insult, loaded wording or shouting found"
        name = "lexicon-v2+profanity-classifier"
    elif principle == "no_opinion":
        bad = bool(OPINION_RE.search(text))
        reason = "opinion/speculation markers found" if bad else "no opinion/speculation markers found"
        name = "lexicon-v1"
    else:
        raise ValueError(f"unknown principle {principle!r}")
    return baseline_result(
        name,
        VERSIONS[f"principle_{principle}"],
        not bad,
        reason[0].upper() + reason[1:] + ".",
        started,
    )
