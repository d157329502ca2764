"""Versioned prompts for every LLM-backed step. Bump a step's version when its text changes:
stored decisions record the version they were produced with."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

PROMPT_VERSIONS: dict[str, str] = {
    "relevance": "relevance-v2",
    "correctness": "correctness-v1",
    "helpfulness": "helpfulness-v1",
    "draft": "draft-v1",
    "search_queries": "search-queries-v1",
    "pick_useful": "pick-useful-v1",
    "principle_neutral": "principle-neutral-v1",
    "principle_no_opinion": "principle-no-opinion-v1",
    "supernote": "supernote-v1",
    "topic": "topic-v1",
}

TOPIC_LABELS: tuple[str, ...] = (
    "diseases or conditions",
    "drugs, vaccines, treatments and tests",
    "public-health guidance or policy",
    "wellness products, diets and supplements",
    "healthcare professionals or systems",
    "biological or epidemiological concepts",
    "health conspiracies or hoaxes",
    "not health",
)

_DECISION_RULE = (
    "Think step by step and explain your reasoning briefly. Then end your answer with one "
    'last line that is exactly "Final decision: yes" or "Final decision: no".'
)


@dataclass(frozen=True)
class Evidence:
    """One evidence snippet as the prompts see it."""

    text: str
    source: str = ""


@dataclass(frozen=True)
class SourceNote:
    """An existing note offered to the Supernote candidate prompt."""

    text: str
    helpful: int = 0
    somewhat: int = 0
    not_helpful: int = 0
    tags: tuple[str, ...] = ()


Messages = list[dict[str, str]]


def _msgs(system: str, user: str) -> Messages:
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def render(messages: Messages) -> str:
    """The exact prompt as stored for audit."""
    return "\n\n".join(f"[{m['role']}]\n{m['content']}" for m in messages)


def _snippets_block(snippets: Sequence[Evidence]) -> str:
    lines = []
    for i, ev in enumerate(snippets, start=1):
        source = f" (source: {ev.source})" if ev.source else ""
        lines.append(f"Snippet {i}{source}:\n{ev.text.strip()}")
    return "\n\n".join(lines) if lines else "(no snippets)"


def relevance(post: str, snippet: Evidence) -> Messages:
    """One snippet, judged on its own (the stage passes when any snippet is relevant)."""
    source = f" (source: {snippet.source})" if snippet.source else ""
    return _msgs(
        "You check evidence for a fact-checking note on a social media post.",
        f"Post:\n{post.strip()}\n\nEvidence snippet{source}:\n{snippet.text.strip()}\n\n"
        "A snippet is relevant when it adds meaningful factual background, clarification or "
        "support for evaluating the claim made in the post; sharing a topic or a few words is "
        "not enough.\n"
        "Question: is this snippet relevant to the post's claim?\n"
        "Answer yes if it is relevant, no if it is not.\n" + _DECISION_RULE,
    )


def correctness(post: str, note: str, snippets: Sequence[Evidence]) -> Messages:
    return _msgs(
        "You check whether a fact-checking note is faithful to its evidence.",
        f"Post:\n{post.strip()}\n\nEvidence snippets:\n{_snippets_block(snippets)}\n\n"
        f"Note:\n{note.strip()}\n\n"
        "Compare every statement of the note with the snippets. A distortion is a factual "
        "error, an exaggeration, an overgeneralization, misleading framing, or a claim the "
        "snippets do not support.\n"
        "Question: is the note faithful to the snippets, with no distortion of any snippet?\n"
        "Answer yes if the note is faithful, no if it distorts any snippet.\n" + _DECISION_RULE,
    )


def helpfulness(post: str, note: str, urls: Sequence[str]) -> Messages:
    sources = "\n".join(f"- {u}" for u in urls) if urls else "(none)"
    return _msgs(
        "You rate fact-checking notes the way Community Notes raters do.",
        f"Post:\n{post.strip()}\n\nNote:\n{note.strip()}\n\nSources cited by the note:\n{sources}\n\n"
        "A helpful note is clear and well written, cites high-quality sources, directly "
        "addresses the post's claim, provides important context and uses neutral language.\n"
        "A note is not helpful when it has incorrect information, missing or unreliable "
        "sources, misses key points or is irrelevant, is hard to understand, is argumentative "
        "or biased, is spam or harassment, cites sources that do not support it, is opinion "
        "or speculation, or is not needed.\n"
        "Question: would raters from different perspectives find this note helpful?\n"
        "Answer yes if helpful, no if not.\n" + _DECISION_RULE,
    )


def draft(post: str, snippets: Sequence[Evidence], budget: int) -> Messages:
    return _msgs(
        "You write Community Notes: short, neutral context notes on social media posts.",
        f"Post:\n{post.strip()}\n\nEvidence snippets:\n{_snippets_block(snippets)}\n\n"
        "Write one note that gives readers the context they need about the post's claim.\n"
        "Rules: write in English; one single line; no URLs or links; at most "
        f"{budget} characters; specific, objective and verifiable; use only facts stated in "
        "the snippets, nothing else.\nReply with the note text only.",
    )


def search_queries(post: str, n: int) -> Messages:
    return _msgs(
        "You plan web searches for fact-checking social media posts.",
        f"Post:\n{post.strip()}\n\nWrite {n} search queries that would find reliable sources to "
        "check the post's claim. Make them semantically diverse: each one should look at the "
        "claim from a different angle (the claim itself, the underlying science, official "
        f"guidance, the origin of the claim).\nReply with exactly {n} lines, one query per "
        "line, nothing else.",
    )


def pick_useful(post: str, candidates: Sequence[tuple[str, str, str]]) -> Messages:
    items = "\n\n".join(f"[{i}] {title}\n{snippet}\nURL: {url}" for i, (title, snippet, url) in enumerate(candidates))
    return _msgs(
        "You select evidence for fact-checking notes.",
        f"Post:\n{post.strip()}\n\nSearch results:\n{items}\n\n"
        "Which single result is the most useful: relevant to the post's topic, adding "
        "background or clarification, and reliable enough to cite?\n"
        "Reply with its index number only.",
    )


_PRINCIPLES = {
    "neutral": (
        "Question: is the text written in neutral, unbiased language (no loaded words, "
        "no taking sides, no mockery)?\nAnswer yes if it is neutral, no if it is not."
    ),
    "no_opinion": (
        "Question: does the text state only verifiable facts, with no opinion and no "
        "speculation?\nAnswer yes if it contains no opinion or speculation, no otherwise."
    ),
}


def principle(text: str, name: str) -> Messages:
    return _msgs(
        "You review candidate Community Notes against writing principles.",
        f"Text:\n{text.strip()}\n\n{_PRINCIPLES[name]}\n{_DECISION_RULE}",
    )


def supernote(post: str, notes: Sequence[SourceNote], budget: int) -> Messages:
    blocks = []
    for i, note in enumerate(notes, start=1):
        tags = ", ".join(note.tags) if note.tags else "none"
        blocks.append(
            f"Note {i}: {note.text.strip()}\nRatings: {note.helpful} helpful, {note.somewhat} "
            f"somewhat helpful, {note.not_helpful} not helpful. Tags given by raters: {tags}"
        )
    return _msgs(
        "You write consensus Community Notes.",
        f"Post:\n{post.strip()}\n\nExisting notes:\n" + "\n\n".join(blocks) + "\n\n"
        "Write one new note that could replace all of these notes and that raters who "
        "usually disagree with each other would both find helpful. Keep what raters valued, "
        "avoid what they criticised, use only facts and links from the existing notes, stay "
        f"neutral, and keep the text without links within {budget} characters.\n"
        "Reply with the note only, on one line.",
    )


def topic(text: str) -> Messages:
    options = "\n".join(f"{i}. {label}" for i, label in enumerate(TOPIC_LABELS, start=1))
    return _msgs(
        "You classify social media posts by health topic.",
        f"Text:\n{text.strip()}\n\nCategories:\n{options}\n\n"
        "Which category fits the text best? Reply with the category number only.",
    )
