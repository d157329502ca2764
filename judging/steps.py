"""Every LLM-backed step of the product, each with a prompt-based implementation (through
`judging.llm`) and an offline baseline for when no endpoint is configured.

Every result says who produced it (`Producer`): "llm" + model name, "baseline" + baseline
name, or "classifier" + version. Baselines are honest, simple heuristics; they are never
presented as an LLM. No ORM and no model loading here: similarity functions and classifiers
are passed in by the caller.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from judging import prompts
from judging.llm import (
    LLMClient,
    LLMResult,
    parse_final_decision,
    parse_lines,
    parse_single_integer,
    parse_single_line,
)
from judging.prompts import PROMPT_VERSIONS, TOPIC_LABELS, Evidence, SourceNote
from notes.text_rules import find_urls, strip_urls

# (text_a, text_b) -> cosine similarity; provided by the caller (e.g. sentence embeddings).
Similarity = Callable[[str, str], float]

RELEVANCE_COSINE_THRESHOLD = 0.30  # MiniLM: relevant 0.45-0.74, unrelated -0.06-0.13


@dataclass(frozen=True)
class Producer:
    kind: str  # "llm" | "baseline" | "classifier"
    name: str  # model name, baseline name, or classifier version

    @property
    def label(self) -> str:
        return f"{self.kind}:{self.name}"


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


class HelpfulnessModel(Protocol):
    """A trained helpfulness classifier (see judging.classifier)."""

    version: str

    def predict_proba_helpful(self, texts: Sequence[str]) -> list[float]: ...


def _llm_step(
    client: LLMClient,
    *,
    task: str,
    version_key: str,
    messages: prompts.Messages,
    parse: Callable[[str], Any],
    temperature: float = 0.0,
    top_p: float | None = None,
) -> StepResult:
    result: LLMResult = client.complete(task=task, messages=messages, temperature=temperature, top_p=top_p)
    return StepResult(
        value=parse(result.text),
        producer=Producer("llm", result.model),
        prompt_version=PROMPT_VERSIONS[version_key],
        prompt=prompts.render(messages),
        raw_output=result.text,
        reasoning=_reasoning(result.text),
        latency_s=result.latency_s,
        prompt_tokens=result.prompt_tokens,
        completion_tokens=result.completion_tokens,
    )


def _reasoning(text: str) -> str:
    """The model's answer without its final-decision line(s)."""
    kept = [ln for ln in text.splitlines() if parse_final_decision(ln) is None]
    return "\n".join(kept).strip()


def _baseline(
    name: str,
    version_key: str,
    value: Any,
    reasoning: str,
    started: float,
    **extra: Any,
) -> StepResult:
    return StepResult(
        value=value,
        producer=Producer("baseline", name),
        prompt_version=PROMPT_VERSIONS[version_key],
        prompt="",
        raw_output=reasoning,
        reasoning=reasoning,
        latency_s=time.monotonic() - started,
        extra=extra,
    )


# --- Shared lexical helpers for the baselines ---------------------------------------

_STOPWORDS = frozenset(
    [
        "a",
        "about",
        "above",
        "after",
        "again",
        "against",
        "all",
        "am",
        "an",
        "and",
        "any",
        "are",
        "as",
        "at",
        "be",
        "because",
        "been",
        "before",
        "being",
        "below",
        "between",
        "both",
        "but",
        "by",
        "can",
        "could",
        "did",
        "do",
        "does",
        "doing",
        "down",
        "during",
        "each",
        "few",
        "for",
        "from",
        "further",
        "had",
        "has",
        "have",
        "having",
        "he",
        "her",
        "here",
        "hers",
        "him",
        "his",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "itself",
        "just",
        "me",
        "more",
        "most",
        "my",
        "no",
        "nor",
        "not",
        "now",
        "of",
        "off",
        "on",
        "once",
        "only",
        "or",
        "other",
        "our",
        "out",
        "over",
        "own",
        "same",
        "she",
        "should",
        "so",
        "some",
        "such",
        "than",
        "that",
        "the",
        "their",
        "them",
        "then",
        "there",
        "these",
        "they",
        "this",
        "those",
        "through",
        "to",
        "too",
        "under",
        "until",
        "up",
        "very",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "while",
        "who",
        "whom",
        "why",
        "will",
        "with",
        "would",
        "you",
        "your",
        "yours",
        "via",
        "also",
        "amp",
        "rt",
    ]
)
_WORD_RE = re.compile(r"[a-z0-9]+(?:['\u2019][a-z]+)?")


def content_words(text: str) -> list[str]:
    words = _WORD_RE.findall(strip_urls(text).lower())
    return [w for w in words if len(w) > 2 and w not in _STOPWORDS]


def _stem(word: str) -> str:
    # Crude prefix stem so "vaccines"/"vaccinated" meet; enough for an overlap heuristic.
    return word[:6]


def lexical_overlap(query: str, text: str) -> float:
    """Share of the query's content-word stems that occur in `text` (0..1)."""
    q = {_stem(w) for w in content_words(query)}
    if not q:
        return 0.0
    t = {_stem(w) for w in content_words(text)}
    return len(q & t) / len(q)


_SENTENCE_RE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])")


def sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE_RE.split(" ".join(text.split())) if s.strip()]


# --- Relevance --------------------------------------------------------------------------


def relevance_llm(client: LLMClient, *, post: str, snippets: Sequence[Evidence]) -> StepResult:
    return _llm_step(
        client,
        task="judge_relevance",
        version_key="relevance",
        messages=prompts.relevance(post, snippets),
        parse=parse_final_decision,
    )


def relevance_baseline(
    *,
    post: str,
    snippets: Sequence[Evidence],
    similarity: Similarity | None = None,
    threshold: float = RELEVANCE_COSINE_THRESHOLD,
    similarity_name: str = "",
) -> StepResult:
    """Relevant when any snippet, on its own, is close enough to the post.

    With a similarity function: cosine >= threshold. Without: at least 25% of the post's
    content words (and at least two) occur in the snippet.
    """
    started = time.monotonic()
    lines, verdict = [], False
    for i, ev in enumerate(snippets, start=1):
        if similarity is not None:
            score = float(similarity(post, ev.text))
            ok = score >= threshold
            lines.append(f"Snippet {i}: cosine similarity {score:.3f} {'>=' if ok else '<'} {threshold:.2f}.")
        else:
            score = lexical_overlap(post, ev.text)
            shared = len({_stem(w) for w in content_words(post)} & {_stem(w) for w in content_words(ev.text)})
            ok = score >= 0.25 and shared >= 2
            lines.append(
                f"Snippet {i}: {shared} shared content words, overlap {score:.2f} ({'relevant' if ok else 'not relevant'})."
            )
        verdict = verdict or ok
    if not snippets:
        lines.append("No evidence snippets.")
    model = f"{similarity_name}," if similarity_name else ""
    name = f"embedding-cosine-v1({model}t={threshold:.2f})" if similarity is not None else "lexical-overlap-v1"
    lines.append("At least one snippet is relevant." if verdict else "No snippet is relevant.")
    return _baseline(name, "relevance", verdict, "\n".join(lines), started)


# --- Correctness ------------------------------------------------------------------------

_ABSOLUTES = frozenset(
    [
        "always",
        "never",
        "all",
        "every",
        "everyone",
        "nobody",
        "none",
        "proven",
        "proves",
        "guaranteed",
        "guarantee",
        "completely",
        "totally",
        "entirely",
        "cures",
        "cure",
        "definitely",
        "certainly",
        "impossible",
    ]
)
_NUMBER_RE = re.compile(r"\d+(?:[.,]\d+)?%?")


def correctness_llm(client: LLMClient, *, post: str, note: str, snippets: Sequence[Evidence]) -> StepResult:
    return _llm_step(
        client,
        task="judge_correctness",
        version_key="correctness",
        messages=prompts.correctness(post, note, snippets),
        parse=parse_final_decision,
    )


def correctness_baseline(*, post: str, note: str, snippets: Sequence[Evidence]) -> StepResult:
    """Lexical support check: it cannot tell "supports" from "contradicts".

    Fails when a number in the note is absent from the snippets, when the note uses an
    absolute word (always, never, proven, ...) the snippets do not use, or when under half
    of the note's content words occur in the snippets.
    """
    started = time.monotonic()
    evidence = " ".join(ev.text for ev in snippets)
    note_plain = strip_urls(note)
    ev_numbers = set(_NUMBER_RE.findall(evidence))
    ev_words = set(content_words(evidence))
    ev_stems = {_stem(w) for w in ev_words}
    problems = []
    missing_numbers = [n for n in _NUMBER_RE.findall(note_plain) if n not in ev_numbers]
    if missing_numbers:
        problems.append(f"numbers not found in the snippets: {', '.join(sorted(set(missing_numbers)))}")
    words = content_words(note_plain)
    absolutes = sorted({w for w in words if w in _ABSOLUTES and w not in ev_words})
    if absolutes:
        problems.append(f"absolute wording not used by the snippets: {', '.join(absolutes)}")
    coverage = (sum(1 for w in words if _stem(w) in ev_stems) / len(words)) if words else 0.0
    if coverage < 0.5:
        problems.append(f"only {coverage:.0%} of the note's content words occur in the snippets")
    verdict = not problems and bool(snippets)
    reasoning = (
        f"Content-word coverage by the snippets: {coverage:.0%}. "
        + ("Problems: " + "; ".join(problems) + "." if problems else "No unsupported numbers or absolute wording.")
        + ("" if snippets else " No snippets to check against.")
    )
    return _baseline(
        "lexical-support-v1",
        "correctness",
        verdict,
        reasoning,
        started,
        coverage=coverage,
    )


# --- Helpfulness ------------------------------------------------------------------------

_OPINION_RE = re.compile(
    r"\b(i think|i believe|i feel|in my (?:opinion|view)|imo|personally|i guess|probably|obviously|clearly a lie)\b",
    re.IGNORECASE,
)
_HOSTILE_RE = re.compile(r"\b(idiot|idiots|stupid|moron|morons|liar|liars|dumb|shame on)\b", re.IGNORECASE)


def helpfulness_llm(client: LLMClient, *, post: str, note: str, urls: Sequence[str]) -> StepResult:
    return _llm_step(
        client,
        task="judge_helpfulness",
        version_key="helpfulness",
        messages=prompts.helpfulness(post, note, urls),
        parse=parse_final_decision,
    )


def helpfulness_baseline(*, post: str, note: str, urls: Sequence[str]) -> StepResult:
    """Checks a few Community Notes criteria that text rules can see: a source is cited,
    the note is not a fragment, no opinion/speculation markers, no hostile wording, no
    shouting. It cannot judge accuracy or importance."""
    started = time.monotonic()
    problems = []
    if not urls:
        problems.append("no source cited")
    if len(note) < 40:
        problems.append("too short to give context")
    if _OPINION_RE.search(note):
        problems.append("opinion or speculation wording")
    if _HOSTILE_RE.search(note):
        problems.append("argumentative or hostile wording")
    shouting = [w for w in re.findall(r"\b[A-Z]{4,}\b", note) if w not in {"COVID", "NIH", "WHO", "FDA", "CDC"}]
    if len(shouting) >= 2 or "!!" in note:
        problems.append("shouting (capitals or repeated exclamation marks)")
    verdict = not problems
    reasoning = (
        "Problems: " + "; ".join(problems) + "."
        if problems
        else "Cites a source, gives context, no opinion, hostile or shouting wording."
    )
    return _baseline("cn-criteria-heuristic-v1", "helpfulness", verdict, reasoning, started)


def helpfulness_classifier(model: HelpfulnessModel, *, post: str, note: str, urls: Sequence[str]) -> StepResult:
    started = time.monotonic()
    proba = float(model.predict_proba_helpful([note])[0])
    verdict = proba >= 0.5
    reasoning = f"Trained classifier: P(helpful) = {proba:.3f} ({'>=' if verdict else '<'} 0.5)."
    return StepResult(
        value=verdict,
        producer=Producer("classifier", model.version),
        prompt_version=PROMPT_VERSIONS["helpfulness"],
        prompt="",
        raw_output=f"p_helpful={proba:.6f}",
        reasoning=reasoning,
        latency_s=time.monotonic() - started,
        extra={"p_helpful": proba},
    )


# --- Drafting ---------------------------------------------------------------------------


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
    return _llm_step(
        client,
        task="draft",
        version_key="draft",
        messages=prompts.draft(post, snippets, budget),
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
    return _baseline(name, "draft", text, reasoning, started)


# --- Search queries ---------------------------------------------------------------------


def search_queries_llm(client: LLMClient, *, post: str, n: int) -> StepResult:
    return _llm_step(
        client,
        task="search_queries",
        version_key="search_queries",
        messages=prompts.search_queries(post, n),
        parse=lambda t: parse_lines(t)[:n] or None,
    )


def search_queries_baseline(*, post: str, n: int) -> StepResult:
    """Keyword queries: the post's content words, then variants that drop one keyword."""
    started = time.monotonic()
    words = list(dict.fromkeys(content_words(post)))[:8]
    queries = [" ".join(words)] if words else []
    for i in range(len(words)):
        if len(queries) >= n:
            break
        variant = " ".join(w for j, w in enumerate(words) if j != i)
        if variant and variant not in queries:
            queries.append(variant)
    return _baseline(
        "keywords-v1",
        "search_queries",
        queries[:n] or None,
        "Keywords of the post.",
        started,
    )


# --- Pick the most useful search result -------------------------------------------------


def pick_most_useful_llm(client: LLMClient, *, post: str, candidates: Sequence[tuple[str, str, str]]) -> StepResult:
    """candidates: (title, snippet, url). value: the chosen index, or None."""
    return _llm_step(
        client,
        task="pick_useful",
        version_key="pick_useful",
        messages=prompts.pick_useful(post, candidates),
        parse=lambda t: parse_single_integer(t, lo=0, hi=len(candidates) - 1),
    )


def pick_most_useful_baseline(
    *,
    post: str,
    candidates: Sequence[tuple[str, str, str]],
    similarity: Similarity | None = None,
) -> StepResult:
    started = time.monotonic()
    if not candidates:
        return _baseline("lexical-overlap-v1", "pick_useful", None, "No candidates.", started)
    scores = [
        float(similarity(post, f"{t} {s}")) if similarity else lexical_overlap(post, f"{t} {s}")
        for t, s, _ in candidates
    ]
    best = max(range(len(candidates)), key=lambda i: (scores[i], -i))
    name = "embedding-rank-v1" if similarity else "lexical-overlap-v1"
    return _baseline(
        name,
        "pick_useful",
        best,
        f"Highest similarity to the post: {scores[best]:.3f}.",
        started,
    )


# --- Principle checks (Supernotes) -------------------------------------------------------

PRINCIPLES = ("neutral", "no_opinion")


def principle_check_llm(client: LLMClient, *, text: str, principle: str) -> StepResult:
    return _llm_step(
        client,
        task="principle",
        version_key=f"principle_{principle}",
        messages=prompts.principle(text, principle),
        parse=parse_final_decision,
    )


def principle_check_baseline(*, text: str, principle: str) -> StepResult:
    started = time.monotonic()
    if principle == "neutral":
        bad = _HOSTILE_RE.search(text) or "!!" in text
        reason = "hostile or loaded wording found" if bad else "no hostile or loaded wording found"
    elif principle == "no_opinion":
        bad = _OPINION_RE.search(text)
        reason = "opinion/speculation markers found" if bad else "no opinion/speculation markers found"
    else:
        raise ValueError(f"unknown principle {principle!r}")
    return _baseline(
        "lexicon-v1",
        f"principle_{principle}",
        not bad,
        reason.capitalize() + ".",
        started,
    )


# --- Supernote candidate ----------------------------------------------------------------


def supernote_candidate_llm(
    client: LLMClient,
    *,
    post: str,
    notes: Sequence[SourceNote],
    budget: int = 280,
    temperature: float = 0.95,
    top_p: float = 0.8,
) -> StepResult:
    return _llm_step(
        client,
        task="supernote",
        version_key="supernote",
        messages=prompts.supernote(post, notes, budget),
        parse=parse_single_line,
        temperature=temperature,
        top_p=top_p,
    )


def supernote_candidate_baseline(*, post: str, notes: Sequence[SourceNote]) -> StepResult:
    """No synthesis offline: proposes the best-rated source note unchanged."""
    started = time.monotonic()
    if not notes:
        return _baseline("best-source-note-v1", "supernote", None, "No source notes.", started)

    def score(n: SourceNote) -> float:
        total = n.helpful + n.somewhat + n.not_helpful
        return (n.helpful + 0.5 * n.somewhat + 1) / (total + 2)

    best = max(range(len(notes)), key=lambda i: score(notes[i]))
    return _baseline(
        "best-source-note-v1",
        "supernote",
        notes[best].text,
        f"Source note {best + 1} has the best helpful share ({score(notes[best]):.2f}); copied unchanged.",
        started,
        source_index=best,
    )


# --- Topic label ------------------------------------------------------------------------

TOPIC_KEYWORDS: dict[str, tuple[str, ...]] = {
    TOPIC_LABELS[0]: (
        "cancer",
        "diabetes",
        "disease",
        "covid",
        "flu",
        "influenza",
        "autism",
        "measles",
        "infection",
        "syndrome",
        "heart attack",
        "stroke",
        "dementia",
        "obesity",
        "symptom",
    ),
    TOPIC_LABELS[1]: (
        "vaccine",
        "vaccin",
        "drug",
        "ivermectin",
        "hydroxychloroquine",
        "treatment",
        "medication",
        "pill",
        "dose",
        "test",
        "pcr",
        "antibiotic",
        "mrna",
        "jab",
        "booster",
        "therapy",
    ),
    TOPIC_LABELS[2]: (
        "mandate",
        "lockdown",
        "guidance",
        "policy",
        "cdc",
        "who ",
        "public health",
        "mask",
        "quarantine",
        "fda",
        "regulation",
        "recommend",
    ),
    TOPIC_LABELS[3]: (
        "supplement",
        "diet",
        "vitamin",
        "detox",
        "keto",
        "wellness",
        "herbal",
        "superfood",
        "fasting",
        "essential oil",
        "cleanse",
    ),
    TOPIC_LABELS[4]: (
        "doctor",
        "nurse",
        "hospital",
        "physician",
        "healthcare",
        "insurance",
        "medicare",
        "nhs",
        "pharma",
    ),
    TOPIC_LABELS[5]: (
        "immunity",
        "virus",
        "gene",
        "dna",
        "transmission",
        "herd",
        "mutation",
        "variant",
        "antibod",
        "epidemi",
        "pandemic",
        "spike protein",
    ),
    TOPIC_LABELS[6]: (
        "hoax",
        "plandemic",
        "conspiracy",
        "depopulation",
        "microchip",
        "bill gates",
        "cover-up",
        "coverup",
        "5g",
        "they don't want you",
    ),
}


def topic_label_llm(client: LLMClient, *, text: str) -> StepResult:
    def parse(answer: str) -> str | None:
        idx = parse_single_integer(answer, lo=1, hi=len(TOPIC_LABELS))
        return TOPIC_LABELS[idx - 1] if idx is not None else None

    return _llm_step(
        client,
        task="topic",
        version_key="topic",
        messages=prompts.topic(text),
        parse=parse,
    )


def topic_label_baseline(*, text: str) -> StepResult:
    """Keyword counts per category; "not health" when no keyword matches. Ties go to the
    earlier category except that conspiracy keywords win (they co-occur with others)."""
    started = time.monotonic()
    low = f" {text.lower()} "
    counts = {label: sum(low.count(k) for k in keys) for label, keys in TOPIC_KEYWORDS.items()}
    if counts[TOPIC_LABELS[6]]:
        label = TOPIC_LABELS[6]
    elif any(counts.values()):
        label = max(TOPIC_LABELS[:6], key=lambda lbl: counts[lbl])
    else:
        label = TOPIC_LABELS[7]
    reasoning = (
        "Keyword matches: " + ", ".join(f"{k}={v}" for k, v in counts.items() if v)
        if any(counts.values())
        else "No health keyword."
    )
    return _baseline("keywords-v1", "topic", label, reasoning, started)
