"""Automation's search steps, each with its prompt, LLM step and offline baseline:

- search queries for a post (`search_queries_*`): semantically diverse, near-duplicates dropped,
- the most useful search result of a pool (`pick_most_useful_*`, one utility round),
- the category of an unknown source domain (`source_category_llm`; the rules of
  crowdnotes_site.lib.categories are its baseline).

The flow that calls them is evidence.search.flow. Pure: similarity functions are passed in.
"""

from __future__ import annotations

import itertools
import re
import time
from collections.abc import Callable, Sequence

from crowdnotes_site.lib.lexical import content_words, lexical_overlap
from crowdnotes_site.lib.llm.client import LLMClient, answer_lines, parse_lines, parse_number_only
from crowdnotes_site.lib.llm.steps.common import (
    Messages,
    Similarity,
    StepResult,
    baseline_result,
    data_messages,
    llm_step,
    sentences,
)
from crowdnotes_site.lib.text_rules import strip_urls

# The offline query baseline's name, kept with every run (v4: no one-word queries).
BASELINE_QUERIES = "key-terms-v4"

VERSIONS: dict[str, str] = {
    "search_queries": "search-queries-v3",
    "pick_useful": "pick-useful-v3",
    "source_category": "source-category-v2",
}


def search_queries_prompt(post: str, n: int) -> Messages:
    return data_messages(
        "You plan web searches for fact-checking social media posts.",
        {"post": post},
        f"Write {n} search queries that would find reliable sources to "
        "check the claim of the post in the data. Make them semantically diverse: each one should look at the "
        "claim from a different angle (the claim itself, the underlying science, official "
        f"guidance, the origin of the claim).\nReply with exactly {n} lines, one query per "
        "line, nothing else.",
    )


def pick_useful_prompt(post: str, candidates: Sequence[tuple[str, str, str]]) -> Messages:
    results = [
        {"index": i, "title": title, "snippet": snippet, "url": url}
        for i, (title, snippet, url) in enumerate(candidates)
    ]
    return data_messages(
        "You select evidence for fact-checking notes.",
        {"post": post, "search_results": results},
        "Which single search result of the data is the most useful: relevant to the post's topic, adding "
        "background or clarification, and reliable enough to retrieve?\n"
        "Reply with one short sentence saying why, then a last line that is exactly "
        f'"Index: N" where N is its index number (0 to {len(candidates) - 1}). Only that last line counts.',
    )


_INDEX_LINE = re.compile(r"^\W*index\W*[:=]?\s*\[?(-?\d+)\]?\W*$", re.IGNORECASE)


def parse_pick(text: str, n: int) -> int | None:
    """The index on the answer's last non-empty line ("Index: N"), or the integer of an answer
    that is one line holding nothing else of the kind ("3", "**[3]**"); None when it is missing,
    ambiguous or outside 0..n-1 (never a guess, never an "Index" line found earlier, e.g. in
    quoted data)."""
    lines = answer_lines(text)
    if not lines:
        return None
    match = _INDEX_LINE.match(lines[-1].strip())
    if match:
        value = int(match.group(1))
        return value if 0 <= value < n else None
    return parse_number_only(text, lo=0, hi=n - 1)


def pick_reasoning(text: str) -> str:
    """The answer without its last "Index: N" line."""
    lines = answer_lines(text)
    if lines and _INDEX_LINE.match(lines[-1].strip()):
        lines.pop()
    return "\n".join(lines).strip()


# --- Search queries ---------------------------------------------------------------------


def search_queries_llm(client: LLMClient, *, post: str, n: int, temperature: float = 0.7) -> StepResult:
    return llm_step(
        client,
        task="search_queries",
        prompt_version=VERSIONS["search_queries"],
        messages=search_queries_prompt(post, n),
        parse=lambda t: parse_queries(t, n),
        temperature=temperature,
    )


def parse_queries(text: str, n: int) -> list[str] | None:
    """Up to n queries, one per line; a heading line ("Here are the queries:") is not a query.
    None when no line is left."""
    lines = [q[:300] for q in parse_lines(text) if not q.endswith(":")]
    return lines[:n] or None


_HASHTAG = re.compile(r"[#@](\w+)")
_NOT_WORDS = re.compile(r"[^\w\s'’-]+", re.UNICODE)


# Words that carry the post's tone or grammar, not its subject: never a query's entity.
_HYPE = frozenset(
    "breaking shocking wow omg urgent share everyone truth exposed proof proves shows show says said "
    "cures cure causes cause means taking take makes make gets get tell told won't don't never always".split()
)


def _keyphrases(text: str, *, n: int = 3, top: int = 8) -> list[str]:
    import yake

    extractor = yake.KeywordExtractor(lan="en", n=n, top=top, dedupLim=0.7)
    phrases = [
        " ".join(w for w in phrase.lower().split() if w not in _HYPE) for phrase, _ in extractor.extract_keywords(text)
    ]
    return list(dict.fromkeys(p for p in phrases if any(ch.isalnum() for ch in p)))


def _claim(text: str, max_words: int = 16) -> str:
    first = (sentences(text) or [text])[0]
    words = _NOT_WORDS.sub(" ", first).split()[:max_words]
    return " ".join(words).strip(" -'’")


def _words(text: str) -> set[str]:
    return set(content_words(text))


def drop_near_duplicates(
    queries: Sequence[str], *, similarity: Similarity | None = None, threshold: float = 0.9
) -> tuple[list[str], list[str]]:
    """Keep the first of every group of near-identical queries: embedding cosine >= threshold
    (or, without embeddings, the same content words). Returns (kept, dropped)."""
    kept: list[str] = []
    dropped: list[str] = []
    prime = getattr(similarity, "prime", None)
    if prime is not None:
        prime(list(queries))
    for query in queries:
        if not query.strip():
            continue
        same = any(
            query.lower() == other.lower()
            or (similarity(query, other) >= threshold if similarity else _words(query) == _words(other))
            for other in kept
        )
        (dropped if same else kept).append(query)
    return kept, dropped


# Words that end a key term: grammar, hedges and the post's tone. What is left between them are
# the claim's subjects ("intermittent fasting", "type 2 diabetes", "covid 19").
_BREAK = frozenset(
    (
        "a about above after again against all almost also am an and any are as at be because been before being "
        "below between both but by can cannot could did do does doing don done down during each even ever every "
        "few for from further had has have having he her here hers him his how i if in into is it its itself just "
        "let like may me might more most much must my never no nor not now of off on once only or other ought our "
        "out over own same shall she should since so some such than that the their them then there these they "
        "this those through to too under until up upon us very via was we were what when where whether which "
        "while who whom whose why will with within without would yet you your yours one's really actually "
        "literally totally completely simply still already instead there's it's that's isn't aren't doesn't "
        "didn't can't won't wouldn't shouldn't couldn't i'm you're they're we're"
    ).split()
)
# Words that are never the subject of a health claim on their own: who says it, when, vague nouns.
_GENERIC = frozenset(
    (
        "people person everyone anyone someone nobody doctors doctor experts expert scientists scientist "
        "researchers study studies research government media news fact facts thing things way ways lot lots "
        "time times day days week weeks month months year years today now new old big huge tiny know knew "
        "want wants need needs tell tells told say says said think believe see look hide hiding hidden secret "
        "truth real proof proves proven prove true false fake right wrong good bad best worst better worse "
        "amazing incredible miracle instantly immediately quickly fast forever"
    ).split()
)
# The verbs of health claims (what the subject does), so "vaccines contain 5g" gives two terms.
_CLAIM_VERBS = frozenset(
    (
        "contain contains containing cause causes causing caused prevent prevents preventing prevented reduce "
        "reduces reducing lower lowers lowering raise raises raising increase increases increasing boost boosts "
        "boosting burn burns kill kills killing treat treats treating reverse reverses reversing stop stops "
        "protect protects protecting block blocks blocking work works help helps helping lead leads linked "
        "tied associated spread spreads damage damages harm harms destroy destroys weaken weakens strengthen "
        "strengthens improve improves fight fights heal heals remove removes flush flushes alter alters change "
        "changes melt melts wear wears wearing use uses using avoid avoids give gives giving put puts placed "
        "skip skipping eat eats drink drinks breathe breathes become becomes turn turns beat beats dissolve "
        "dissolves shrink shrinks rewrite rewrites infect infects poison poisons"
    ).split()
)
_NUMBER_WORDS = frozenset("one two three four five six seven eight nine ten hundred thousand million billion".split())
_TOKEN = re.compile(r"[\w][\w'’-]*", re.UNICODE)
_CLAUSE = re.compile(r"[.,;:!?()\[\]\"“”…]|\s[-–—]\s")


def _is_number(word: str) -> bool:
    return word.isdigit() or word in _NUMBER_WORDS


def key_terms(text: str, *, limit: int = 4) -> list[str]:
    """The claim's key terms, most important first: runs of words between grammar and tone words,
    so noun phrases and the numbers inside them stay whole ("type 2 diabetes", "covid 19", "5g");
    a run of numbers and vague words only ("two weeks", "doctors") is not a key term. Ranked by
    YAKE's keyword scores (the best-scored word of each run), then by position."""
    text = _HASHTAG.sub(r"; \1 ;", strip_urls(text)).strip()  # a hashtag is a term of its own
    runs: list[list[str]] = []
    for clause in _CLAUSE.split(text):
        run: list[str] = []
        for token in _TOKEN.findall(clause):
            word = token.lower().strip("'’-").replace("’", "'")
            if not word or word in _BREAK or word in _HYPE or word in _CLAIM_VERBS:
                if run:
                    runs.append(run)
                run = []
                continue
            run.append(word)
        if run:
            runs.append(run)
    terms: list[str] = []
    for run in runs:
        while run and (run[0] in _GENERIC or (len(run[0]) == 1 and not run[0].isdigit())):
            run = run[1:]
        while run and run[-1] in _GENERIC:
            run = run[:-1]
        if not run or all(_is_number(w) or w in _GENERIC for w in run):
            continue
        terms.append(" ".join(run[:4]))
    terms = list(dict.fromkeys(terms))
    if len(terms) > 1:
        scores = _word_scores(text)
        position = {term: i for i, term in enumerate(terms)}

        def rank(term: str) -> tuple[float, int]:
            words = [w for w in term.split() if not _is_number(w)]
            return (min((scores.get(w, 1.0) for w in words), default=1.0), position[term])

        terms.sort(key=rank)
    return terms[:limit]


def _word_scores(text: str) -> dict[str, float]:
    """YAKE's score of each single word of the text (lower is more important)."""
    import yake

    extractor = yake.KeywordExtractor(lan="en", n=1, top=40, dedupLim=1.0)
    return {word.lower(): float(score) for word, score in extractor.extract_keywords(text)}


def quoted(term: str) -> str:
    """A key term as a search phrase: multi-word terms in double quotes (kept together)."""
    return f'"{term}"' if " " in term else term


def key_term_queries(terms: Sequence[str], n: int) -> list[str]:
    """Phrases of the claim, never a lone word (search requires every term of a query, and one
    word such as "weight" matches any page on the topic): the first three key terms together, then
    each term of several words alone ("type 2 diabetes"), then the terms two by two, so a source
    that addresses part of the claim is still found and one badly chosen strongest term ("wives
    tale", "fine") cannot sink every query (bench/README.md, "Find evidence for me")."""
    if not terms:
        return []
    groups: list[Sequence[str]] = [terms[:3]]
    groups += [[term] for term in terms if " " in term]
    groups += [list(pair) for pair in itertools.combinations(terms[:4], 2)]
    queries = [" ".join(quoted(t) for t in group) for group in groups if sum(len(t.split()) for t in group) >= 2]
    return list(dict.fromkeys(queries))[:n]


def _claim_terms(post: str) -> list[str]:
    """The claim's key terms, with enough words for a phrase: a lone one-word term ("weight") gets
    the claim's next content words beside it ("weight tea detox")."""
    terms = key_terms(post)
    if sum(len(t.split()) for t in terms) >= 2:
        return terms
    words = content_words(_HASHTAG.sub(r"\1", strip_urls(post)))
    extra = [w for w in dict.fromkeys(words) if w not in " ".join(terms).split()]
    return [" ".join([*terms, *extra][:3])] if terms or extra else []


def search_queries_baseline(*, post: str, n: int, similarity: Similarity | None = None) -> StepResult:
    """Queries without an LLM, from the claim's key terms (`key_terms`: noun phrases and numbers
    kept whole, quoted when they have several words), each query a phrase of 2-4 of them
    (`key_term_queries`). The search requires every term of a query, so each query is precise and
    together they still find a source that addresses only part of the claim."""
    started = time.monotonic()
    terms = _claim_terms(post)
    if not terms:
        return baseline_result(BASELINE_QUERIES, VERSIONS["search_queries"], None, "No words.", started)
    # A post of one word has no phrase to offer: that word is the query.
    queries, dropped = drop_near_duplicates(key_term_queries(terms, n) or terms[:1], similarity=None)
    reasoning = (
        f"Key terms of the claim: {'; '.join(terms)}. Queries: the first three together, each term of several "
        "words alone, then the terms two by two."
    )
    return baseline_result(
        BASELINE_QUERIES, VERSIONS["search_queries"], queries[:n] or None, reasoning, started, dropped=dropped
    )


# --- Pick the most useful search result -------------------------------------------------


def pick_most_useful_llm(client: LLMClient, *, post: str, candidates: Sequence[tuple[str, str, str]]) -> StepResult:
    """candidates: (title, snippet, url). value: the chosen index, or None (unparseable or out of range)."""
    return llm_step(
        client,
        task="pick_useful",
        prompt_version=VERSIONS["pick_useful"],
        messages=pick_useful_prompt(post, candidates),
        parse=lambda t: parse_pick(t, len(candidates)),
    )


def pick_most_useful_baseline(
    *,
    post: str,
    candidates: Sequence[tuple[str, str, str]],
    similarity: Similarity | None = None,
    priors: Sequence[tuple[str, float]] | None = None,
    prior_weight: float = 0.0,
    relevance: Sequence[float] | None = None,
    coverage: Sequence[float] | None = None,
    coverage_weight: float = 0.0,
) -> StepResult:
    """Relevance to the post plus prior_weight x the source-reliability prior of each candidate's
    category (priors: one (category, prior) per candidate). Relevance is the given one (the
    cosine of the post with each document's best passage, when the flow screened them), else
    title + snippet (embedding cosine, else word overlap). With `coverage` (the share of the
    claim's key terms each document contains) it adds coverage_weight x that share. The reasoning
    shows every term."""
    started = time.monotonic()
    weighs_terms = relevance is not None and coverage is not None and bool(coverage_weight)
    if weighs_terms:
        name = "passage-relevance+key-terms+prior-v3"
    elif relevance is not None:
        name = "passage-relevance+prior-v2"
    else:
        name = "embedding-relevance+prior-v1" if similarity else "lexical-relevance+prior-v1"
    if not candidates:
        return baseline_result(name, VERSIONS["pick_useful"], None, "No candidates.", started)
    if relevance is None:
        relevance = [
            float(similarity(post, f"{t}. {s}")) if similarity else lexical_overlap(post, f"{t} {s}")
            for t, s, _ in candidates
        ]
    prior = [p for _, p in priors] if priors else [0.0] * len(candidates)
    terms = list(coverage) if weighs_terms and coverage is not None else [0.0] * len(candidates)
    scores = [r + coverage_weight * t + prior_weight * p for r, t, p in zip(relevance, terms, prior, strict=True)]
    best = max(range(len(candidates)), key=lambda i: (scores[i], -i))
    category = priors[best][0] if priors else ""
    what = "Best passage's relevance" if name.startswith("passage") else "Relevance"
    term_part = f" + {coverage_weight:g} × share of the claim's key terms {terms[best]:.2f}" if weighs_terms else ""
    reasoning = (
        f"{what} to the post {relevance[best]:.3f}{term_part} + {prior_weight:g} × reliability prior "
        f"{prior[best]:.2f}{f' ({category})' if category else ''} = {scores[best]:.3f}, the highest of "
        f"{len(candidates)} candidates."
    )
    return baseline_result(name, VERSIONS["pick_useful"], best, reasoning, started, scores=scores)


# --- Source category of an unknown domain ------------------------------------------------


def source_category_prompt(domain: str, title: str, labels: Sequence[tuple[str, str]]) -> Messages:
    options = "\n".join(f"{i}. {label}" for i, (_, label) in enumerate(labels, start=1))
    return data_messages(
        "You classify the publishers of web pages.",
        {"domain": domain, "page_title": title.strip()[:200]},
        f"Categories:\n{options}\n\n"
        "Which category describes the publisher of the domain in the data best? Reply with the "
        "category number only.",
    )


def source_category_llm(client: LLMClient, *, domain: str, title: str, labels: Sequence[tuple[str, str]]) -> StepResult:
    """labels: (value, label) pairs. value: the chosen category value, or None."""

    def parse(answer: str) -> str | None:
        idx = parse_number_only(answer, lo=1, hi=len(labels))
        return labels[idx - 1][0] if idx is not None else None

    return llm_step(
        client,
        task="source_category",
        prompt_version=VERSIONS["source_category"],
        messages=source_category_prompt(domain, title, labels),
        parse=parse,
    )


QueryWriter = Callable[[str, int], StepResult]
