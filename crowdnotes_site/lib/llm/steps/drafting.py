"""Drafting a note from confirmed evidence snippets: the prompt, the LLM step (whose reply must
obey the note rules) and the extractive offline baseline. crowdnotes_site.lib.llm.drafting calls these."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from crowdnotes_site.lib.llm.client import LLMClient, parse_single_line
from crowdnotes_site.lib.llm.steps.common import (
    Evidence,
    Messages,
    Similarity,
    StepResult,
    baseline_result,
    lexical_overlap,
    llm_step,
    messages,
    sentences,
    snippets_block,
)
from crowdnotes_site.lib.text_rules import find_urls, strip_urls

VERSIONS: dict[str, str] = {
    "draft": "draft-v1",
}


def draft_prompt(post: str, snippets: Sequence[Evidence], budget: int) -> Messages:
    return messages(
        "You write Community Notes: short, neutral context notes on social media posts.",
        f"Post:\n{post.strip()}\n\nEvidence snippets:\n{snippets_block(snippets)}\n\n"
        "Write one note that gives readers the context they need about the post's claim.\n"
        "Rules: write in English; one single line; no URLs or links; at most "
        f"{budget} characters; specific, objective and verifiable; use only facts stated in "
        "the snippets, nothing else.\nReply with the note text only.",
    )


def _validate_draft(budget: int) -> Callable[[str], str | None]:
    def parse(text: str) -> str | None:
        line = parse_single_line(text)
        if line is None or find_urls(line) or len(line) > budget:
            return None
        return line

    return parse


def draft_note_llm(client: LLMClient, *, post: str, snippets: Sequence[Evidence], budget: int) -> StepResult:
    """A note drafted by the LLM; value None when the reply breaks the rules (several lines,
    a URL, over budget)."""
    return llm_step(
        client,
        task="draft",
        prompt_version=VERSIONS["draft"],
        messages=draft_prompt(post, snippets, budget),
        parse=_validate_draft(budget),
    )


def draft_note_baseline(
    *,
    post: str,
    snippets: Sequence[Evidence],
    budget: int,
    similarity: Similarity | None = None,
) -> StepResult:
    """Extractive draft: the snippet sentences that best match the post, in ranked order,
    while they fit the budget. Copies sentences; writes nothing new."""
    started = time.monotonic()
    scored = []
    for ev in snippets:
        for sent in sentences(strip_urls(ev.text)):
            if len(sent) < 20:
                continue
            score = similarity(post, sent) if similarity else lexical_overlap(post, sent)
            scored.append((float(score), sent))
    scored.sort(key=lambda x: -x[0])
    chosen: list[str] = []
    for _, sent in scored:
        candidate = " ".join([*chosen, sent])
        if len(candidate) <= budget:
            chosen.append(sent)
    if not chosen and scored:
        best = scored[0][1]
        chosen = [best[: max(budget - 1, 0)].rsplit(" ", 1)[0] + "…"]
    text = " ".join(chosen) or None
    reasoning = f"Extractive: {len(chosen)} of {len(scored)} snippet sentences, ranked by similarity to the post."
    name = "extractive-embedding-v1" if similarity else "extractive-lexical-v1"
    return baseline_result(name, VERSIONS["draft"], text, reasoning, started)
