"""Pairwise evidence utility: which of two evidence sets (the human note's and the machine's)
is more useful for writing an accurate note on the post — the benchmark's comparator. The LLM
step answers A, B or tie; the offline baseline compares the best snippet's similarity to the
post and calls a tie within a margin. Pure: the similarity function is passed in."""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import replace

from crowdnotes_site.lib.lexical import lexical_overlap
from crowdnotes_site.lib.llm.client import LLMClient, answer_lines, last_line
from crowdnotes_site.lib.llm.steps.common import (
    Evidence,
    Messages,
    Similarity,
    StepResult,
    baseline_result,
    data_messages,
    evidence_items,
    llm_step,
)

VERSIONS: dict[str, str] = {
    "compare_evidence": "compare-evidence-v2",
}

A, B, TIE = "A", "B", "tie"
TIE_MARGIN = 0.05  # baseline: best-snippet similarities closer than this are a tie


def compare_prompt(post: str, set_a: Sequence[Evidence], set_b: Sequence[Evidence]) -> Messages:
    return data_messages(
        "You compare two sets of evidence for a fact-checking note on a social media post.",
        {"post": post, "evidence_set_a": evidence_items(set_a), "evidence_set_b": evidence_items(set_b)},
        "Which set is more useful for writing an accurate, helpful note on the post's claim: "
        "relevant to the claim, specific, and from sources readers can trust? If neither is "
        "clearly more useful, say it is a tie. An empty set has no evidence.\n"
        "Explain briefly, then end with one last line that is exactly "
        '"Final answer: A", "Final answer: B" or "Final answer: tie". Only that last line counts.',
    )


_ANSWER = re.compile(r"^\W*final answer\W*[:=]?\s*\**\s*(a|b|tie)\b", re.IGNORECASE)


def parse_comparison(text: str) -> str | None:
    """The answer's last non-empty line, which must be "Final answer: A|B|tie"; None otherwise
    (never a guess, and never a "Final answer" line found earlier, e.g. in quoted data)."""
    match = _ANSWER.match(last_line(text).strip())
    if match is None:
        return None
    value = match.group(1).lower()
    return TIE if value == "tie" else value.upper()


def compare_evidence_llm(
    client: LLMClient, *, post: str, set_a: Sequence[Evidence], set_b: Sequence[Evidence]
) -> StepResult:
    result = llm_step(
        client,
        task="compare_evidence",
        prompt_version=VERSIONS["compare_evidence"],
        messages=compare_prompt(post, set_a, set_b),
        parse=parse_comparison,
    )
    lines = answer_lines(result.raw_output)
    if lines and _ANSWER.match(lines[-1].strip()):
        lines.pop()
    reasoning = "\n".join(lines).strip()
    return replace(result, reasoning=reasoning)


def compare_evidence_baseline(
    *,
    post: str,
    set_a: Sequence[Evidence],
    set_b: Sequence[Evidence],
    similarity: Similarity | None = None,
    margin: float = TIE_MARGIN,
) -> StepResult:
    """The set whose best snippet is closer to the post (cosine, or word overlap without a
    similarity function); a tie within `margin`. An empty set scores 0."""
    started = time.monotonic()
    score = similarity or lexical_overlap

    def best(evidence: Sequence[Evidence]) -> float:
        return max((float(score(post, ev.text)) for ev in evidence if ev.text.strip()), default=0.0)

    a, b = best(set_a), best(set_b)
    value = TIE if abs(a - b) < margin else (A if a > b else B)
    kind = "embedding" if similarity else "lexical"
    reasoning = f"Best snippet {kind} similarity to the post: A {a:.3f}, B {b:.3f} (tie within {margin})."
    return baseline_result(
        f"evidence-utility-{kind}-v1", VERSIONS["compare_evidence"], value, reasoning, started, score_a=a, score_b=b
    )
