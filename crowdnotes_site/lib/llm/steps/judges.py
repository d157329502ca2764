"""The three judges of a note — relevance, correctness, helpfulness — each with its prompt,
its LLM step and its offline baseline (helpfulness also has a trained classifier). The gating
(relevance → correctness → helpfulness) is crowdnotes_site.lib.llm.pipeline's."""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from difflib import SequenceMatcher
from typing import TYPE_CHECKING, Protocol

from crowdnotes_site.lib.lexical import content_words, lexical_overlap, stem, stems, terms_touched
from crowdnotes_site.lib.llm.client import LLMClient
from crowdnotes_site.lib.llm.steps.common import (
    DECISION_RULE,
    HOSTILE_RE,
    OPINION_RE,
    Evidence,
    Messages,
    Producer,
    Similarity,
    StepResult,
    baseline_result,
    data_messages,
    decision_step,
    evidence_items,
)
from crowdnotes_site.lib.llm.steps.search import key_terms
from crowdnotes_site.lib.llm.steps.topics import TOPIC_KEYWORDS, TOPIC_LABELS
from crowdnotes_site.lib.text_rules import strip_urls

if TYPE_CHECKING:
    from crowdnotes_site.lib.llm.classifier import JudgedNote

VERSIONS: dict[str, str] = {
    "relevance": "relevance-v3",
    "correctness": "correctness-v2",
    "helpfulness": "helpfulness-v2",
}

RELEVANCE_COSINE_THRESHOLD = 0.30  # MiniLM: relevant 0.45-0.74, unrelated -0.06-0.13


class HelpfulnessModel(Protocol):
    """A trained helpfulness classifier (see crowdnotes_site.lib.llm.classifier)."""

    version: str
    threshold: float

    def predict_proba(self, notes: Sequence[JudgedNote]) -> list[float]: ...


# --- Prompts ------------------------------------------------------------------------------------


def relevance_prompt(post: str, snippet: Evidence) -> Messages:
    """One snippet, judged on its own (the stage passes when any snippet is relevant)."""
    return data_messages(
        "You check evidence for a fact-checking note on a social media post.",
        {"post": post, "evidence_snippet": {"source": snippet.source, "text": snippet.text}},
        "A snippet is relevant when it adds meaningful factual background, clarification or "
        "support for evaluating the claim made in the post; sharing a topic or a few words is "
        "not enough.\n"
        "Question: is this snippet relevant to the post's claim?\n"
        "Answer yes if it is relevant, no if it is not.\n" + DECISION_RULE,
    )


def correctness_prompt(post: str, note: str, snippets: Sequence[Evidence]) -> Messages:
    return data_messages(
        "You check whether a fact-checking note is faithful to its evidence.",
        {"post": post, "evidence_snippets": evidence_items(snippets), "note": note},
        "Compare every statement of the note with the snippets. A distortion is a factual "
        "error, an exaggeration, an overgeneralization, misleading framing, or a claim the "
        "snippets do not support.\n"
        "Question: is the note faithful to the snippets, with no distortion of any snippet?\n"
        "Answer yes if the note is faithful, no if it distorts any snippet.\n" + DECISION_RULE,
    )


def helpfulness_prompt(post: str, note: str, urls: Sequence[str]) -> Messages:
    return data_messages(
        "You rate fact-checking notes the way Community Notes raters do.",
        {"post": post, "note": note, "sources_cited_by_the_note": list(urls)},
        "A helpful note is clear and well written, cites high-quality sources, directly "
        "addresses the post's claim, provides important context and uses neutral language.\n"
        "A note is not helpful when it has incorrect information, missing or unreliable "
        "sources, misses key points or is irrelevant, is hard to understand, is argumentative "
        "or biased, is spam or harassment, cites sources that do not support it, is opinion "
        "or speculation, or is not needed.\n"
        "Question: would raters from different perspectives find this note helpful?\n"
        "Answer yes if helpful, no if not.\n" + DECISION_RULE,
    )


# --- Relevance --------------------------------------------------------------------------


def relevance_llm(client: LLMClient, *, post: str, snippets: Sequence[Evidence]) -> StepResult:
    """Ask about each snippet on its own, in order, until one is relevant.

    value: True when a snippet is relevant; False when every snippet was answered "no";
    None when no snippet was relevant and at least one answer could not be parsed."""
    if not snippets:
        return baseline_result(
            "no-evidence-rule-v1", VERSIONS["relevance"], False, "No evidence snippets to judge.", time.monotonic()
        )
    parts: list[StepResult] = []
    for i, ev in enumerate(snippets, start=1):
        part = decision_step(
            client, task="judge_relevance", prompt_version=VERSIONS["relevance"], messages=relevance_prompt(post, ev)
        )
        parts.append(replace(part, reasoning=f"Snippet {i}: {part.reasoning or '(no reasoning)'}"))
        if part.value is True:
            break
    values = [p.value for p in parts]
    value = True if True in values else (None if None in values else False)
    return StepResult(
        value=value,
        producer=parts[-1].producer,
        prompt_version=parts[-1].prompt_version,
        prompt="\n\n".join(f"=== snippet {i} ===\n{p.prompt}" for i, p in enumerate(parts, start=1)),
        raw_output="\n\n".join(f"=== snippet {i} ===\n{p.raw_output}" for i, p in enumerate(parts, start=1)),
        reasoning="\n".join(p.reasoning for p in parts),
        latency_s=sum(p.latency_s for p in parts),
        prompt_tokens=_sum_or_none(p.prompt_tokens for p in parts),
        completion_tokens=_sum_or_none(p.completion_tokens for p in parts),
        extra={"snippet_verdicts": values},
    )


def _sum_or_none(values: Iterable[int | None]) -> int | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


# Words that name a condition without saying which: a note may name "a syndrome" on another claim's
# post, but a post's "disease" does not say which one a note must name.
_GENERIC_CONDITIONS = frozenset({"disease", "syndrome", "symptom", "infection"})


def _conditions(text: str) -> set[str]:
    """The conditions the text names, from the topic classifier's list of diseases (word starts:
    "covid" in "COVID-19", never "flu" in "influence")."""
    low = text.lower()
    return {k for k in TOPIC_KEYWORDS[TOPIC_LABELS[0]] if re.search(rf"\b{re.escape(k)}", low)}


def note_off_claim(post: str, note: str) -> str | None:
    """Why the note is about another claim than the post's, or None. Two rules an offline judge
    can check: the note names none of the post's key terms (search.key_terms), or the post names a
    condition the note never names while the note names another one (a note on SIDS under a post
    on autism). Empty texts, and posts without key terms, are never called off-claim."""
    if not post.strip() or not note.strip():
        return None
    terms = key_terms(post)
    found = stems(note, short_numbers=True)
    # A term counts when the note has any of its words ("babies" of "babies sleep safest").
    if terms and not any(stems(t, short_numbers=True) & found for t in terms):
        named = ", ".join(f'"{t}"' for t in terms)
        return f"The note names none of the post's key terms ({named}): it is about another claim than the post's."
    in_post = _conditions(post) - _GENERIC_CONDITIONS
    in_note = _conditions(note)
    if in_post and in_note and not in_post & in_note:
        return (
            f"The post is about {', '.join(sorted(in_post))}, which the note never names; the note is about "
            f"{', '.join(sorted(in_note))}: another claim than the post's."
        )
    return None


# --- Does a text address the post's claim? -----------------------------------------------------
#
# An embedding cosine sees the topic: a CDC page on vaccines and SIDS is close to a post saying that
# vaccines cause autism. The offline judges and the offline draft therefore also ask that a
# passage, a note or a draft sentence carries the claim's own words: at least half of the post's
# key terms (search.key_terms: noun phrases, numbers kept) touched, and, when the post names
# a condition or a code name (autism, SIDS, MMR, 5G), at least one of them named. Measured on
# labelled cases in bench/README.md, "Offline checks a moderator can trust".

CLAIM_TERM_SHARE = 0.5
# Capitalised names that say who speaks or where, not what the claim is about.
_SPEAKERS = frozenset("CDC WHO FDA NIH NHS EMA AAP US USA UK EU UN AP BBC CNN NYT FAQ PDF CEO".split())
# Code names a claim is about: acronyms (SIDS, MMR, DNP, mRNA) and letter-number names (5G, H1N1).
_CODE_NAME_RE = re.compile(r"\b(?:[A-Z]{2,6}[0-9]*s?|m[A-Z]{2,5}|[A-Z]?[0-9]+[A-Za-z]+[0-9A-Za-z]*)\b")


def claim_names(post: str) -> list[str]:
    """What the post's claim is about by name: the conditions it names (the topic classifier's
    disease list, without the generic "disease") and its code names, lower-cased."""
    conditions = _conditions(post) - _GENERIC_CONDITIONS
    codes = _names_in(post) - _conditions(post)
    return sorted(conditions | {c for c in codes if not any(c.startswith(k) for k in conditions)})


def _named(name: str, text: str) -> bool:
    return re.search(rf"\b{re.escape(name)}", text.lower()) is not None


def _names_in(text: str) -> set[str]:
    """Every condition (generic ones too) and code name the text names, lower-cased."""
    codes = {m.lower() for m in _CODE_NAME_RE.findall(strip_urls(text)) if m.upper() not in _SPEAKERS}
    return _conditions(text) | codes


@dataclass(frozen=True)
class ClaimCoverage:
    """How much of the post's claim a text carries (`claim_coverage`)."""

    terms: tuple[str, ...]
    touched: tuple[str, ...]
    names: tuple[str, ...]
    named: tuple[str, ...]
    other_names: tuple[str, ...] = ()
    # A post that names no condition names its subject by a code name (SIDS in "shots … die in
    # their cribs. Vaccines are causing SIDS"), and the text names it. A condition is not enough: it
    # is often the topic, not the claim (COVID in "the AstraZeneca COVID vaccine doesn't work").
    subject_named: bool = False

    @property
    def share(self) -> float:
        return len(self.touched) / len(self.terms) if self.terms else 1.0

    @property
    def addressed(self) -> bool:
        """Evidence on the claim: at least CLAIM_TERM_SHARE of the key terms touched and, when the
        post names any, one of its names named. A post with neither asks nothing."""
        return self.share >= CLAIM_TERM_SHARE and (not self.names or bool(self.named))

    @property
    def addressed_by_note(self) -> bool:
        """A note on the claim. A note that names what the claim is about addresses it, whatever
        details of the post's story it leaves out (the post's key terms include them: "cribs",
        "4 month shots"). Otherwise the key terms as for evidence, but the note may leave the name to
        the post it sits under ("drinking bleach is poisonous" under "bleach cures COVID-19"), as
        long as it does not name another subject instead (SIDS under a post on autism)."""
        if self.subject_named:
            return True
        names_ok = not self.names or bool(self.named) or not self.other_names
        return self.share >= CLAIM_TERM_SHARE and names_ok

    def explain(self) -> str:
        missing = [t for t in self.terms if t not in self.touched]
        parts = [f"{len(self.touched)} of the post's {len(self.terms)} key terms"]
        if missing:
            parts[0] += " (missing: " + ", ".join(f'"{t}"' for t in missing) + ")"
        if self.names and not self.named:
            names = ", ".join(self.names)
            others = f", but names {', '.join(self.other_names)}" if self.other_names else ""
            parts.append(f"none of the names the claim is about ({names}){others}")
        return "; ".join(parts)


def claim_coverage(post: str, text: str, *, terms: Sequence[str] | None = None) -> ClaimCoverage:
    """How much of the post's claim `text` carries: its key terms touched, its names named.
    `terms` lets a caller that checks many texts against one post compute the key terms once."""
    terms = list(key_terms(post) if terms is None else terms)
    names = claim_names(post)
    named = tuple(n for n in names if _named(n, text))
    subject = [] if _conditions(post) - _GENERIC_CONDITIONS else names
    others = sorted(
        n for n in _names_in(text) - set(names) if not any(n.startswith(k) or k.startswith(n) for k in names)
    )
    return ClaimCoverage(
        terms=tuple(terms),
        touched=tuple(terms_touched(terms, text)),
        names=tuple(names),
        named=named,
        other_names=tuple(others),
        subject_named=any(n in named for n in subject),
    )


def relevance_baseline(
    *,
    post: str,
    snippets: Sequence[Evidence],
    similarity: Similarity | None = None,
    threshold: float = RELEVANCE_COSINE_THRESHOLD,
    similarity_name: str = "",
    note: str = "",
) -> StepResult:
    """Relevant when any snippet, on its own, is close enough to the post and addresses its claim
    (`claim_coverage`: a page on the topic but on another claim is not relevant), and the note
    (when given) is about the post's claim (`note_off_claim`): evidence on topic does not make a
    note on another claim relevant.

    With a similarity function: cosine >= threshold. Without: at least 25% of the post's
    content words (and at least two) occur in the snippet.
    """
    started = time.monotonic()
    lines, verdict = [], False
    terms = key_terms(post)
    for i, ev in enumerate(snippets, start=1):
        if similarity is not None:
            score = float(similarity(post, ev.text))
            close = score >= threshold
            line = f"Snippet {i}: cosine similarity {score:.3f} {'>=' if close else '<'} {threshold:.2f}"
        else:
            score = lexical_overlap(post, ev.text)
            shared = len(stems(post) & stems(ev.text))
            close = score >= 0.25 and shared >= 2
            line = f"Snippet {i}: {shared} shared content words, overlap {score:.2f}"
        claim = claim_coverage(post, ev.text, terms=terms)
        ok = close and claim.addressed
        why = "relevant" if ok else ("not on the post's topic" if not close else "on the topic, not on the claim")
        lines.append(f"{line}; it carries {claim.explain()} ({why}).")
        verdict = verdict or ok
    if not snippets:
        lines.append("No evidence snippets.")
    model = f"{similarity_name}," if similarity_name else ""
    name = f"embedding-cosine-v1({model}t={threshold:.2f})" if similarity is not None else "lexical-overlap-v1"
    name += "+claim-terms-v1"
    lines.append("At least one snippet is relevant." if verdict else "No snippet is relevant.")
    off_claim = note_off_claim(post, note)
    if off_claim:
        lines.append(off_claim)
        verdict = False
    if note:
        name += "+note-on-claim-v1"
    return baseline_result(name, VERSIONS["relevance"], verdict, "\n".join(lines), started)


# --- Correctness ------------------------------------------------------------------------

_ABSOLUTES = frozenset(
    """
    always never all every everyone nobody none proven proves guaranteed guarantee completely totally
    entirely cures cure definitely certainly impossible
    """.split()
)
_NUMBER_RE = re.compile(r"\d+(?:[.,]\d+)?%?")


def correctness_llm(client: LLMClient, *, post: str, note: str, snippets: Sequence[Evidence]) -> StepResult:
    return decision_step(
        client,
        task="judge_correctness",
        prompt_version=VERSIONS["correctness"],
        messages=correctness_prompt(post, note, snippets),
    )


# A note whose words follow a passage's, in order, for this share of the note is a copy of it.
COPY_SHARE = 0.8


def copied_share(note: str, passages: Sequence[str]) -> float:
    """The largest share of the note's words that one passage holds in the same order (difflib's
    matching blocks over words): 1.0 for a sentence copied whole, low for a paraphrase."""
    words = _WORD_RE.findall(strip_urls(note).lower())
    if not words:
        return 0.0
    best = 0
    for passage in passages:
        matcher = SequenceMatcher(None, words, _WORD_RE.findall(passage.lower()), autojunk=False)
        best = max(best, sum(block.size for block in matcher.get_matching_blocks()))
    return best / len(words)


_WORD_RE = re.compile(r"\w+")


def correctness_baseline(*, post: str, note: str, snippets: Sequence[Evidence]) -> StepResult:
    """Lexical support check: it cannot tell "supports" from "contradicts".

    Fails when a number in the note is absent from the snippets, when the note uses an
    absolute word (always, never, proven, ...) the snippets do not use, when under half of the
    note's content words occur in the snippets, or when the note does not address the post's
    claim (`claim_coverage`): words taken from the evidence are not a correct note on this post,
    and a note that copies a passage (COPY_SHARE of its words in the passage's order) but not on
    the claim is named as such.
    """
    started = time.monotonic()
    evidence = " ".join(ev.text for ev in snippets)
    note_plain = strip_urls(note)
    ev_numbers = set(_NUMBER_RE.findall(evidence))
    ev_words = set(content_words(evidence))
    ev_stems = stems(evidence)
    problems = []
    missing_numbers = [n for n in _NUMBER_RE.findall(note_plain) if n not in ev_numbers]
    if missing_numbers:
        problems.append(f"numbers not found in the snippets: {', '.join(sorted(set(missing_numbers)))}")
    words = content_words(note_plain)
    absolutes = sorted({w for w in words if w in _ABSOLUTES and w not in ev_words})
    if absolutes:
        problems.append(f"absolute wording not used by the snippets: {', '.join(absolutes)}")
    coverage = (sum(1 for w in words if stem(w) in ev_stems) / len(words)) if words else 0.0
    if coverage < 0.5:
        problems.append(f"only {coverage:.0%} of the note's content words occur in the snippets")
    claim = claim_coverage(post, note_plain) if post.strip() else None
    copied = copied_share(note_plain, [ev.text for ev in snippets])
    if claim is not None and not claim.addressed_by_note:
        what = "copies a passage" if copied >= COPY_SHARE else "is supported"
        problems.append(f"the note {what} but does not address the post's claim: it carries {claim.explain()}")
    verdict = not problems and bool(snippets)
    reasoning = (
        f"Content-word coverage by the snippets: {coverage:.0%}; words copied from one passage: {copied:.0%}. "
        + (
            "Problems: " + "; ".join(problems) + "."
            if problems
            else "No unsupported numbers or absolute wording; on the post's claim."
        )
        + ("" if snippets else " No snippets to check against.")
    )
    return baseline_result(
        "lexical-support-v1+claim-terms-v1",
        VERSIONS["correctness"],
        verdict,
        reasoning,
        started,
        coverage=coverage,
        copied=copied,
        claim_share=claim.share if claim is not None else None,
    )


# --- Helpfulness ------------------------------------------------------------------------


def helpfulness_llm(client: LLMClient, *, post: str, note: str, urls: Sequence[str]) -> StepResult:
    return decision_step(
        client,
        task="judge_helpfulness",
        prompt_version=VERSIONS["helpfulness"],
        messages=helpfulness_prompt(post, note, urls),
    )


_CAPS_WORD = r"[A-Z][A-Z'’]*[A-Z]"
# Three or more all-capital words in a row, separated by spaces only: "THIS IS FALSE".
_SHOUTING_RE = re.compile(rf"\b{_CAPS_WORD}(?:[ \t]+{_CAPS_WORD}){{2,}}\b")


def shouting_run(text: str) -> str | None:
    """The first run of three or more capitalised words in a row, or None.

    Acronyms (SIDS, VAERS, CDC, ASRM, ACOG) stand alone or in lists ("the ASRM, ACOG and
    SMFM"), so one or many of them are not shouting; a phrase written in capitals is."""
    match = _SHOUTING_RE.search(strip_urls(text))
    return match.group(0) if match else None


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
    if OPINION_RE.search(note):
        problems.append("opinion or speculation wording")
    if HOSTILE_RE.search(note):
        problems.append("argumentative or hostile wording")
    run = shouting_run(note)
    if run:
        problems.append(f"shouting (a phrase in capitals: {run!r})")
    elif "!!" in note:
        problems.append("shouting (repeated exclamation marks)")
    verdict = not problems
    reasoning = (
        "Problems: " + "; ".join(problems) + "."
        if problems
        else "Cites a source, gives context, no opinion, hostile or shouting wording."
    )
    return baseline_result("cn-criteria-heuristic-v2", VERSIONS["helpfulness"], verdict, reasoning, started)


def helpfulness_classifier(model: HelpfulnessModel, *, post: str, note: str, urls: Sequence[str]) -> StepResult:
    """The note as the stage judges it (text without URLs, the cited URLs apart) and the post; the
    stage knows no language or classification, which the model reads as unknown."""
    # Deferred: the model's module loads numpy and the real-data reader; only a process that judges with it pays that.
    from crowdnotes_site.lib.llm.classifier import JudgedNote

    started = time.monotonic()
    proba = float(model.predict_proba([JudgedNote(strip_urls(note), tuple(urls), post)])[0])
    verdict = proba >= model.threshold
    reasoning = (
        f"Trained on the crowd's verdicts: P(helpful) = {proba:.3f} "
        f"({'>=' if verdict else '<'} {model.threshold:.2f}); {len(urls)} cited URL(s) counted."
    )
    return StepResult(
        value=verdict,
        producer=Producer("classifier", model.version),
        prompt_version=VERSIONS["helpfulness"],
        prompt="",
        raw_output=f"p_helpful={proba:.6f}",
        reasoning=reasoning,
        latency_s=time.monotonic() - started,
        extra={"p_helpful": proba},
    )
