"""A Supernote candidate written from existing notes and their ratings: prompt, LLM step (sampled,
not greedy) and the offline baseline that copies the best-rated note. (Not wired into a flow yet.)"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from judging.llm import LLMClient, parse_single_line
from judging.steps.common import Messages, StepResult, baseline_result, llm_step, messages
from notes.text_rules import NOTE_MAX_CHARS

VERSIONS: dict[str, str] = {
    "supernote": "supernote-v1",
}


@dataclass(frozen=True)
class SourceNote:
    """An existing note offered to the Supernote candidate prompt."""

    text: str
    helpful: int = 0
    somewhat: int = 0
    not_helpful: int = 0
    tags: tuple[str, ...] = ()


def supernote_prompt(post: str, notes: Sequence[SourceNote], budget: int) -> Messages:
    blocks = []
    for i, note in enumerate(notes, start=1):
        tags = ", ".join(note.tags) if note.tags else "none"
        blocks.append(
            f"Note {i}: {note.text.strip()}\nRatings: {note.helpful} helpful, {note.somewhat} "
            f"somewhat helpful, {note.not_helpful} not helpful. Tags given by raters: {tags}"
        )
    return messages(
        "You write consensus Community Notes.",
        f"Post:\n{post.strip()}\n\nExisting notes:\n" + "\n\n".join(blocks) + "\n\n"
        "Write one new note that could replace all of these notes and that raters who "
        "usually disagree with each other would both find helpful. Keep what raters valued, "
        "avoid what they criticised, use only facts and links from the existing notes, stay "
        f"neutral, and keep the text without links within {budget} characters.\n"
        "Reply with the note only, on one line.",
    )


def supernote_candidate_llm(
    client: LLMClient,
    *,
    post: str,
    notes: Sequence[SourceNote],
    budget: int = NOTE_MAX_CHARS,
    temperature: float = 0.95,
    top_p: float = 0.8,
) -> StepResult:
    return llm_step(
        client,
        task="supernote",
        prompt_version=VERSIONS["supernote"],
        messages=supernote_prompt(post, notes, budget),
        parse=parse_single_line,
        temperature=temperature,
        top_p=top_p,
    )


def supernote_candidate_baseline(*, post: str, notes: Sequence[SourceNote]) -> StepResult:
    """No synthesis offline: proposes the best-rated source note unchanged."""
    started = time.monotonic()
    if not notes:
        return baseline_result("best-source-note-v1", VERSIONS["supernote"], None, "No source notes.", started)

    def score(n: SourceNote) -> float:
        total = n.helpful + n.somewhat + n.not_helpful
        return (n.helpful + 0.5 * n.somewhat + 1) / (total + 2)

    best = max(range(len(notes)), key=lambda i: score(notes[i]))
    return baseline_result(
        "best-source-note-v1",
        VERSIONS["supernote"],
        notes[best].text,
        f"Source note {best + 1} has the best helpful share ({score(notes[best]):.2f}); copied unchanged.",
        started,
        source_index=best,
    )
