"""Drafting a note from confirmed evidence snippets: the prompt, the LLM step (whose reply must
obey the note rules) and the extractive offline baseline. crowdnotes_site.lib.llm.drafting calls these."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence

from crowdnotes_site.lib.lexical import lexical_overlap
from crowdnotes_site.lib.llm.client import LLMClient, parse_single_line
from crowdnotes_site.lib.llm.steps.common import (
    Evidence,
    Messages,
    Similarity,
    StepResult,
    baseline_result,
    data_messages,
    evidence_items,
    llm_step,
    sentences,
)
from crowdnotes_site.lib.llm.steps.judges import ClaimCoverage, claim_coverage
from crowdnotes_site.lib.llm.steps.search import key_terms
from crowdnotes_site.lib.text_rules import find_urls, strip_urls

VERSIONS: dict[str, str] = {
    "draft": "draft-v2",
}


def draft_prompt(post: str, snippets: Sequence[Evidence], budget: int) -> Messages:
    return data_messages(
        "You write Community Notes: short, neutral context notes on social media posts.",
        {"post": post, "evidence_snippets": evidence_items(snippets)},
        "Write one note that gives readers the context they need about the claim of the post in "
        "the data.\n"
        "Rules: write in English; one single line; no URLs or links; at most "
        f"{budget} characters; specific, objective and verifiable; use only facts stated in "
        "the evidence snippets of the data, nothing else.\nReply with the note text only.",
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


# --- Sentences a note can use as they stand -----------------------------------------------------
# Passages are page text: headings run into the next sentence ("Key points - SIDS is…", "What CDC is
# doing CDC and FDA…"), sentences lean on the one before ("Also, research…"), and pages point
# elsewhere ("See the published article…") or cite papers. A draft copies sentences, so each must
# read on its own.

# A connective that ties a sentence to the one before it: dropped (the sentence itself stands).
_CONNECTIVE = re.compile(
    r"^(?:also|however|in addition|additionally|furthermore|moreover|therefore|thus|still|instead|"
    r"that said|as a result|in fact|indeed|similarly|likewise|meanwhile|otherwise|for example|for instance),\s+"
    r"|^(?:and|but|so|or|yet)\s+",
    re.IGNORECASE,
)
# Sentences that send the reader elsewhere or are page furniture, not claims.
_POINTER = re.compile(
    r"^(?:see|visit|view|learn|read more|read the|review these|click|find out|find more|get free|explore|watch|"
    r"listen|order|sign up|subscribe|share|download|for more (?:information|details)|more information|"
    r"contact us|please|print|last updated|page last|updated on|published on)\b"
    r"|\bthis (?:page|website|site|infographic|video)\b",
    re.IGNORECASE,
)
# Reference-list entries: "2018;142(1)", "pii:", "doi", "et al."
_CITATION = re.compile(r"\b\d{4};\s*\d+|\bpii:|\bdoi\b|\bet al\b|\bPMID\b", re.IGNORECASE)
# Common web section headings that open a passage.
_HEADING_WORDS = frozenset(
    "overview summary background introduction symptoms causes treatment treatments prevention diagnosis "
    "resources references highlights takeaways".split()
)
# Words that open a sentence; after a glued heading they start with a capital mid-"sentence".
_STARTERS = frozenset(
    "The A An In On At For From When While If Although Because Since After Before During Most Many Some "
    "Studies Research Researchers Scientists Experts Doctors There This These It They We You As".split()
)
_QUESTION_HEADING = frozenset("What How Why Who Where When Which".split())
_BEFORE_NAME = frozenset("of the and by from in at to for with on a an that as or".split())


def _unglue_heading(sentence: str) -> str:
    """The sentence without a section heading glued before it (up to 11 words)."""
    words = sentence.split(" ")
    if len(words) > 2 and words[0].lower() in _HEADING_WORDS and words[1][:1].isupper():
        return " ".join(words[1:])
    for i in range(1, min(12, len(words) - 1)):
        word, before = words[i], words[i - 1]
        if not word[:1].isupper() or before.endswith((",", ";", ":")) or before.lower() in _BEFORE_NAME:
            continue
        question = (
            2 <= i <= 6 and words[0] in _QUESTION_HEADING and before[:1].islower() and word.isupper() and len(word) > 1
        )  # "What CDC is doing CDC"
        starter = word in _STARTERS and before[:1].islower()  # "Steps you can take In 1992, …"
        if question or starter:
            return " ".join(words[i:])
    return sentence


def readable_sentences(text: str) -> list[str]:
    """The sentences of a passage that read on their own: bullets split, glued headings and leading
    connectives removed, pointers ("See …"), reference entries and unfinished fragments dropped."""
    out: list[str] = []
    for raw in sentences(text):
        for part in re.split(r"\s+[-•–]\s+", raw):
            sentence = _unglue_heading(part.strip(" -•–"))
            sentence = _CONNECTIVE.sub("", sentence, count=1)
            if not sentence or not sentence[0].isalnum():
                continue
            sentence = sentence[0].upper() + sentence[1:]
            if (
                len(sentence) < 20
                or len(sentence.split()) < 4
                or not sentence.endswith((".", "!", "?"))
                or _POINTER.search(sentence)
                or _CITATION.search(sentence)
                or len(_LOWER_WORD.findall(sentence)) < 3  # "Pediatr Infect Dis J.": a journal, not a sentence
                or any(_same_point(sentence, kept) for kept in out)
            ):
                continue
            out.append(sentence)
    return out


_LOWER_WORD = re.compile(r"(?<![\w’'])[a-zà-ÿ][a-zà-ÿ’'-]+")
_WORD = re.compile(r"\w+")


def _same_point(a: str, b: str) -> bool:
    """Near-duplicates (a page repeats its key point in a summary and in the text)."""
    wa, wb = set(_WORD.findall(a.lower())), set(_WORD.findall(b.lower()))
    return len(wa & wb) / max(len(wa | wb), 1) > 0.6


def draft_note_baseline(
    *,
    post: str,
    snippets: Sequence[Evidence],
    budget: int,
    similarity: Similarity | None = None,
) -> StepResult:
    """Extractive draft that answers the post's claim (judges.claim_coverage: the post's key terms
    and names). Only sentences that carry part of the claim are used: first the one that carries
    most of it, then, while the draft does not yet address the claim, the one that adds most of
    what is missing, then the others by similarity to the post, while they fit the budget. Copies
    sentences that read on their own (readable_sentences); writes nothing new.

    When the confirmed snippets' sentences, together, do not address the claim, the draft says so
    in one plain sentence instead of copying an off-point one (extra["addresses_claim"] is False)."""
    started = time.monotonic()
    terms = key_terms(post)
    scored = []
    for ev in snippets:
        for sent in readable_sentences(strip_urls(ev.text)):
            score = similarity(post, sent) if similarity else lexical_overlap(post, sent)
            claim = claim_coverage(post, sent, terms=terms)
            scored.append((claim, float(score), sent))
    # A sentence that carries none of the claim's terms or names is off-point, however similar.
    pool = [(claim, score, sent) for claim, score, sent in scored if claim.touched or claim.named]
    chosen: list[str] = []
    while pool:
        so_far = claim_coverage(post, " ".join(chosen), terms=terms)

        def gain(item: tuple[ClaimCoverage, float, str], so_far: ClaimCoverage = so_far) -> tuple[int, float]:
            claim, score, _ = item
            new = set(claim.touched) - set(so_far.touched) | set(claim.named) - set(so_far.named)
            return (0 if so_far.addressed else len(new), score)

        best = max(pool, key=gain)
        pool.remove(best)
        if len(" ".join([*chosen, best[2]])) <= budget:
            chosen.append(best[2])
    if not chosen and scored:
        best_sentence = max(scored, key=lambda x: (len(x[0].touched), x[1]))[2]
        chosen = [best_sentence[: max(budget - 1, 0)].rsplit(" ", 1)[0] + "…"]
    claim = claim_coverage(post, " ".join(chosen), terms=terms)
    name = "extractive-embedding-v3" if similarity else "extractive-lexical-v3"
    if scored and not claim.addressed:
        reasoning = (
            f"The {len(scored)} snippet sentences do not address the post's claim (the best draft carries "
            f"{claim.explain()}), so the draft says so instead of copying off-point sentences."
        )
        return baseline_result(
            name, VERSIONS["draft"], no_answer_text(terms, budget), reasoning, started, addresses_claim=False
        )
    text = " ".join(chosen) or None
    reasoning = (
        f"Extractive: {len(chosen)} of {len(scored)} snippet sentences, chosen by the part of the post's claim "
        f"they carry ({claim.explain()}), then by similarity to the post."
    )
    return baseline_result(name, VERSIONS["draft"], text, reasoning, started, addresses_claim=text is not None)


def no_answer_text(terms: Sequence[str], budget: int) -> str:
    """The offline draft when no confirmed passage addresses the claim: said plainly, naming the
    claim's key terms, within the budget."""
    named = ", ".join(f'"{t}"' for t in terms[:3])
    text = (
        f"None of the confirmed passages addresses the post's claim ({named}). Add a passage that does, "
        "or write the note yourself."
    )
    if len(text) > budget:
        text = "None of the confirmed passages addresses the post's claim."
    return text[:budget]
