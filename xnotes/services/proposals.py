"""Propose a note to X, exactly once: what may be proposed (sources, judges, length), today's quota,
the proposal's row queued through the outbox, and its one send."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from crowdnotes_site.lib import text_rules
from crowdnotes_site.lib.categories import HEALTH_AUTHORITY, RESEARCH, category_by_rules
from crowdnotes_site.queue import enqueue_on_commit
from evidence import local_copies
from evidence.snippets import snippet_is_confirmed
from judging.models import JudgeRun
from notes.models import Note
from xnotes import rules
from xnotes.budget import RateLimited
from xnotes.client import XApiError, XBadAnswer, XClient, XTransientError
from xnotes.models import XProposal
from xnotes.services import XFlowError
from xnotes.services.evaluator import x_post_id
from xnotes.services.written import writing_limit_now

if TYPE_CHECKING:
    from django.contrib.auth.models import User

# How long a sender owns a proposal: longer than one POST with its timeout, shorter than the
# broker's visibility timeout (a lost worker's task is redelivered and takes the row over).
PROPOSAL_LEASE_S = 120

# pg_advisory_xact_lock key of the daily quota check (one proposal request at a time decides).
QUOTA_LOCK_KEY = 0x0C_0A_17_23

# Source categories whose links X is told are trustworthy (`trustworthy_sources`).
TRUSTWORTHY_CATEGORIES = (HEALTH_AUTHORITY, RESEARCH)


def _source_urls(note: Note) -> list[str]:
    """The note's source URLs, a local copy's (the demo's served pages) as the page's real address."""
    return [local_copies.real_address(str(u)) for u in note.evidence_urls or []]


def x_note_text(note: Note) -> str:
    """The text sent to X: the note, with its first source URL appended when the text names none
    (X requires a source URL in the text). Local copies' URLs are sent as their real addresses."""
    text = local_copies.real_addresses(note.text)
    if text_rules.find_urls(text, web_only=True):
        return text
    urls = _source_urls(note)
    return f"{text.rstrip()} {urls[0]}" if urls else text


def trustworthy_sources(note: Note) -> bool:
    """True when every source of the note is a health authority or research publisher
    (crowdnotes_site.lib.categories), the categories the source priors rank highest."""
    urls = _source_urls(note)
    return bool(urls) and all(category_by_rules(u).category in TRUSTWORTHY_CATEGORIES for u in urls)


def proposal_refusals(note: Note) -> list[str]:
    """Why this note cannot be proposed to X (empty: it can)."""
    reasons: list[str] = []
    snippets = list(note.snippets.select_related("passage"))
    if not snippets:
        reasons.append("The note has no confirmed evidence snippet.")
    elif not all(snippet_is_confirmed(s) for s in snippets):
        reasons.append("Every evidence snippet must be confirmed by a person (one is not).")
    run = JudgeRun.objects.filter(note=note).order_by("-created_at", "-id").first()
    if run is None or run.state != JudgeRun.State.DONE:
        reasons.append("The judges have not finished on this note.")
    if not x_post_id(note.post):
        reasons.append("The post has no X post id.")
    text = x_note_text(note)
    if not text_rules.find_urls(text, web_only=True):
        reasons.append("The note has no source URL (X requires one in the text).")
    length = text_rules.note_length(text)
    if length > text_rules.NOTE_MAX_CHARS:
        reasons.append(
            f"The text is {length - text_rules.NOTE_MAX_CHARS} characters over the {text_rules.NOTE_MAX_CHARS} limit."
        )
    return reasons


@dataclass(frozen=True)
class Quota:
    """Today's proposals against the 250-a-day cap and (live mode) the writer's writing limit."""

    used_today: int
    daily_cap: int
    writing_limit: rules.WritingLimit | None  # None in test mode (X applies it to live notes)

    @property
    def allowed(self) -> int:
        caps = [self.daily_cap] + ([self.writing_limit.limit] if self.writing_limit else [])
        return min(caps)

    @property
    def left(self) -> int:
        return max(0, self.allowed - self.used_today)

    def refusal(self) -> str | None:
        if self.used_today < self.daily_cap and (
            self.writing_limit is None or self.used_today < self.writing_limit.limit
        ):
            return None
        if self.used_today >= self.daily_cap:
            return f"Today's cap of {self.daily_cap} notes proposed to X is reached ({self.used_today} today); try again after midnight UTC."
        assert self.writing_limit is not None
        return (
            f"The writer's writing limit for today is reached: {self.used_today} of {self.writing_limit.limit} "
            f"({self.writing_limit.rule}); try again after midnight UTC."
        )


def _today_start(now: dt.datetime) -> dt.datetime:
    return now.astimezone(dt.UTC).replace(hour=0, minute=0, second=0, microsecond=0)


def quota(*, test_mode: bool | None = None, now: dt.datetime | None = None) -> Quota:
    now = now or timezone.now()
    test_mode = settings.X_TEST_MODE if test_mode is None else test_mode
    used = (
        XProposal.objects.filter(created_at__gte=_today_start(now), test_mode=test_mode)
        .exclude(state=XProposal.State.FAILED)
        .count()
    )
    return Quota(used, settings.X_DAILY_NOTE_CAP, None if test_mode else writing_limit_now(now=now))


def _lock_quota() -> None:
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [QUOTA_LOCK_KEY])


def _check_choice(classification: str, tags: Sequence[str]) -> list[str]:
    if classification not in rules.CLASSIFICATIONS:
        raise XFlowError(f"Classification must be one of {', '.join(rules.CLASSIFICATIONS)}, not {classification!r}.")
    unknown = [t for t in tags if t not in rules.MISLEADING_TAGS]
    if unknown:
        raise XFlowError(f"Unknown tag(s) {', '.join(unknown)}; allowed: {', '.join(rules.MISLEADING_TAGS)}.")
    if classification == rules.MISLEADING and not tags:
        raise XFlowError("A note on a misleading post needs at least one tag.")
    return list(dict.fromkeys(tags)) if classification == rules.MISLEADING else []


def proposal_request(*, note: Note, user: User | None, classification: str, tags: Sequence[str],
                     enqueue: bool = True) -> tuple[XProposal, bool]:  # fmt: skip
    """Record the proposal (one row per post) and queue its send through the outbox in the same
    transaction. A post already proposed returns its row and False; refusals raise XFlowError."""
    existing = XProposal.objects.filter(post_id=note.post_id).first()
    if existing is not None:
        return existing, False
    reasons = proposal_refusals(note)
    if reasons:
        raise XFlowError(" ".join(reasons))
    tags = _check_choice(classification, tags)

    try:
        with transaction.atomic():
            _lock_quota()  # two requests at once cannot both take the last one
            refusal = quota().refusal()
            if refusal:
                raise XFlowError(refusal)
            proposal = XProposal.objects.create(
                post=note.post, note=note, requested_by=user, x_post_id=x_post_id(note.post),
                test_mode=settings.X_TEST_MODE, text=x_note_text(note), classification=classification,
                misleading_tags=tags, trustworthy_sources=trustworthy_sources(note),
            )  # fmt: skip
            if enqueue:
                enqueue_on_commit("xnotes.tasks.x_propose_note", proposal.pk, owner=user.pk if user else None)
    except IntegrityError:  # another request proposed this post meanwhile
        return XProposal.objects.get(post_id=note.post_id), False
    return proposal, True


def _find_written(client: XClient, *, x_post_id: str, test_mode: bool, max_pages: int = 5) -> str:
    """This writer's note on a post according to notes_written ("" when none is listed)."""
    token: str | None = None
    for _ in range(max_pages):
        payload = client.notes_written(test_mode=test_mode, pagination_token=token)
        for item in payload.get("data") or []:
            info = item.get("info") or {}
            if str(info.get("post_id", "")) == x_post_id:
                return str(item.get("id", ""))
        token = (payload.get("meta") or {}).get("next_token")
        if not token:
            break
    return ""


def is_duplicate_answer(exc: XApiError) -> bool:
    """X's "one note per post" answer (a 4xx whose title or detail says the note exists)."""
    words = f"{exc.title} {exc.detail}".lower()
    return exc.status in (400, 403, 409) and any(
        w in words for w in ("already", "duplicate", "one note per post", "exists")
    )


def proposal_send(*, proposal_id: int, client: XClient) -> XProposal:
    """Send a queued proposal once. The row is claimed first (a second delivery does nothing);
    `attempts` is saved before the POST, so a send after an attempt that got no answer first asks
    notes_written and records the note found there instead of sending another. X's "one note per
    post" answer is recorded as DUPLICATE, not retried. RateLimited / XTransientError propagate
    with the row back in QUEUED / UNCERTAIN, for the task to retry later."""
    claimable = [XProposal.State.QUEUED, XProposal.State.UNCERTAIN]
    now = timezone.now()
    with transaction.atomic():
        proposal = XProposal.objects.select_for_update().get(pk=proposal_id)
        lost = proposal.state == XProposal.State.SENDING and (
            proposal.claimed_until is None or proposal.claimed_until < now
        )
        if proposal.state not in claimable and not lost:
            return proposal
        previous = XProposal.State.UNCERTAIN if lost else proposal.state
        proposal.transition(XProposal.State.SENDING)
        proposal.claimed_until = now + dt.timedelta(seconds=PROPOSAL_LEASE_S)
        proposal.save(update_fields=["state", "claimed_until"])
    try:
        if previous == XProposal.State.UNCERTAIN or proposal.attempts > 0:
            found = _find_written(client, x_post_id=proposal.x_post_id, test_mode=proposal.test_mode)
            if found:
                return _record(proposal, XProposal.State.SENT, x_note_id=found)
        XProposal.objects.filter(pk=proposal.pk).update(attempts=proposal.attempts + 1)
        proposal.attempts += 1
        answer = client.create_note(
            test_mode=proposal.test_mode, post_id=proposal.x_post_id, text=proposal.text,
            classification=proposal.classification, misleading_tags=proposal.misleading_tags,
            trustworthy_sources=proposal.trustworthy_sources,
        )  # fmt: skip
        data = answer.get("data") or {}
        x_note_id = str(data.get("id") or data.get("note_id") or "")
        return _record(proposal, XProposal.State.SENT, x_note_id=x_note_id)
    except RateLimited:
        # Nothing was sent (the budget refused before the request, or X answered 429).
        _record(proposal, XProposal.State.QUEUED if proposal.attempts == 0 or previous == XProposal.State.QUEUED
                else XProposal.State.UNCERTAIN, error="Waiting for X's rate limit to reset.", sent=False)  # fmt: skip
        raise
    except (XTransientError, XBadAnswer) as exc:  # no usable answer: X may have created the note
        _record(proposal, XProposal.State.UNCERTAIN, error=str(exc), sent=False)
        raise
    except XApiError as exc:
        if is_duplicate_answer(exc):
            found = ""
            try:
                found = _find_written(client, x_post_id=proposal.x_post_id, test_mode=proposal.test_mode)
            except (XApiError, RateLimited):
                pass
            return _record(proposal, XProposal.State.DUPLICATE, x_note_id=found, error=str(exc))
        return _record(proposal, XProposal.State.FAILED, error=str(exc), sent=False)


def _record(proposal: XProposal, state: str, *, x_note_id: str = "", error: str = "", sent: bool = True) -> XProposal:
    proposal.transition(state)  # from SENDING, the claim this sender holds
    proposal.error = error[:2000]
    if x_note_id:
        proposal.x_note_id = x_note_id
    if sent and proposal.sent_at is None:
        proposal.sent_at = timezone.now()
    proposal.save(update_fields=["state", "error", "x_note_id", "sent_at"])
    return proposal
