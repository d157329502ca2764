"""Community Notes text rules: the 280-character length rule and judging truncation.

Pure functions (no Django), shared by drafting, the contributor flow and the judges.
Rule: a note may hold at most 280 characters, where every URL counts as one character.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

NOTE_MAX_CHARS = 280

# Schemes and bare "www." hosts; stops at whitespace. Trailing sentence punctuation is
# not part of the URL ("see https://x.org." ends with a full stop).
URL_RE = re.compile(r"(?:https?://|www\.)[^\s<>\"']+", re.IGNORECASE)
TRAILING_PUNCTUATION = ".,;:!?)]}'\""


def _url_matches(text: str, web_only: bool) -> Iterator[re.Match[str]]:
    for match in URL_RE.finditer(text):
        # A bare "www." host counts as a URL for the length rule, but is no usable link.
        if not web_only or match.group(0).lower().startswith(("http://", "https://")):
            yield match


def find_urls(text: str, *, web_only: bool = False) -> list[str]:
    """URLs found in `text`, in order, without trailing sentence punctuation.

    `web_only`: only http(s) links (what can be stored as a note's evidence link)."""
    return [m.group(0).rstrip(TRAILING_PUNCTUATION) for m in _url_matches(text, web_only)]


def strip_urls(text: str, *, web_only: bool = False) -> str:
    """`text` with its URLs (only http(s) ones if `web_only`) removed and whitespace collapsed."""
    out = []
    last = 0
    for match in _url_matches(text, web_only):
        url = match.group(0)
        kept = url.rstrip(TRAILING_PUNCTUATION)
        out.append(text[last : match.start()])
        out.append(url[len(kept) :])  # keep the punctuation that followed the URL
        last = match.end()
    out.append(text[last:])
    return " ".join("".join(out).split())


def note_length(text: str, urls: Sequence[str] = ()) -> int:
    """Length under the Community Notes rule: each URL in `text` or `urls` counts as 1.

    `urls` are URLs appended after the text (evidence links); URLs already present in
    the text are counted once.
    """
    inline = find_urls(text)
    length = len(text)
    for match in URL_RE.finditer(text):
        url = match.group(0).rstrip(TRAILING_PUNCTUATION)
        length -= len(url) - 1
    extra = [u for u in _dedupe(urls) if u not in inline]
    return length + len(extra)


def fits_length(text: str, urls: Sequence[str] = (), limit: int = NOTE_MAX_CHARS) -> bool:
    return note_length(text, urls) <= limit


@dataclass(frozen=True)
class JudgedText:
    """The note as the helpfulness judge sees it."""

    text: str
    urls: tuple[str, ...]
    truncated: bool


def truncate_for_helpfulness(text: str, urls: Sequence[str] = (), limit: int = NOTE_MAX_CHARS) -> JudgedText:
    """Note text without URLs, cut so that text + URLs fits `limit` (URLs count 1 each).

    The URLs are the union of those attached to the note and those written in its text.
    """
    all_urls = tuple(_dedupe([*find_urls(text), *urls]))
    plain = strip_urls(text)
    budget = max(limit - len(all_urls), 0)
    if len(plain) <= budget:
        return JudgedText(text=plain, urls=all_urls, truncated=False)
    return JudgedText(text=plain[:budget].rstrip(), urls=all_urls, truncated=True)


def _dedupe(items: Sequence[str]) -> list[str]:
    seen: set[str] = set()
    out = []
    for item in items:
        if item and item not in seen:
            seen.add(item)
            out.append(item)
    return out


def is_blank(text: str) -> bool:
    """True when `text` holds nothing a reader can see: only whitespace and Unicode format
    characters (category Cf: zero-width spaces and joiners, bidi controls, the BOM, soft hyphens)."""
    return all(ch.isspace() or unicodedata.category(ch) == "Cf" for ch in text)
