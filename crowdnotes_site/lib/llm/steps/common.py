"""What every LLM-backed step shares: who produced a result (`Producer`), the result itself
(`StepResult`), the runner of one prompt through `crowdnotes_site.lib.llm.client` (`llm_step`), the offline
baseline's result (`baseline_result`), the prompt building blocks (`Evidence`, `messages`,
`render`) and the lexical helpers the baselines use. Pure: no ORM, no model loading.

Each task family has its own module beside this one, holding its prompt builders with their
versions (`VERSIONS`), its LLM step and its offline baseline: drafting, judges, search,
principles, supernote, topics. `crowdnotes_site.lib.llm.steps.PROMPT_VERSIONS` collects every family's versions.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from crowdnotes_site.lib.llm.client import LLMClient, LLMResult, parse_final_decision
from crowdnotes_site.lib.text_rules import strip_urls

# (text_a, text_b) -> cosine similarity; provided by the caller (e.g. sentence embeddings).
Similarity = Callable[[str, str], float]


@dataclass(frozen=True)
class Producer:
    kind: str  # "llm" | "baseline" | "classifier"
    name: str  # model name, baseline name, or classifier version

    @property
    def label(self) -> str:
        return f"{self.kind}:{self.name}"

    @classmethod
    def from_label(cls, label: str) -> Producer:
        """The inverse of `label` (stored labels such as DraftJob.draft_method)."""
        kind, _, name = label.partition(":")
        return cls(kind, name)


@dataclass(frozen=True)
class StepResult:
    """The outcome of one step. `value` is None when the answer could not be parsed."""

    value: Any
    producer: Producer
    prompt_version: str
    prompt: str
    raw_output: str
    reasoning: str = ""
    latency_s: float = 0.0
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    error: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


# --- Prompt building blocks ------------------------------------------------------------------


@dataclass(frozen=True)
class Evidence:
    """One evidence snippet as the prompts see it."""

    text: str
    source: str = ""


Messages = list[dict[str, str]]

DECISION_RULE = (
    "Think step by step and explain your reasoning briefly. Then end your answer with one "
    'last line that is exactly "Final decision: yes" or "Final decision: no".'
)


def messages(system: str, user: str) -> Messages:
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def render(messages: Messages) -> str:
    """The exact prompt as stored for audit."""
    return "\n\n".join(f"[{m['role']}]\n{m['content']}" for m in messages)


def snippets_block(snippets: Sequence[Evidence]) -> str:
    lines = []
    for i, ev in enumerate(snippets, start=1):
        source = f" (source: {ev.source})" if ev.source else ""
        lines.append(f"Snippet {i}{source}:\n{ev.text.strip()}")
    return "\n\n".join(lines) if lines else "(no snippets)"


# --- Running a step ----------------------------------------------------------------------------


def llm_step(
    client: LLMClient,
    *,
    task: str,
    prompt_version: str,
    messages: Messages,
    parse: Callable[[str], Any],
    temperature: float = 0.0,
    top_p: float | None = None,
) -> StepResult:
    """Ask the LLM once (the client retries transport errors) and parse its answer."""
    result: LLMResult = client.complete(task=task, messages=messages, temperature=temperature, top_p=top_p)
    return StepResult(
        value=parse(result.text),
        producer=Producer("llm", result.model),
        prompt_version=prompt_version,
        prompt=render(messages),
        raw_output=result.text,
        reasoning=_reasoning(result.text),
        latency_s=result.latency_s,
        prompt_tokens=result.prompt_tokens,
        completion_tokens=result.completion_tokens,
    )


def decision_step(client: LLMClient, *, task: str, prompt_version: str, messages: Messages) -> StepResult:
    """A yes/no question whose answer ends with "Final decision: yes|no" (value True/False/None)."""
    return llm_step(client, task=task, prompt_version=prompt_version, messages=messages, parse=parse_final_decision)


def _reasoning(text: str) -> str:
    """The model's answer without its final-decision line(s)."""
    kept = [ln for ln in text.splitlines() if parse_final_decision(ln) is None]
    return "\n".join(kept).strip()


def baseline_result(
    name: str,
    prompt_version: str,
    value: Any,
    reasoning: str,
    started: float,
    **extra: Any,
) -> StepResult:
    """An offline baseline's answer, labelled as such (never presented as an LLM)."""
    return StepResult(
        value=value,
        producer=Producer("baseline", name),
        prompt_version=prompt_version,
        prompt="",
        raw_output=reasoning,
        reasoning=reasoning,
        latency_s=time.monotonic() - started,
        extra=extra,
    )


# --- Shared lexical helpers for the baselines ---------------------------------------------------

_STOPWORDS = frozenset(
    """
    a about above after again against all am an and any are as at be because been before being below
    between both but by can could did do does doing down during each few for from further had has have
    having he her here hers him his how i if in into is it its itself just me more most my no nor not now
    of off on once only or other our out over own same she should so some such than that the their them
    then there these they this those through to too under until up very was we were what when where which
    while who whom why will with would you your yours via also amp rt
    """.split()
)
_WORD_RE = re.compile(r"[a-z0-9]+(?:['\u2019][a-z]+)?")


def content_words(text: str) -> list[str]:
    words = _WORD_RE.findall(strip_urls(text).lower())
    return [w for w in words if len(w) > 2 and w not in _STOPWORDS]


def stem(word: str) -> str:
    # Crude prefix stem so "vaccines"/"vaccinated" meet; enough for an overlap heuristic.
    return word[:6]


def lexical_overlap(query: str, text: str) -> float:
    """Share of the query's content-word stems that occur in `text` (0..1)."""
    q = {stem(w) for w in content_words(query)}
    if not q:
        return 0.0
    t = {stem(w) for w in content_words(text)}
    return len(q & t) / len(q)


_SENTENCE_RE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])")


def sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE_RE.split(" ".join(text.split())) if s.strip()]


# Wording the helpfulness and principle baselines look for.
OPINION_RE = re.compile(
    r"\b(i think|i believe|i feel|in my (?:opinion|view)|imo|personally|i guess|probably|obviously|clearly a lie)\b",
    re.IGNORECASE,
)
HOSTILE_RE = re.compile(r"\b(idiot|idiots|stupid|moron|morons|liar|liars|dumb|shame on)\b", re.IGNORECASE)
