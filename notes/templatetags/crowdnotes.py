from __future__ import annotations

import re
from urllib.parse import urlsplit

from django import template
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from evidence import errors
from notes.models import Note, Participant

register = template.Library()

STOPWORDS = frozenset(
    "a an and are as at be been but by can could did do does for from had has have he her his how i if in into is it "
    "its just more most no not of on or our out she so some than that the their them then there these they this to "
    "too up us was we were what when which who why will with you your".split()
)


def _terms(query: str) -> set[str]:
    return {w for w in re.findall(r"[a-z0-9]+", query.lower()) if len(w) > 2 and w not in STOPWORDS}


@register.filter
def highlight(text: str, query: str) -> SafeString:
    """Escape `text` and mark the words it shares with `query`.

    Words are matched in the raw text and each piece is escaped on its own, so a term such as
    "quot" or "amp" never matches inside an entity the escaping produced."""
    text = text or ""
    terms = _terms(query or "")
    if not terms:
        return escape(text)
    pattern = re.compile(r"\b(" + "|".join(sorted(map(re.escape, terms), key=len, reverse=True)) + r")\b", re.I)
    pieces = []
    last = 0
    for match in pattern.finditer(text):
        pieces.append(str(escape(text[last : match.start()])))
        pieces.append(f"<mark>{escape(match.group(0))}</mark>")
        last = match.end()
    pieces.append(str(escape(text[last:])))
    return mark_safe("".join(pieces))  # noqa: S308 - every piece of user text is escaped above


@register.filter
def domain(url: str) -> str:
    return urlsplit(url or "").hostname or ""


@register.filter
def error_text(code: str) -> str:
    """The contributor-facing sentence for an evidence error code (defined in evidence.errors)."""
    return errors.error_text(code)


@register.filter
def scored_count(scores: list[float | None] | None) -> int:
    """How many passages have a similarity score yet (the pre-filter leaves the others None)."""
    return sum(score is not None for score in scores or [])


@register.filter
def get_item(mapping: dict[object, object] | None, key: object) -> object:
    """mapping[key], or None (a template cannot index a dict by a variable)."""
    return (mapping or {}).get(key)


@register.filter
def can_be_rated_by(note: Note, participant: Participant | None) -> bool:
    """`Note.can_be_rated_by` for templates (a template cannot pass an argument to a method)."""
    return note.can_be_rated_by(participant)
