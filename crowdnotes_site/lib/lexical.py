"""Word-level overlap between a query (a post) and texts: content words, a crude stem, and two
overlap scores (pure: no Django, no model).

Used by the offline baselines (drafting, judges, search, comparison) and by the evidence matcher,
which adds the IDF-weighted share to a sentence's cosine so the sentence that carries the post's
specific words and numbers beats one that only repeats its topic.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from crowdnotes_site.lib.text_rules import strip_urls

STOPWORDS = frozenset(
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


def content_words(text: str, *, short_numbers: bool = False) -> list[str]:
    """Lower-cased words of three or more characters, stopwords and URLs removed; with
    short_numbers, numbers of one or two digits too (the "2" of "type 2 diabetes")."""
    words = _WORD_RE.findall(strip_urls(text).lower())
    return [w for w in words if (len(w) > 2 or (short_numbers and w.isdigit())) and w not in STOPWORDS]


def stem(word: str) -> str:
    # Crude prefix stem so "vaccines"/"vaccinated" meet; enough for an overlap heuristic.
    return word[:6]


def stems(text: str, *, short_numbers: bool = False) -> set[str]:
    return {stem(w) for w in content_words(text, short_numbers=short_numbers)}


def lexical_overlap(query: str, text: str) -> float:
    """Share of the query's content-word stems that occur in `text` (0..1)."""
    q = stems(query)
    if not q:
        return 0.0
    return len(q & stems(text)) / len(q)


def term_coverage(terms: Sequence[str], text: str) -> float:
    """Share of the terms (key terms of a claim: "type 2 diabetes", "nsw hospitals") that `text`
    contains whole: every content-word stem and number of the term occurs somewhere in it (0..1).
    A term without content words does not count."""
    found = stems(text, short_numbers=True)
    wanted = [t for t in (stems(term, short_numbers=True) for term in terms) if t]
    if not wanted:
        return 0.0
    return sum(term <= found for term in wanted) / len(wanted)


def _singular_stems(text: str) -> set[str]:
    # The crude stem keeps a plural "s" of a short word ("duvets" vs "duvet"): drop it first.
    words = content_words(text, short_numbers=True)
    return {stem(w[:-1] if len(w) > 3 and w.endswith("s") and not w.endswith("ss") else w) for w in words}


def terms_touched(terms: Sequence[str], text: str) -> list[str]:
    """The terms of which `text` contains at least one content word or number, singular or plural:
    "feather duvets" is touched by "feather bedding" and by "duvet". A claim check counts these (a
    passage rarely repeats a claim's phrases whole); `term_coverage` asks for whole terms."""
    found = _singular_stems(text)
    return [term for term in terms if _singular_stems(term) & found]


def idf_overlap(query: str, texts: Sequence[str]) -> list[float]:
    """Per text, the IDF-weighted share of the query's stems it contains (0..1), the IDF taken over
    `texts` themselves: a word that every text repeats (the page's topic) counts for little, a
    specific word or number the post and one sentence share counts for much."""
    q = stems(query, short_numbers=True)
    found = [stems(text, short_numbers=True) & q for text in texts]
    if not q or not texts:
        return [0.0] * len(texts)
    n = len(texts)
    idf = {w: math.log((n + 1) / (sum(1 for f in found if w in f) + 0.5)) for w in q}
    total = sum(idf.values())
    return [sum(idf[w] for w in f) / total if total > 0 else 0.0 for f in found]
