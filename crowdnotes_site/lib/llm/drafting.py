"""GENERATE: a note draft from confirmed snippets, by the configured LLM or the offline baseline.

Pure (no Django): the caller passes the post, the (url, passage) pairs and the configured LLM client
(`crowdnotes_site.llm.llm_client()`, None offline) and stores the result.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from crowdnotes_site.lib.llm.client import LLMBudgetExceeded, LLMClient, LLMError
from crowdnotes_site.lib.llm.steps.common import Evidence, sentences
from crowdnotes_site.lib.llm.steps.drafting import draft_note_baseline, draft_note_llm
from crowdnotes_site.lib.text_rules import NOTE_MAX_CHARS, find_urls

PROVENANCE_MIN_OVERLAP = 0.5


class DraftError(Exception):
    """The draft could not be written; the message tells the contributor what happened."""


@dataclass(frozen=True)
class Draft:
    text: str
    method: str  # e.g. "llm:gpt-4.1-mini" or "baseline:extractive-lexical-v2"
    provenance: list[dict[str, Any]]


def draft_budget(urls: Sequence[str]) -> int:
    """Characters left for the text once the appended URLs are counted (1 each)."""
    return NOTE_MAX_CHARS - len(set(urls))


def draft_note(*, post: str, snippets: Sequence[tuple[str, str]], client: LLMClient | None) -> Draft:
    evidence = [Evidence(text=text, source=url) for url, text in snippets]
    budget = draft_budget([url for url, _ in snippets])
    if client is not None:
        try:
            result = draft_note_llm(client, post=post, snippets=evidence, budget=budget)
        except LLMBudgetExceeded as exc:
            raise DraftError(f"No draft: {exc}. Write the note yourself, or draft again tomorrow.") from exc
        except LLMError as exc:
            raise DraftError(f"The LLM endpoint failed ({exc}). Nothing was lost: try drafting again.") from exc
        if result.value is None:
            raise DraftError(
                "The LLM's answer broke the note rules (more than one line, a URL, or over the length "
                "budget), so it was not used. Try again or write the note yourself."
            )
    else:
        result = draft_note_baseline(post=post, snippets=evidence, budget=budget)
        if result.value is None:
            raise DraftError("The confirmed passages had no sentence to draft from. Write the note yourself.")
    text = str(result.value)
    if find_urls(text):
        raise DraftError("The draft contained a URL, which notes may not; write the note yourself.")
    return Draft(text=text, method=result.producer.label, provenance=sentence_provenance(text, snippets))


def sentence_provenance(text: str, snippets: Sequence[tuple[str, str]]) -> list[dict[str, Any]]:
    """Which snippet each draft sentence came from: an exact copy, or the best word overlap."""
    out: list[dict[str, Any]] = []
    for sentence in sentences(text):
        words = set(_words(sentence))
        best_index, best_overlap, exact = None, 0.0, False
        for index, (_, passage) in enumerate(snippets):
            if sentence.rstrip("…") in passage:
                best_index, best_overlap, exact = index, 1.0, True
                break
            overlap = len(words & set(_words(passage))) / max(len(words), 1)
            if overlap > best_overlap:
                best_index, best_overlap = index, overlap
        if best_index is not None and best_overlap < PROVENANCE_MIN_OVERLAP:
            best_index = None
        out.append(
            {
                "sentence": sentence,
                "snippet": best_index,
                "how": "copied" if exact else ("word overlap" if best_index is not None else "unknown"),
                "overlap": round(best_overlap, 2),
            }
        )
    return out


def _words(text: str) -> list[str]:
    return [w for w in "".join(c.lower() if c.isalnum() else " " for c in text).split() if len(w) > 2]
