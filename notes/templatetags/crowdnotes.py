from __future__ import annotations

import re
from urllib.parse import urlsplit

import nh3
from django import template
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

register = template.Library()

STOPWORDS = frozenset(
    "a an and are as at be been but by can could did do does for from had has have he her his how i if in into is it "
    "its just more most no not of on or our out she so some than that the their them then there these they this to "
    "too up us was we were what when which who why will with you your".split()
)

ERROR_MESSAGES = {
    "blocked_address": "This address points to a private or local network, which CrowdNotes never fetches.",
    "bad_scheme": "Only http:// and https:// links can be used as evidence.",
    "bad_port": "This link uses a port that CrowdNotes does not fetch.",
    "bad_url": "This link is not a valid web address.",
    "dns_error": "The site's name could not be found.",
    "connection_error": "The site could not be reached.",
    "timeout": "The site took too long to answer.",
    "too_large": "The page is too large to fetch.",
    "too_many_redirects": "The link redirects too many times.",
    "http_error": "The site answered with an error instead of the page.",
    "unsupported_type": "This link is not a web page, plain text or PDF.",
    "empty_text": "No readable main text was found on this page.",
    "block_page": "The site showed a block, consent or captcha page instead of its content.",
    "internal_error": "Something went wrong on our side while processing this source.",
}


def _terms(query: str) -> set[str]:
    return {w for w in re.findall(r"[a-z0-9]+", query.lower()) if len(w) > 2 and w not in STOPWORDS}


@register.filter
def highlight(text: str, query: str) -> SafeString:
    """Escape `text` and mark the words it shares with `query`; only <mark> survives sanitizing."""
    terms = _terms(query or "")
    escaped = str(escape(text or ""))
    if terms:
        pattern = re.compile(r"\b(" + "|".join(sorted(map(re.escape, terms), key=len, reverse=True)) + r")\b", re.I)
        escaped = pattern.sub(r"<mark>\1</mark>", escaped)
    return mark_safe(nh3.clean(escaped, tags={"mark"}, attributes={}))  # noqa: S308 - sanitized just above


@register.filter
def domain(url: str) -> str:
    return urlsplit(url or "").hostname or ""


@register.filter
def error_text(code: str) -> str:
    return ERROR_MESSAGES.get(code or "", "This source could not be used.")


@register.filter
def scored_count(scores: list[float | None] | None) -> int:
    """How many passages have a similarity score yet (the pre-filter leaves the others None)."""
    return sum(score is not None for score in scores or [])
