"""Principle filters (pure given the checkers): each returns a log entry saying why a candidate
passed or failed. Neutral language and no opinion/speculation use the LLM yes/no steps when a
client is given, else the lexicon baselines; links must come from the source notes and be well
formed (and, when `reachable` is given, fetchable through evidence/fetch.py); the text without
links must fit the 280-character budget."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from urllib.parse import urlsplit

from crowdnotes_site.lib.llm.client import LLMClient
from crowdnotes_site.lib.llm.steps import principles
from crowdnotes_site.lib.text_rules import NOTE_MAX_CHARS, find_urls, strip_urls

FILTERS = ("neutral", "no_opinion", "links_from_sources", "links_well_formed", "length")


@dataclass(frozen=True)
class FilterResult:
    filter: str
    ok: bool
    reason: str
    by: str = "rule"

    def as_log(self) -> dict[str, object]:
        return asdict(self)


def _norm(url: str) -> str:
    return url.rstrip("/").lower()


def check_links_from_sources(text: str, source_texts: Sequence[str]) -> FilterResult:
    allowed = {_norm(u) for t in source_texts for u in find_urls(t)}
    foreign = [u for u in find_urls(text) if _norm(u) not in allowed]
    if foreign:
        return FilterResult("links_from_sources", False, "Link not in the source notes: " + ", ".join(foreign))
    return FilterResult("links_from_sources", True, "Every link appears in a source note.")


def well_formed(url: str) -> bool:
    parts = urlsplit(url)
    host = parts.hostname or ""
    return parts.scheme in ("http", "https") and "." in host and " " not in url and not host.startswith(".")


def check_links_well_formed(text: str, reachable: Callable[[str], str | None] | None = None) -> FilterResult:
    """`reachable(url)` answers None when the URL could be fetched, else the reason."""
    for url in find_urls(text):
        if not well_formed(url):
            return FilterResult("links_well_formed", False, f"Malformed link: {url}")
        if reachable is not None:
            problem = reachable(url)
            if problem:
                return FilterResult("links_well_formed", False, f"Link not reachable ({problem}): {url}")
    suffix = " and reachable" if reachable is not None else ""
    return FilterResult("links_well_formed", True, f"Every link is well formed{suffix}.")


def check_length(text: str, budget: int = NOTE_MAX_CHARS) -> FilterResult:
    n = len(strip_urls(text))
    if n > budget:
        return FilterResult("length", False, f"{n} characters without links (limit {budget}).")
    return FilterResult("length", True, f"{n} characters without links (limit {budget}).")


def check_principle(text: str, principle: str, client: LLMClient | None) -> FilterResult:
    if client is not None:
        step = principles.principle_check_llm(client, text=text, principle=principle)
    else:
        step = principles.principle_check_baseline(text=text, principle=principle)
    if step.value is None:
        return FilterResult(principle, False, "No parsable answer: " + (step.error or step.raw_output)[:200],
                            step.producer.label)  # fmt: skip
    reason = (step.reasoning or step.raw_output or "").strip()[:300] or ("yes" if step.value else "no")
    return FilterResult(principle, bool(step.value), reason, step.producer.label)


def run_filters(
    text: str,
    source_texts: Sequence[str],
    *,
    client: LLMClient | None = None,
    reachable: Callable[[str], str | None] | None = None,
    budget: int = NOTE_MAX_CHARS,
) -> list[FilterResult]:
    """Every filter, cheapest first; the LLM checks only run on a candidate the rules passed."""
    results = [
        check_length(text, budget),
        check_links_from_sources(text, source_texts),
        check_links_well_formed(text, reachable),
    ]
    if all(r.ok for r in results):
        results += [check_principle(text, "neutral", client), check_principle(text, "no_opinion", client)]
    return results
