"""X integration services: pull eligible posts, give imported posts their text, ask X's evaluator,
propose a note (exactly once), follow the notes written. Every X call goes through xnotes.client."""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import Q
from django.utils import timezone

from crowdnotes_site.lib import text_rules, xids
from crowdnotes_site.lib.categories import HEALTH_AUTHORITY, RESEARCH, category_by_rules
from crowdnotes_site.lib.hashing import sha256_hex
from crowdnotes_site.queue import enqueue_on_commit
from crowdnotes_site.transitions import transition_rows
from evidence import local_copies
from evidence.snippets import snippet_is_confirmed
from judging.models import JudgeRun, PreflightCheck
from notes.models import Note, Post
from notes.services import post_create, post_text_supply
from xnotes import rules
from xnotes.budget import RateLimited
from xnotes.client import LOOKUP_BATCH, XApiError, XBadAnswer, XClient, XTransientError
from xnotes.models import XEvaluation, XFetchRun, XPost, XProposal, XRun, XTaskRun, XWrittenNote

if TYPE_CHECKING:
    from django.contrib.auth.models import User

log = logging.getLogger(__name__)

# How long a sender owns a proposal: longer than one POST with its timeout, shorter than the
# broker's visibility timeout (a lost worker's task is redelivered and takes the row over).
PROPOSAL_LEASE_S = 120
# A fetch run not saved for this long (running) or this long past its wait (waiting) lost its worker.
FETCH_RUN_STALE_S = 600

# pg_advisory_xact_lock key of the daily quota check (one proposal request at a time decides).
QUOTA_LOCK_KEY = 0x0C_0A_17_23

# Source categories whose links X is told are trustworthy (`trustworthy_sources`).
TRUSTWORTHY_CATEGORIES = (HEALTH_AUTHORITY, RESEARCH)


class XFlowError(Exception):
    """An X action that is not allowed now; the message is for the person (or the operator)."""


# --- Pull eligible posts ---------------------------------------------------------------------


def fetch_run_create(*, user: User | None = None, max_results: int | None = None, page_limit: int | None = None,
                     post_limit: int | None = None) -> XFetchRun:  # fmt: skip
    return XFetchRun.objects.create(
        requested_by=user,
        test_mode=settings.X_TEST_MODE,
        max_results=max_results or settings.X_FETCH_MAX_RESULTS,
        page_limit=page_limit or settings.X_FETCH_PAGE_LIMIT,
        post_limit=post_limit,
    )


def _lost_runs_fail(model: type[XFetchRun] | type[XTaskRun], *, error: str, now: dt.datetime | None) -> int:
    """Fail the runs of `model` whose worker was lost: queued or running without an update, or
    waiting past their reset, for FETCH_RUN_STALE_S."""
    now = now or timezone.now()
    stale = now - dt.timedelta(seconds=FETCH_RUN_STALE_S)
    lost = Q(state__in=[XRun.State.QUEUED, XRun.State.RUNNING], updated_at__lt=stale) | Q(
        state=XRun.State.WAITING, wait_until__lt=stale
    )
    return transition_rows(model.objects.filter(lost), XRun.State.FAILED, error=error, finished_at=now)


def fetch_runs_expire(*, now: dt.datetime | None = None) -> int:
    """Fail the runs whose worker was lost, so the next beat run or button press can start."""
    return _lost_runs_fail(XFetchRun, error="The worker was lost; the next fetch starts again.", now=now)


@transaction.atomic
def fetch_run_request(*, user: User) -> tuple[XFetchRun, bool]:
    """The admin's "Fetch from X now": one run at a time (asking again returns the active one)."""
    fetch_runs_expire()
    active = XFetchRun.objects.select_for_update().filter(state__in=XFetchRun.ACTIVE).first()
    if active is not None:
        return active, False
    run = fetch_run_create(user=user)
    enqueue_on_commit("xnotes.tasks.x_fetch_eligible", run.pk)
    return run, True


def _store_post(parsed: rules.ParsedPost, *, test_mode: bool, now: dt.datetime) -> bool:
    """Store one eligible post (X id unique); True when it is new to CrowdNotes."""
    xpost = XPost.objects.select_related("post").filter(x_id=parsed.x_id).first()
    created = False
    if xpost is None:
        post = Post.objects.filter(external_id=parsed.x_id).order_by("id").first()
        if post is None:
            post = post_create(
                text=parsed.text,
                source_url=f"https://x.com/i/status/{parsed.x_id}",
                external_id=parsed.x_id,
                posted_at=parsed.created_at,
            )
            created = True
        xpost = XPost(post=post, x_id=parsed.x_id)
    post = xpost.post
    if not post.text_available and parsed.text:
        post = post_text_supply(post=post, text=parsed.text)
    if post.posted_at is None and parsed.created_at is not None:
        Post.objects.filter(pk=post.pk).update(posted_at=parsed.created_at)
    xpost.author_x_id = parsed.author_id
    xpost.lang = parsed.lang
    xpost.context = parsed.context
    xpost.media = parsed.media
    xpost.suggested_source_links = parsed.suggested_source_links
    xpost.eligible = True
    xpost.eligible_test_mode = test_mode
    xpost.last_seen_at = now
    xpost.save()
    return created


def fetch_eligible(
    *, run: XFetchRun, client: XClient, on_rate_limit: Callable[[RateLimited], None] | None = None
) -> XFetchRun:
    """Page through posts_eligible_for_notes from the run's saved token, storing each post once.

    On a 429 (or a spent budget): with `on_rate_limit` (the command) it is called (it sleeps until
    the reset) and the run goes on; without it the run is saved as WAITING and RateLimited is
    raised, so the task re-queues itself for the reset and resumes from the saved page token."""
    run.transition(XFetchRun.State.RUNNING)
    run.wait_until = None
    run.save(update_fields=["state", "wait_until"])
    start_requests = client.requests
    try:
        while run.pages < run.page_limit and (run.post_limit is None or run.fetched < run.post_limit):
            size = run.max_results if run.post_limit is None else min(run.max_results, run.post_limit - run.fetched)
            try:
                payload = client.eligible_posts(
                    test_mode=run.test_mode, max_results=size, pagination_token=run.next_token or None
                )
            except RateLimited as limited:
                run.rate_limited_waits += 1
                run.requests += client.requests - start_requests
                start_requests = client.requests
                if on_rate_limit is None:
                    run.transition(XFetchRun.State.WAITING)
                    run.wait_until = dt.datetime.fromtimestamp(limited.reset_at, tz=dt.UTC)
                    run.save()
                    raise
                run.save()
                on_rate_limit(limited)
                continue
            now = timezone.now()
            with transaction.atomic():
                for parsed in rules.parse_posts(payload):
                    if run.post_limit is not None and run.fetched >= run.post_limit:
                        break
                    run.fetched += 1
                    if _store_post(parsed, test_mode=run.test_mode, now=now):
                        run.new += 1
                    else:
                        run.updated += 1
                run.pages += 1
                run.next_token = str((payload.get("meta") or {}).get("next_token") or "")
                run.requests += client.requests - start_requests
                start_requests = client.requests
                run.save()
            if not run.next_token:
                break
    except RateLimited:
        raise
    except (XApiError, rules.XShapeError) as exc:
        run.requests += client.requests - start_requests
        run.transition(XFetchRun.State.FAILED)
        run.error = str(exc)
        run.finished_at = timezone.now()
        run.save()
        return run
    run.transition(XFetchRun.State.DONE)
    run.next_token = ""
    run.finished_at = timezone.now()
    run.save()
    return run


# --- Give imported posts their text ----------------------------------------------------------


@dataclass
class HydrateStats:
    requests: int = 0
    looked_up: int = 0
    hydrated: int = 0
    not_found: int = 0
    skipped: int = 0

    def as_dict(self) -> dict[str, int]:
        return dict(self.__dict__)


def _posts_without_text() -> Any:
    return Post.objects.filter(text_available=False, external_id__regex=r"^[0-9]{1,19}$")


def hydrate_candidates(*, limit: int, now: dt.datetime | None = None) -> tuple[list[Post], int]:
    """Posts with an X id but no text, oldest first, leaving out those X did not return within
    X_NOT_FOUND_RETRY_DAYS (their count is the second value)."""
    now = now or timezone.now()
    recent_error = Q(xpost__lookup_error_at__gte=now - dt.timedelta(days=settings.X_NOT_FOUND_RETRY_DAYS))
    # Found before but left without text (its text is another post's, which holds it): never again.
    done = Q(xpost__hydrated_at__isnull=False)
    skipped = _posts_without_text().filter(recent_error | done).count()
    posts = list(_posts_without_text().exclude(recent_error).exclude(done).order_by("id")[:limit])
    return posts, skipped


def hydrate_posts(*, client: XClient, limit: int, on_rate_limit: Callable[[RateLimited], None] | None = None,
                  stats: HydrateStats | None = None,
                  on_batch: Callable[[HydrateStats], None] | None = None) -> HydrateStats:  # fmt: skip
    """Look up every post that has an X id but no text, 100 ids a request. Found: the text and
    time are stored and the post becomes draftable (and is classified). Not returned: X's error
    title is stored and the post is skipped for X_NOT_FOUND_RETRY_DAYS. RateLimited propagates
    (the task re-queues itself) unless `on_rate_limit` waits (the command). `on_batch` is called
    after each stored batch (the task's progress)."""
    stats = stats or HydrateStats()
    posts, stats.skipped = hydrate_candidates(limit=limit)
    for start in range(0, len(posts), LOOKUP_BATCH):
        batch = posts[start : start + LOOKUP_BATCH]
        by_id = {p.external_id: p for p in batch}
        before = client.requests
        while True:
            try:
                payload = client.posts_lookup(list(by_id))
                break
            except RateLimited as limited:
                stats.requests += client.requests - before
                before = client.requests
                if on_rate_limit is None:
                    raise
                on_rate_limit(limited)
        stats.requests += client.requests - before
        stats.looked_up += len(batch)
        now = timezone.now()
        errors = rules.lookup_errors(payload)
        with transaction.atomic():
            for parsed in rules.parse_posts(payload):
                post = by_id.get(parsed.x_id)
                if post is None or not parsed.text:
                    continue
                post = post_text_supply(post=post, text=parsed.text)
                if post.pk == by_id[parsed.x_id].pk and post.posted_at is None and parsed.created_at:
                    Post.objects.filter(pk=post.pk).update(posted_at=parsed.created_at)
                XPost.objects.update_or_create(
                    x_id=parsed.x_id,
                    defaults={"post": by_id[parsed.x_id], "author_x_id": parsed.author_id, "lang": parsed.lang,
                              "hydrated_at": now, "lookup_error": "", "lookup_error_at": None},
                )  # fmt: skip
                stats.hydrated += 1
            for x_id, title in errors.items():
                if x_id not in by_id:
                    continue
                XPost.objects.update_or_create(
                    x_id=x_id, defaults={"post": by_id[x_id], "lookup_error": title, "lookup_error_at": now}
                )
                stats.not_found += 1
        if on_batch is not None:
            on_batch(stats)
    return stats


# --- X's evaluator ---------------------------------------------------------------------------


def x_post_id(post: Post) -> str:
    """The post's X id ("" when it has none)."""
    xpost = XPost.objects.filter(post=post).first()
    if xpost is not None:
        return xpost.x_id
    return post.external_id if xids.X_ID.match(post.external_id or "") else ""


def evaluation_cached(*, post: Post, text: str) -> XEvaluation | None:
    return XEvaluation.objects.filter(post=post, text_hash=sha256_hex(text)).first()


def preflight_evaluation_needed(check_id: int) -> tuple[Post, str] | None:
    """The post and text X's evaluator should see for this pre-flight (judging queues
    `x_preflight_evaluate` for every pre-flight of a draft), or None: no draft, the post is not
    on X, or X already answered this text."""
    check = PreflightCheck.objects.select_related("draft_job__post").filter(pk=check_id).first()
    post = check.draft_job.post if check is not None and check.draft_job is not None else None
    if check is None or post is None or not x_post_id(post):
        return None
    cached = evaluation_cached(post=post, text=check.note_text)
    if cached is not None and cached.claim_opinion_score is not None:
        return None
    return post, check.note_text


def evaluate(*, post: Post, text: str, client: XClient) -> XEvaluation:
    """X's ClaimOpinion score of `text` on the post, cached per (post, text hash). RateLimited
    and XTransientError propagate (the task retries); a refusal is stored as the answer."""
    cached = evaluation_cached(post=post, text=text)
    if cached is not None and cached.claim_opinion_score is not None:
        return cached
    x_id = x_post_id(post)
    if not x_id:
        raise XFlowError("This post has no X id, so X's evaluator cannot be asked.")
    score: float | None = None
    error = ""
    try:
        answer = client.evaluate_note(post_id=x_id, note_text=text)
        raw = (answer.get("data") or {}).get("claim_opinion_score")
        score = float(raw) if raw is not None else None
        if score is None:
            error = "X's answer had no claim_opinion_score"
    except XTransientError:
        raise
    except XApiError as exc:
        error = str(exc)[:300]
    evaluation, _ = XEvaluation.objects.update_or_create(
        post=post, text_hash=sha256_hex(text),
        defaults={"note_text": text, "claim_opinion_score": score, "error": error, "created_at": timezone.now()},
    )  # fmt: skip
    return evaluation


# --- Propose a note --------------------------------------------------------------------------


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


def writing_limit_now(*, now: dt.datetime | None = None) -> rules.WritingLimit:
    """The overview's writing limit from the live notes X listed in notes_written."""
    now = now or timezone.now()
    live = XWrittenNote.objects.filter(test_mode=False).order_by("-created_at", "-x_note_id")
    statuses = list(live.values_list("status", flat=True))
    last_30 = live.filter(created_at__gte=now - dt.timedelta(days=30)).count()
    return rules.writing_limit(statuses, last_30)


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


# --- Follow the notes written -----------------------------------------------------------------


@dataclass
class SyncStats:
    requests: int = 0
    notes: int = 0
    pages: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


def _ratings_of(item: dict[str, Any]) -> dict[str, Any]:
    for key in ("ratings", "rating_counts", "public_metrics"):
        value = item.get(key)
        if isinstance(value, dict):
            return {k: v for k, v in value.items() if isinstance(v, int | float)}
    return {}


def sync_written(*, client: XClient, max_pages: int = 20, test_mode: bool | None = None,
                 on_rate_limit: Callable[[RateLimited], None] | None = None,
                 on_page: Callable[[SyncStats], None] | None = None) -> SyncStats:  # fmt: skip
    """Page through notes_written (the current mode) and store each note with its evaluator
    outcomes (test mode) or status and ratings (live); proposals get their X note id back.
    `on_page` is called after each stored page (the task's progress). A page of another shape
    raises rules.XShapeError naming what X sent; the pages before it stay stored."""
    test_mode = settings.X_TEST_MODE if test_mode is None else test_mode
    stats = SyncStats()
    before = client.requests
    token: str | None = None
    while stats.pages < max_pages:
        try:
            payload = client.notes_written(test_mode=test_mode, pagination_token=token)
        except RateLimited as limited:
            if on_rate_limit is None:
                raise
            on_rate_limit(limited)
            continue
        rules.check_notes_written_shape(payload)
        stats.pages += 1
        now = timezone.now()
        with transaction.atomic():
            for item in payload.get("data") or []:
                x_note_id = str(item.get("id", ""))
                if not xids.X_ID.match(x_note_id):
                    continue
                info = item.get("info") or {}
                post_x_id = str(info.get("post_id", ""))
                outcomes = ((item.get("test_result") or {}).get("evaluation_outcome")) or []
                proposal = (
                    XProposal.objects.filter(x_note_id=x_note_id).first()
                    or XProposal.objects.filter(x_post_id=post_x_id, test_mode=test_mode).first()
                )
                if proposal is not None and not proposal.x_note_id:
                    proposal.x_note_id = x_note_id
                    proposal.save(update_fields=["x_note_id"])
                XWrittenNote.objects.update_or_create(
                    x_note_id=x_note_id,
                    defaults={
                        "x_post_id": post_x_id, "test_mode": test_mode, "text": str(info.get("text") or ""),
                        "classification": str(info.get("classification") or ""),
                        "status": str(item.get("status") or ""), "outcomes": outcomes if isinstance(outcomes, list) else [],
                        "ratings": _ratings_of(item), "created_at": xids.x_id_time(x_note_id), "synced_at": now,
                        "proposal": proposal,
                    },
                )  # fmt: skip
                stats.notes += 1
        if on_page is not None:
            stats.requests = client.requests - before
            on_page(stats)
        token = (payload.get("meta") or {}).get("next_token")
        if not token:
            break
    stats.requests = client.requests - before
    return stats


def admission_now() -> rules.Admission:
    """The admission criteria over the writer's 50 most recent test-mode notes."""
    recent = XWrittenNote.objects.filter(test_mode=True).order_by("-created_at", "-x_note_id")
    return rules.admission([n.outcomes for n in recent[: rules.ADMISSION_WINDOW]])


def admission_json(adm: rules.Admission) -> dict[str, Any]:
    out: dict[str, Any] = {"window": adm.window, "n": adm.n, "eligible": adm.eligible}
    for c in adm.criteria:
        out[c.name] = {"share": c.share, "threshold": c.threshold, "passed": c.passed, "count": c.count, "n": c.n}
    return out


def writing_limit_json(wl: rules.WritingLimit) -> dict[str, Any]:
    return {"limit": wl.limit, "rule": wl.rule, "nh_5": wl.nh_5, "nh_10": wl.nh_10, "hr_r": wl.hr_r,
            "hr_l": wl.hr_l, "dn_30": wl.dn_30, "total": wl.total}  # fmt: skip


class WaitCapExceeded(Exception):
    """X kept answering 429: the next reset lies past the command's cap on its total wait."""


class ResetWaiter:
    """The commands' wait on a 429 / spent budget: a sleep until each reset, at most
    X_API_MAX_TOTAL_WAIT_S in all for one command; a reset that would pass the cap raises
    WaitCapExceeded (naming what X sent) at once instead of sleeping."""

    def __init__(self, *, cap_s: float | None = None, sleep: Callable[[float], None] = time.sleep) -> None:
        self.cap_s = float(settings.X_API_MAX_TOTAL_WAIT_S if cap_s is None else cap_s)
        self.sleep = sleep
        self.waited_s = 0.0
        self.answers = 0

    def __call__(self, limited: RateLimited) -> None:
        self.answers += 1
        wait = limited.wait_s()
        if self.waited_s + wait > self.cap_s:
            raise WaitCapExceeded(
                f"X answered 429 Too Many Requests ({limited.bucket}) {self.answers} time"
                f"{'s' if self.answers != 1 else ''}; waited {self.waited_s:.0f} s in all, and its next reset is "
                f"{wait:.0f} s away, past the cap on the total wait (X_API_MAX_TOTAL_WAIT_S = {self.cap_s:.0f} s). "
                "Nothing fetched so far is lost; run the command again later."
            )
        log.info("X API rate limit: waiting %.0f s for the reset", wait)
        self.sleep(wait)
        self.waited_s += wait


def sleep_until_reset(limited: RateLimited) -> None:
    """The commands' wait on a 429 / spent budget: one sleep until the reset (no polling)."""
    wait = limited.wait_s()
    log.info("X API rate limit: waiting %.0f s for the reset", wait)
    time.sleep(wait)


# --- Runs of the hydrate and sync tasks (the writer page's buttons, beat) ----------------------

TASK_OF_KIND = {
    XTaskRun.Kind.HYDRATE: "xnotes.tasks.x_hydrate_posts",
    XTaskRun.Kind.SYNC: "xnotes.tasks.x_sync_written",
}


def task_runs_expire(*, now: dt.datetime | None = None) -> int:
    """Fail the runs whose worker was lost (as fetch_runs_expire), so the next one can start."""
    return _lost_runs_fail(XTaskRun, error="The worker was lost; the next run starts again.", now=now)


@transaction.atomic
def task_run_request(*, kind: str, user: User | None) -> tuple[XTaskRun, bool]:
    """The admin's "Fill imported posts' text now" / "Follow notes back now": one run of a kind at a
    time (asking again returns the active one); the task is queued after commit. No X call here."""
    task_runs_expire()
    active = XTaskRun.objects.select_for_update().filter(kind=kind, state__in=XTaskRun.ACTIVE).first()
    if active is not None:
        return active, False
    run = XTaskRun.objects.create(kind=kind, requested_by=user)
    enqueue_on_commit(TASK_OF_KIND[XTaskRun.Kind(kind)], run.pk)
    return run, True


def task_run_begin(*, kind: str, run_id: int | None) -> XTaskRun | None:
    """The task's run, claimed as RUNNING: the queued one (`run_id`), or for beat a new one unless
    a run of this kind is active. None: nothing to do (another run has it, or it ended)."""
    if run_id is None:
        task_runs_expire()
        if XTaskRun.objects.filter(kind=kind, state__in=XTaskRun.ACTIVE).exists():
            return None
        run = XTaskRun.objects.create(kind=kind)
    else:
        queued = XTaskRun.objects.filter(pk=run_id, kind=kind).first()
        if queued is None or queued.state not in XTaskRun.ACTIVE:
            return None
        run = queued
    run.transition(XTaskRun.State.RUNNING)
    run.wait_until = None
    run.save(update_fields=["state", "wait_until", "updated_at"])
    return run


def task_run_progress(run: XTaskRun, *, counts: dict[str, Any], total: int | None = None) -> None:
    run.counts = counts
    if total is not None:
        run.total = total
    run.save(update_fields=["counts", "total", "updated_at"])


def task_run_end(run: XTaskRun, *, state: str, counts: dict[str, Any] | None = None, error: str = "",
                 wait_until: float | None = None) -> None:  # fmt: skip
    """DONE or FAILED (finished), or WAITING until X's reset (`wait_until`, epoch seconds)."""
    run.transition(state)
    if counts is not None:
        run.counts = counts
    run.error = error[:2000]
    run.wait_until = dt.datetime.fromtimestamp(wait_until, tz=dt.UTC) if wait_until is not None else None
    if state in (XTaskRun.State.DONE, XTaskRun.State.FAILED):
        run.finished_at = timezone.now()
    run.save(update_fields=["state", "counts", "error", "wait_until", "finished_at", "updated_at"])
