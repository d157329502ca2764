"""Pure rules of the X integration (no ORM, no network): reading X's answers, the admission
criteria and the daily writing limit of an AI Note Writer, as the Community Notes API overview
(twitter/communitynotes documentation/api/overview.md) states them."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from crowdnotes_site.lib import xids

MISLEADING = "misinformed_or_potentially_misleading"
NOT_MISLEADING = "not_misleading"
CLASSIFICATIONS = {MISLEADING: "Misinformed or potentially misleading", NOT_MISLEADING: "Not misleading"}
MISLEADING_TAGS = {
    "disputed_claim_as_fact": "Presents a disputed claim as a fact",
    "factual_error": "Factual error",
    "manipulated_media": "Manipulated media",
    "misinterpreted_satire": "Misinterpreted satire",
    "missing_important_context": "Missing important context",
    "outdated_information": "Outdated information",
    "other": "Other",
}


def parse_time(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def full_text(tweet: dict[str, Any]) -> str:
    """A long post's full text is in note_tweet.text; `text` is then cut."""
    note_tweet = tweet.get("note_tweet")
    if isinstance(note_tweet, dict) and note_tweet.get("text"):
        return str(note_tweet["text"])
    return str(tweet.get("text") or "")


@dataclass(frozen=True)
class ParsedPost:
    x_id: str
    text: str
    author_id: str = ""
    created_at: datetime | None = None
    lang: str = ""
    context: list[dict[str, str]] = field(default_factory=list)  # {"relation", "id", "text"}
    media: list[dict[str, str]] = field(default_factory=list)  # {"type", "url", "alt_text"}
    suggested_source_links: list[str] = field(default_factory=list)


def _links(value: Any) -> list[str]:
    out: list[str] = []
    for item in value or []:
        url = item.get("url") if isinstance(item, dict) else item
        if isinstance(url, str) and url.startswith(("http://", "https://")) and url not in out:
            out.append(url)
    return out


class XShapeError(ValueError):
    """X answered valid JSON of a shape we cannot read (e.g. a number where an object belongs)."""


def _describe(value: Any, limit: int = 120) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "…"


def _expect(name: str, value: Any, kind: type) -> None:
    """Raise XShapeError naming `value` unless it is absent (None) or of `kind`."""
    if value is not None and not isinstance(value, kind):
        raise XShapeError(
            f"X's answer has {name} = {type(value).__name__} {_describe(value)}, expected a JSON {kind.__name__}"
        )


def _expect_object(payload: Any) -> None:
    if not isinstance(payload, dict):
        raise XShapeError(f"X's answer is {type(payload).__name__} {_describe(payload)}, expected a JSON object")


def check_shape(payload: Any) -> None:
    """Raise XShapeError, naming what X sent, unless `payload` has the shape of a posts answer:
    an object whose `data` is a list of objects, `includes` an object of lists of objects, `meta`
    and `errors` an object and a list (each may be absent or null)."""
    _expect_object(payload)
    expected: list[tuple[str, Any, type]] = [
        ("data", payload.get("data"), list), ("includes", payload.get("includes"), dict),
        ("meta", payload.get("meta"), dict), ("errors", payload.get("errors"), list),
    ]  # fmt: skip
    includes = payload.get("includes")
    if isinstance(includes, dict):
        expected += [(f"includes.{k}", includes.get(k), list) for k in ("tweets", "media")]
    for name, value, kind in expected:
        _expect(name, value, kind)
    for name in ("data", "includes.tweets", "includes.media"):
        items = payload.get("data") if name == "data" else (includes or {}).get(name.split(".")[1])
        for item in items or []:
            if not isinstance(item, dict):
                raise XShapeError(f"X's answer has an item of {name} = {_describe(item)}, expected a JSON object")
            for key, kind in (("referenced_tweets", list), ("attachments", dict)):
                if item.get(key) is not None and not isinstance(item.get(key), kind):
                    raise XShapeError(
                        f"X's answer has {name}[].{key} = {_describe(item.get(key))}, expected a JSON {kind.__name__}"
                    )


def check_notes_written_shape(payload: Any) -> None:
    """Raise XShapeError, naming what X sent, unless `payload` has the shape of a notes_written
    answer: an object whose `data` is a list of objects, each with `info` and `test_result`
    objects, `meta` an object and `errors` a list (each may be absent or null)."""
    _expect_object(payload)
    for name, kind in (("data", list), ("meta", dict), ("errors", list)):
        _expect(name, payload.get(name), kind)
    for item in payload.get("data") or []:
        if not isinstance(item, dict):
            raise XShapeError(f"X's answer has an item of data = {_describe(item)}, expected a JSON object")
        for key in ("info", "test_result"):
            _expect(f"data[].{key}", item.get(key), dict)


def parse_posts(payload: dict[str, Any]) -> list[ParsedPost]:
    """The posts of a posts_eligible_for_notes (or /2/tweets) answer with their context from
    `includes`: quoted / replied-to posts' text and the media of the post."""
    check_shape(payload)
    includes = payload.get("includes") or {}
    tweets = {str(t.get("id")): t for t in includes.get("tweets") or [] if isinstance(t, dict)}
    media = {str(m.get("media_key")): m for m in includes.get("media") or [] if isinstance(m, dict)}
    posts: list[ParsedPost] = []
    for tweet in payload.get("data") or []:
        if not isinstance(tweet, dict) or not xids.X_ID.match(str(tweet.get("id", ""))):
            continue
        context = []
        for ref in tweet.get("referenced_tweets") or []:
            if not isinstance(ref, dict):
                continue
            ref_id = str(ref.get("id", ""))
            if ref_id in tweets:
                context.append({"relation": str(ref.get("type", "")), "id": ref_id, "text": full_text(tweets[ref_id])})
        items = []
        for key in (tweet.get("attachments") or {}).get("media_keys") or []:
            m = media.get(str(key))
            if m:
                url = str(m.get("url") or m.get("preview_image_url") or "")
                url = url if url.startswith(("https://", "http://")) else ""  # shown as a link: never javascript:
                items.append(
                    {"type": str(m.get("type", "")), "url": str(url), "alt_text": str(m.get("alt_text") or "")}
                )
        posts.append(
            ParsedPost(
                x_id=str(tweet["id"]),
                text=full_text(tweet),
                author_id=str(tweet.get("author_id") or ""),
                created_at=parse_time(tweet.get("created_at")),
                lang=str(tweet.get("lang") or "")[:12],
                context=context,
                media=items,
                suggested_source_links=_links(tweet.get("suggested_source_links")),
            )
        )
    return posts


def lookup_errors(payload: dict[str, Any]) -> dict[str, str]:
    """X id -> error title for the ids a /2/tweets answer could not return."""
    out: dict[str, str] = {}
    for err in payload.get("errors") or []:
        if not isinstance(err, dict):
            continue
        x_id = str(err.get("resource_id") or err.get("value") or "")
        if xids.X_ID.match(x_id):
            out[x_id] = str(err.get("title") or err.get("detail") or "Not returned")[:200]
    return out


# --- What the "propose to X" form starts with -------------------------------------------------

# Rating tags that speak about the post rather than the note: "Provides important context" says
# the post lacked it; "Note not needed on this post" says the post is not misleading.
RATING_TAG_CONTEXT = "helpfulImportantContext"
RATING_TAG_NOT_NEEDED = "notHelpfulNoteNotNeeded"
# What a judge that passed the note may say about the post's claim in its reasoning, and X's tag
# for it. Only the stages that weigh the post's claim count (JUDGE_STAGES_ON_THE_POST: relevance,
# the evidence against the claim; helpfulness, the note against the claim); correctness compares
# the note with its snippets, so its "false" or "incorrect" speaks of the note, not the post.
JUDGE_STAGES_ON_THE_POST = ("relevance", "helpfulness")
REASONING_TAGS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("factual_error", re.compile(
        r"\b(?:false(?:ly)?|untrue|not true|incorrect(?:ly)?|wrong|inaccurate|factual error|"
        r"contradict(?:s|ed|ing)?|refut(?:es|ed|ing)|debunk(?:s|ed|ing)?|myth)\b", re.I)),
    ("missing_important_context", re.compile(
        r"\b(?:(?:missing|lacks?|lacking|omits?|leaves out|without|important|key|out of) (?:the )?context|"
        r"cherry[- ]pick\w*|misleading framing)\b", re.I)),
    ("outdated_information", re.compile(r"\b(?:outdated|out of date|no longer|superseded|obsolete)\b", re.I)),
    ("disputed_claim_as_fact", re.compile(r"\b(?:disputed|contested|unproven|not (?:yet )?settled)\b", re.I)),
    ("manipulated_media", re.compile(r"\b(?:manipulated|doctored|altered|edited) (?:image|photo|video|media)\b", re.I)),
    ("misinterpreted_satire", re.compile(r"\b(?:satire|satirical|parody)\b", re.I)),
)  # fmt: skip


@dataclass(frozen=True)
class JudgeReason:
    stage: str  # relevance / correctness / helpfulness
    reasoning: str


@dataclass(frozen=True)
class Suggestion:
    classification: str
    tags: list[str]
    # Why each choice was pre-filled, in words the form shows (true of the data it came from).
    reasons: list[str]


def _quote(text: str, match: re.Match[str], width: int = 90) -> str:
    start = max(0, match.start() - width // 2)
    end = min(len(text), match.end() + width // 2)
    return ("…" if start else "") + " ".join(text[start:end].split()) + ("…" if end < len(text) else "")


def suggest_choice(*, note_misleading: bool, rating_tags: Sequence[Sequence[str]],
                   judge_reasons: Sequence[JudgeReason]) -> Suggestion:  # fmt: skip
    """The classification and misleading tags the "propose to X" form starts with.

    Classification: the note's own, unless more than half of its ratings (at least two) say the
    note is not needed on this post (then "not misleading"). Tags, when misleading: "missing
    important context" when ratings say the note provides important context; any tag whose words
    appear in the reasoning of a relevance or helpfulness judge that passed the note
    (`judge_reasons`: passing verdicts only). Nothing is guessed beyond that: with no such data
    the person picks."""
    reasons: list[str] = []
    n = len(rating_tags)
    not_needed = sum(1 for tags in rating_tags if RATING_TAG_NOT_NEEDED in tags)
    classification = MISLEADING if note_misleading else NOT_MISLEADING
    if note_misleading and n >= 2 and not_needed * 2 > n:
        classification = NOT_MISLEADING
        reasons.append(f"Not misleading: {not_needed} of {n} ratings say the note is not needed on this post "
                       "(the note itself says misleading).")  # fmt: skip
    elif note_misleading:
        reasons.append("Misinformed or potentially misleading: the note's own classification.")
    else:
        reasons.append("Not misleading: the note's own classification.")
    tags: list[str] = []
    if classification == MISLEADING:
        context = sum(1 for t in rating_tags if RATING_TAG_CONTEXT in t)
        if context:
            tags.append("missing_important_context")
            reasons.append(f"{MISLEADING_TAGS['missing_important_context']}: {context} of {n} ratings say the "
                           "note provides important context.")  # fmt: skip
        for tag, pattern in REASONING_TAGS:
            for judge in judge_reasons:
                if judge.stage not in JUDGE_STAGES_ON_THE_POST:
                    continue
                match = pattern.search(judge.reasoning or "")
                if match is None:
                    continue
                if tag not in tags:
                    tags.append(tag)
                reasons.append(
                    f"{MISLEADING_TAGS[tag]}: the {judge.stage} judge wrote “{_quote(judge.reasoning, match)}”"
                )
                break
    order = list(MISLEADING_TAGS)
    return Suggestion(classification, sorted(tags, key=order.index), reasons)


# --- Admission ------------------------------------------------------------------------------

ADMISSION_WINDOW = 50


@dataclass(frozen=True)
class Criterion:
    name: str
    label: str
    share: float | None  # None: no notes
    threshold: float
    at_least: bool  # True: share ≥ threshold passes; False: share ≤ threshold passes
    count: int
    n: int

    @property
    def passed(self) -> bool:
        if self.share is None:
            return False
        return self.share >= self.threshold if self.at_least else self.share <= self.threshold


@dataclass(frozen=True)
class Admission:
    window: int
    n: int
    criteria: list[Criterion]

    @property
    def eligible(self) -> bool:
        return self.n >= self.window and all(c.passed for c in self.criteria)

    def by_name(self) -> dict[str, Criterion]:
        return {c.name: c for c in self.criteria}


def _bucket(outcomes: Sequence[dict[str, Any]], evaluator: str) -> str:
    for o in outcomes or []:
        if isinstance(o, dict) and str(o.get("evaluator_type", "")).lower() == evaluator.lower():
            return str(o.get("evaluator_score_bucket", "")).lower()
    return ""


def admission(outcomes_newest_first: Sequence[Sequence[dict[str, Any]]], window: int = ADMISSION_WINDOW) -> Admission:
    """The overview's criteria over the most recent `window` test-mode notes (each note's
    `test_result.evaluation_outcome` list): ClaimOpinion high ≥ 30 %, ClaimOpinion low ≤ 30 %,
    UrlValidity high ≥ 95 %, HarassmentAbuse high ≥ 98 %."""
    notes = list(outcomes_newest_first)[:window]
    n = len(notes)
    specs = [
        ("claim_opinion_high", "ClaimOpinion high", "ClaimOpinion", "high", 0.30, True),
        ("claim_opinion_low", "ClaimOpinion low", "ClaimOpinion", "low", 0.30, False),
        ("url_validity_high", "UrlValidity high", "UrlValidity", "high", 0.95, True),
        ("harassment_abuse_high", "HarassmentAbuse high", "HarassmentAbuse", "high", 0.98, True),
    ]
    criteria = []
    for name, label, evaluator, bucket, threshold, at_least in specs:
        count = sum(1 for o in notes if _bucket(o, evaluator) == bucket)
        criteria.append(Criterion(name, label, count / n if n else None, threshold, at_least, count, n))
    return Admission(window=window, n=n, criteria=criteria)


# --- Writing limit ----------------------------------------------------------------------------

CRH = "currently_rated_helpful"
CRNH = "currently_rated_not_helpful"
NMR = "needs_more_ratings"


def normalize_status(status: str) -> str:
    return re.sub(r"[^a-z]+", "_", (status or "").lower()).strip("_")


@dataclass(frozen=True)
class WritingLimit:
    limit: int
    rule: str
    nh_5: int
    nh_10: int
    hr_r: float
    hr_l: float
    dn_30: float
    total: int


def _hit_rate(statuses: Sequence[str]) -> float:
    if not statuses:
        return 0.0
    crh = sum(1 for s in statuses if s == CRH)
    crnh = sum(1 for s in statuses if s == CRNH)
    return (crh - crnh) / len(statuses)


def writing_limit(statuses_newest_first: Sequence[str], notes_last_30_days: int) -> WritingLimit:
    """WL from the overview: NH_10 ≥ 8 → 2; else NH_5 ≥ 3 → 5; else T < 20 → 10; else
    max(5, floor(min(DN_30 × 5, 200 × max(HR_R, HR_L)))). NH_k counts CRNH among the last k notes
    with a status other than Needs More Ratings; HR_R and HR_L are (CRH − CRNH) / notes among the
    last 20 and 100 notes; DN_30 the average notes a day over 30 days; T all notes written."""
    statuses = [normalize_status(s) for s in statuses_newest_first]
    rated = [s for s in statuses if s and s != NMR]
    nh_5 = sum(1 for s in rated[:5] if s == CRNH)
    nh_10 = sum(1 for s in rated[:10] if s == CRNH)
    hr_r = _hit_rate(statuses[:20])
    hr_l = _hit_rate(statuses[:100])
    dn_30 = notes_last_30_days / 30
    total = len(statuses)
    if nh_10 >= 8:
        limit, rule = 2, "NH_10 ≥ 8"
    elif nh_5 >= 3:
        limit, rule = 5, "NH_5 ≥ 3"
    elif total < 20:
        limit, rule = 10, "T < 20 (new writer)"
    else:
        limit = max(5, math.floor(min(dn_30 * 5, 200 * max(hr_r, hr_l))))
        rule = "max(5, floor(min(DN_30 × 5, 200 × max(HR_R, HR_L))))"
    return WritingLimit(limit, rule, nh_5, nh_10, hr_r, hr_l, dn_30, total)
