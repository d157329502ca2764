"""What raters react to in a note, as numbers (pure: no Django, no torch): the PHM's inputs beside
the text embedding, in named groups so that each group can be measured by ablation.

Groups (`GROUPS`):
- sources: URL count, distinct registered domains, the source categories the evidence app assigns
  (`crowdnotes_site.lib.categories.category_by_rules`), links to a social-media post, links to a
  search-results page;
- text: length (characters without the links, words) and specificity (numbers, percentages,
  dates, named entities by a capital-letter rule), the share of common English words (low for a
  note in another language);
- classification: the writer's classification (misleading or not) and stated reasons (the public
  notes file's 0/1 columns, and believable / harmful / validation difficulty);
- writer: the writer's record, computed by the caller from training data only (`WriterRecord`).

A note without a field (a Supernote candidate has no stated reasons, no writer) gets zeros and
the group's "known" flag at 0, so the model can tell "absent" from "no".
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import numpy as np

from crowdnotes_site.lib import categories
from crowdnotes_site.lib.text_rules import find_urls, strip_urls

MISLEADING = "MISINFORMED_OR_POTENTIALLY_MISLEADING"

# The public notes file's reason columns (0/1), in the 2021 layout.
REASON_COLUMNS = (
    "misleadingOther", "misleadingFactualError", "misleadingManipulatedMedia", "misleadingOutdatedInformation",
    "misleadingMissingImportantContext", "misleadingUnverifiedClaimAsFact", "misleadingSatire",
    "notMisleadingOther", "notMisleadingFactuallyCorrect", "notMisleadingOutdatedButNotWhenWritten",
    "notMisleadingClearlySatire", "notMisleadingPersonalOpinion", "trustworthySources",
)  # fmt: skip
# Ordinal answers of the 2021 layout (empty: not asked or not answered).
ORDINALS: dict[str, dict[str, float]] = {
    "believable": {"BELIEVABLE_BY_FEW": 0.0, "BELIEVABLE_BY_MANY": 1.0},
    "harmful": {"LITTLE_HARM": 0.0, "CONSIDERABLE_HARM": 1.0},
    "validationDifficulty": {"EASY": 0.0, "CHALLENGING": 1.0},
}

CATEGORY_NAMES = tuple(categories.CATEGORY_LABELS)

SOURCES = ("n_urls", "n_domains", *(f"cat_{c}" for c in CATEGORY_NAMES), "n_social_posts", "n_search_pages")
TEXT = ("log_chars", "log_words", "n_numbers", "n_percent", "n_dates", "n_entities", "english_share")
CLASSIFICATION = (
    "reasons_known", "misleading", *(f"reason_{c}" for c in REASON_COLUMNS), *(f"ord_{k}" for k in ORDINALS),
)  # fmt: skip
WRITER = ("writer_known", "writer_log_notes", "writer_mean_intercept", "writer_helpful_share")

GROUPS: dict[str, tuple[str, ...]] = {"sources": SOURCES, "text": TEXT, "classification": CLASSIFICATION,
                                      "writer": WRITER}  # fmt: skip


@dataclass(frozen=True)
class WriterRecord:
    """The writer's earlier notes as the training data saw them: how many, their mean intercept
    (shrunk towards 0 by `prior` pseudo-notes) and the share that reached 0.40."""

    notes: int
    mean_intercept: float
    helpful_share: float


@dataclass(frozen=True)
class NoteInput:
    """One note as the feature extractor sees it. `reasons`: the notes file's reason columns and
    ordinal answers by name (None: not known, e.g. a Supernote candidate); `links`: links stored
    apart from the text (they are counted with the text's own)."""

    text: str
    classification: str = MISLEADING
    reasons: Mapping[str, str] | None = None
    writer: WriterRecord | None = None
    links: Sequence[str] = field(default_factory=tuple)


# --- sources ----------------------------------------------------------------------------------

_SOCIAL_POST = re.compile(
    r"^(?:(?:www\.|mobile\.|m\.)?(?:twitter|x)\.com/[^/]+/status(?:es)?/\d+"
    r"|(?:www\.|m\.)?facebook\.com/.+/(?:posts|videos|photos)/"
    r"|(?:www\.)?instagram\.com/(?:p|reel)/"
    r"|(?:www\.|m\.)?youtube\.com/watch|youtu\.be/"
    r"|(?:www\.)?tiktok\.com/@[^/]+/video/"
    r"|(?:www\.)?reddit\.com/r/[^/]+/comments/)",
    re.IGNORECASE,
)
_SEARCH_HOSTS = re.compile(r"^(?:www\.|mobile\.|m\.)?(?:google\.[a-z.]+|bing\.com|duckduckgo\.com|search\.yahoo\.com"
                           r"|twitter\.com|x\.com|youtube\.com|facebook\.com)$", re.IGNORECASE)  # fmt: skip


def _split(url: str) -> tuple[str, str, str]:
    try:
        parts = urlsplit(url if "://" in url else f"https://{url}")
    except ValueError:
        return "", "", ""
    return (parts.hostname or "").lower(), parts.path or "", parts.query or ""


def is_social_post(url: str) -> bool:
    """A link to one post on a social network (a tweet, a Facebook post, a YouTube video...)."""
    host, path, _ = _split(url)
    return bool(host) and bool(_SOCIAL_POST.match(host + path))


def is_search_page(url: str) -> bool:
    """A link to a page of search results (Google, Bing, DuckDuckGo, X/Twitter or YouTube search)
    rather than to a source."""
    host, path, query = _split(url)
    if not host or not _SEARCH_HOSTS.match(host):
        return False
    return path.rstrip("/") in ("/search", "/results", "/html") or (path.rstrip("/") == "" and "q=" in query)


def note_links(note: NoteInput) -> list[str]:
    """The note's distinct links: those in its text, then those stored apart, in order."""
    seen: dict[str, None] = {}
    for url in [*find_urls(note.text), *note.links]:
        seen.setdefault(url, None)
    return list(seen)


def source_features(links: Sequence[str]) -> dict[str, float]:
    out = {name: 0.0 for name in SOURCES}
    domains = set()
    for url in links:
        decision = categories.category_by_rules(url if "://" in url else f"https://{url}")
        if decision.domain:
            domains.add(decision.domain)
        out[f"cat_{decision.category}"] += 1.0
        out["n_social_posts"] += is_social_post(url)
        out["n_search_pages"] += is_search_page(url)
    out["n_urls"] = float(len(links))
    out["n_domains"] = float(len(domains))
    return out


# --- text -------------------------------------------------------------------------------------

_NUMBER = re.compile(r"(?<![\w.-])\d[\d,.]*\b")
_PERCENT = re.compile(r"\d\s?(?:%|percent\b|per cent\b)", re.IGNORECASE)
_MONTHS = ("january|february|march|april|may|june|july|august|september|october|november|december"
           "|jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec")  # fmt: skip
_DATE = re.compile(
    rf"\b(?:(?:{_MONTHS})\.?\s+\d{{1,2}}(?:st|nd|rd|th)?(?:,?\s+(?:19|20)\d\d)?|\d{{1,2}}\s+(?:{_MONTHS})\b"
    r"|(?:19|20)\d\d\b|\d{1,2}/\d{1,2}/\d{2,4})",
    re.IGNORECASE,
)
_WORD = re.compile(r"[^\W\d_][\w'’-]*", re.UNICODE)
_SENTENCE_END = re.compile(r"[.!?:]$")
# The most common English words: their share of a note's words is near 0 for another language.
ENGLISH = frozenset(
    "the a an and or but of to in on at for with by from as is are was were be been it its this that these those "
    "not no there their they he she his her we you i has have had do does did will would can could should may "
    "about than more most also only any all if so what which who when".split()
)


def entity_count(text: str) -> int:
    """Named entities by a simple rule: runs of capitalised words that do not open a sentence,
    plus acronyms (CDC, WHO) anywhere; a run of words ("Anthony Fauci") counts once."""
    tokens = text.split()
    count, in_run, sentence_start = 0, False, True
    for token in tokens:
        word = _WORD.search(token)
        if word is None:
            in_run = False
            sentence_start = bool(_SENTENCE_END.search(token)) or sentence_start
            continue
        w = word.group(0)
        acronym = len(w) >= 2 and w.isupper() and w.isalpha()
        capital = w[:1].isupper() and not sentence_start
        if acronym or capital:
            count += 0 if in_run else 1
            in_run = True
        else:
            in_run = False
        sentence_start = bool(_SENTENCE_END.search(token))
    return count


def text_features(text: str) -> dict[str, float]:
    prose = strip_urls(text)
    words = _WORD.findall(prose)
    english = sum(w.lower() in ENGLISH for w in words)
    return {
        "log_chars": math.log1p(len(prose)),
        "log_words": math.log1p(len(words)),
        "n_numbers": float(len(_NUMBER.findall(prose))),
        "n_percent": float(len(_PERCENT.findall(prose))),
        "n_dates": float(len(_DATE.findall(prose))),
        "n_entities": float(entity_count(prose)),
        "english_share": english / len(words) if words else 0.0,
    }


# --- classification and reasons ---------------------------------------------------------------


def classification_features(classification: str, reasons: Mapping[str, str] | None) -> dict[str, float]:
    out = {name: 0.0 for name in CLASSIFICATION}
    out["misleading"] = float(classification == MISLEADING)
    if reasons is None:
        return out
    out["reasons_known"] = 1.0
    for column in REASON_COLUMNS:
        out[f"reason_{column}"] = float((reasons.get(column) or "0").strip() == "1")
    for column, scale in ORDINALS.items():
        out[f"ord_{column}"] = scale.get((reasons.get(column) or "").strip(), 0.5)  # 0.5: not answered
    return out


def writer_features(record: WriterRecord | None) -> dict[str, float]:
    if record is None or record.notes == 0:
        return {name: 0.0 for name in WRITER}
    return {
        "writer_known": 1.0,
        "writer_log_notes": math.log1p(record.notes),
        "writer_mean_intercept": record.mean_intercept,
        "writer_helpful_share": record.helpful_share,
    }


def writer_record(intercepts: Iterable[float], *, prior: float = 2.0, helpful: float = 0.40) -> WriterRecord:
    """A writer's record from the intercepts of their earlier scored notes (training data only)."""
    values = [v for v in intercepts if not math.isnan(v)]
    if not values:
        return WriterRecord(0, 0.0, 0.0)
    return WriterRecord(
        len(values), sum(values) / (len(values) + prior), sum(v >= helpful for v in values) / len(values)
    )


# --- all together ------------------------------------------------------------------------------


def note_features(note: NoteInput) -> dict[str, float]:
    """Every feature of one note, by name."""
    return {
        **source_features(note_links(note)),
        **text_features(note.text),
        **classification_features(note.classification, note.reasons),
        **writer_features(note.writer),
    }


def feature_names(groups: Sequence[str]) -> list[str]:
    unknown = [g for g in groups if g not in GROUPS]
    if unknown:
        raise ValueError(f"unknown feature groups {unknown}; known: {list(GROUPS)}")
    return [name for g in GROUPS if g in groups for name in GROUPS[g]]


def matrix(notes: Sequence[NoteInput], groups: Sequence[str]) -> np.ndarray:
    """(N, F) features of `groups` (in `GROUPS` order) for the notes."""
    return columns(notes, feature_names(groups))


def columns(notes: Sequence[NoteInput], names: Sequence[str]) -> np.ndarray:
    """(N, F) the named features (a stored model's `meta.features`) for the notes."""
    out = np.zeros((len(notes), len(names)), dtype=np.float32)
    for i, note in enumerate(notes):
        values = note_features(note)
        out[i] = [values[n] for n in names]
    return out
