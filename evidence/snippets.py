"""Snippets: one evidence URL of a draft, from queued to a reviewed passage. Services (writes)
and selectors (reads) of the Snippet model, all here.

Lifecycle: `snippets_add` (queued, a `snippet_process` task per URL) → `snippet_claim` →
`snippet_process` (evidence.pipeline: fetch → extract → match, through the shared source cache
of evidence.services) → ready or failed (error texts: evidence.errors) → `snippet_refine` (the
passages the pre-filter skipped) → the contributor's `snippet_review` (confirm/reject),
`snippet_retry` or `snippet_remove`. `snippet_is_confirmed` is what the draft gate counts.
"""

from __future__ import annotations

import logging
import time
from datetime import timedelta
from typing import TYPE_CHECKING

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from crowdnotes_site.leases import heartbeat, lease_deadline, sweep
from crowdnotes_site.lib.hashing import sha256_hex
from crowdnotes_site.models import OutboxMessage
from crowdnotes_site.queue import enqueue_on_commit, outbox_key
from crowdnotes_site.transitions import transition_rows
from evidence import local_copies, pipeline, services
from evidence.errors import ExtractionError, FetchError
from evidence.matching import Matcher, prerank
from evidence.models import AutomationRun, Passage, Snippet

if TYPE_CHECKING:
    from django.contrib.auth.models import User

    from notes.models import DraftJob, Post  # type hints only: evidence reaches a draft through Snippet.draft_job

log = logging.getLogger(__name__)

RUNNING = [Snippet.State.FETCHING, Snippet.State.EXTRACTING, Snippet.State.EMBEDDING]
STALE_REVIEW = "A closer passage was found for this source while you were reading: read it, then review again."


class SnippetError(Exception):
    """A snippet action that is not allowed in the current state; the message is for the user."""


class TransientEvidenceError(Exception):
    """A network failure worth retrying; the snippet was put back to queued."""


# --- Selectors ---------------------------------------------------------------------------------


def snippet_is_confirmed(snippet: Snippet) -> bool:
    """Confirmed, and the passage is still the one the contributor read."""
    return (
        snippet.confirmation == Snippet.Confirmation.CONFIRMED
        and snippet.passage is not None
        and snippet.confirmed_text_hash == sha256_hex(snippet.passage.text)
    )


def snippet_refining(snippet: Snippet) -> bool:
    """The refine is queued or running: set when it is queued, cleared when it ends (also on an
    error), and a lost worker's refine is queued again by the sweeper, so the flag is the truth."""
    return snippet.state == Snippet.State.READY and snippet.refine_pending


WAITING_STATES = (
    Snippet.State.QUEUED,
    Snippet.State.FETCHING,
    Snippet.State.EXTRACTING,
    Snippet.State.EMBEDDING,
)


def snippets_waiting_count(*, user: User) -> int:
    """Evidence pages of `user` still waiting for (or in) the CPU queue: what the per-user cap counts."""
    return Snippet.objects.filter(draft_job__contributor=user, state__in=WAITING_STATES).count()


def snippets_cap_refusal(*, user: User, adding: int) -> str | None:
    """Why `adding` more pages would pass MAX_QUEUED_EVIDENCE_PER_USER, or None when they fit."""
    cap = settings.MAX_QUEUED_EVIDENCE_PER_USER
    waiting = snippets_waiting_count(user=user) if adding else 0
    if waiting + adding <= cap:
        return None
    return (
        f"You already have {waiting} evidence page{'s' if waiting != 1 else ''} waiting to be processed, and at most "
        f"{cap} may wait at once so that everyone's pages get their turn. Add "
        f"{'at most ' + str(cap - waiting) if waiting < cap else 'more'} once those are done."
    )


def _broker_honours_priority() -> bool:
    return settings.CELERY_BROKER_URL.startswith(("redis://", "rediss://"))


def snippets_ahead(*, snippets: list[Snippet]) -> dict[int, int]:
    """For each queued snippet of `snippets`: how many sources' turns come before its own on the
    CPU queue. A turn is a first reading (a queued snippet's `snippet_process`) or one refine
    slice of a ready snippet; messages run in the broker's order: by fair priority, then first
    in (queue.py; a broker without priorities is first in, first out). The source being worked
    on now is not counted."""
    queued = [s.pk for s in snippets if s.state == Snippet.State.QUEUED]
    if not queued:
        return {}
    process, refine = "evidence.tasks.snippet_process", "evidence.tasks.snippet_refine"
    waiting = list(Snippet.objects.filter(state=Snippet.State.QUEUED).values_list("pk", flat=True))
    slices = list(
        Snippet.objects.filter(state=Snippet.State.READY, refine_pending=True, lease_until__isnull=True).values_list(
            "pk", flat=True
        )
    )
    keys = {outbox_key(process, [pk]): ("p", pk) for pk in waiting}
    keys.update({outbox_key(refine, [pk]): ("r", pk) for pk in slices})
    latest: dict[tuple[str, int], tuple[int, object]] = {}
    rows = OutboxMessage.objects.filter(key__in=list(keys)).values_list("key", "priority", "created_at")
    for key, priority, created_at in rows:
        item = keys[key]
        rank = (priority or 0) if _broker_honours_priority() else 0
        if item not in latest or created_at > latest[item][1]:  # type: ignore[operator]
            latest[item] = (rank, created_at)
    order = sorted(latest.items(), key=lambda entry: (entry[1][0], entry[1][1], entry[0][1]))
    position = {item: i for i, (item, _) in enumerate(order)}
    return {pk: position[("p", pk)] for pk in queued if ("p", pk) in position}


def snippet_in_context(*, snippet: Snippet, margin: int = 2000) -> dict[str, object]:
    """The chosen passage with the source text around it (by the passage's character offsets)."""
    source, passage = snippet.source, snippet.passage
    before = after = ""
    if source is not None and passage is not None:
        text = source.cleaned_text
        before = text[max(passage.char_start - margin, 0) : passage.char_start]
        after = text[passage.char_end : passage.char_end + margin]
    return {"snippet": snippet, "source": source, "before": before, "after": after}


# --- Contributor actions -------------------------------------------------------------------------


def _enqueue_processing(snippet_id: int, owner: int | None) -> None:
    """Queue the processing of a snippet in its contributor's fair turn of the CPU queue (queue.py)."""
    enqueue_on_commit("evidence.tasks.snippet_process", snippet_id, owner=owner)


def _enqueue_refine(snippet_id: int, owner: int | None) -> None:
    enqueue_on_commit("evidence.tasks.snippet_refine", snippet_id, owner=owner)


def _refuse_unless_allowed(snippet: Snippet, action: str) -> None:
    """Raise SnippetError unless the model's transition table allows `action` from the snippet's
    current state (read under a row lock, so a concurrent change cannot slip in between)."""
    current = Snippet.objects.select_for_update(of=("self",)).select_related("draft_job").get(pk=snippet.pk)
    refusal = current.action_refusal(action)
    if refusal:
        raise SnippetError(refusal)


@transaction.atomic
def snippets_add(*, job: DraftJob, urls: list[str]) -> list[Snippet]:
    """Attach evidence URLs to a draft, each queued for processing once the transaction commits.
    Returns the snippets added: a URL the draft already has is skipped, so a repeated request (a
    double click, a retry, a local copy's URL of a page it holds) adds nothing twice."""
    existing = set(job.snippets.values_list("url", flat=True))
    start = len(existing)
    # A local copy's URL stands for its page: stored (and later cited, categorised, sent to X) as the original.
    wanted = [url for url in dict.fromkeys(local_copies.real_address(url) for url in urls) if url not in existing]
    snippets: list[Snippet] = []
    for url in wanted:
        # get_or_create inserts in a savepoint: a concurrent add of the same URL that committed
        # first (unique_url_per_draft) is found, not raised, and this request leaves it to that one.
        snippet, created = Snippet.objects.get_or_create(
            draft_job=job, url=url, defaults={"post_id": job.post_id, "position": start + len(snippets)}
        )
        if created:
            snippets.append(snippet)
    for snippet in snippets:
        _enqueue_processing(snippet.pk, job.contributor_id)
    return snippets


@transaction.atomic
def snippet_add_for_post(*, post: Post, url: str, owner: int | None) -> Snippet:
    """A source attached to something other than a draft (a rater's suggestion): the same
    SSRF-guarded fetch, passage match and confirmation as a draft's evidence, queued on commit."""
    snippet = Snippet.objects.create(post=post, draft_job=None, url=local_copies.real_address(url))
    _enqueue_processing(snippet.pk, owner)
    return snippet


@transaction.atomic
def snippets_propose(*, job: DraftJob, run: AutomationRun, proposals: list[tuple[str, str]]) -> list[str]:
    """Add CrowdNotes' chosen sources (url, reason) to the draft's review, labelled as proposed.
    A URL the draft already has is skipped (returned), never added twice."""
    existing = set(job.snippets.values_list("url", flat=True))
    start = job.snippets.count()
    added: list[Snippet] = []
    skipped: list[str] = []
    for url, reason in proposals:
        if url in existing:
            skipped.append(url)
            continue
        existing.add(url)
        added.append(
            Snippet.objects.create(
                post=job.post, draft_job=job, url=url, position=start + len(added), proposed_by=run,
                proposal_reason=reason,
            )
        )  # fmt: skip
    for snippet in added:
        _enqueue_processing(snippet.pk, job.contributor_id)
    return skipped


@transaction.atomic
def snippet_review(*, snippet: Snippet, user: User, confirmed: bool, passage_id: int | None = None) -> Snippet:
    """Record that the contributor read the passage and confirmed (or rejected) it as support.

    passage_id is the passage the page showed. The refine task may switch a pending snippet to a
    better passage at any moment; a review of the passage that was replaced is refused, so nobody
    confirms text they did not read. The update is conditional, so it serializes with the refine's.
    """
    _refuse_unless_allowed(snippet, "confirm" if confirmed else "reject")
    if snippet.passage is None:
        raise SnippetError("This source has no passage to review yet.")
    if passage_id is not None and passage_id != snippet.passage.pk:
        raise SnippetError(STALE_REVIEW)
    now = timezone.now()
    # Conditional on the passage loaded above: a refine that swapped it since makes this update miss.
    reviewed = Snippet.objects.filter(pk=snippet.pk, passage_id=snippet.passage.pk).update(
        confirmation=Snippet.Confirmation.CONFIRMED if confirmed else Snippet.Confirmation.REJECTED,
        confirmed_by=user,
        confirmed_at=now,
        confirmed_text_hash=sha256_hex(snippet.passage.text),
        updated_at=now,
    )
    if not reviewed:
        raise SnippetError(STALE_REVIEW)
    snippet.refresh_from_db()
    return snippet


@transaction.atomic
def snippet_retry(*, snippet: Snippet) -> Snippet:
    """Fetch a failed source again. Its review starts over: the evidence may change. Allowed only
    from a failed fetch of an unsubmitted draft (Snippet.ACTIONS_FROM), and the page counts
    against the contributor's cap on waiting pages like a first request."""
    _refuse_unless_allowed(snippet, "retry")
    owner = snippet.draft_job.contributor if snippet.draft_job else None
    if owner is not None:
        refusal = snippets_cap_refusal(user=owner, adding=1)
        if refusal:
            raise SnippetError(refusal)
    transition_rows(
        Snippet.objects.filter(pk=snippet.pk, state=Snippet.State.FAILED),
        Snippet.State.QUEUED,
        error_code="",
        error_message="",
        passage=None,
        similarity=None,
        sentence_start=None,
        sentence_end=None,
        confirmation=Snippet.Confirmation.PENDING,
        confirmed_by=None,
        confirmed_at=None,
        confirmed_text_hash="",
        lease_until=None,
        refine_pending=False,
        updated_at=timezone.now(),
    )
    _enqueue_processing(snippet.pk, snippet.draft_job.contributor_id if snippet.draft_job else None)
    snippet.refresh_from_db()
    return snippet


@transaction.atomic
def snippet_remove(*, snippet: Snippet) -> None:
    _refuse_unless_allowed(snippet, "remove")
    snippet.delete()


# --- Processing (Celery: evidence.tasks) ---------------------------------------------------------


def _set_state(snippet_id: int, state: str, **fields: object) -> bool:
    """Move the snippet to `state` if its table allows it from where it is now (Snippet.TRANSITIONS);
    False when it did not move (removed meanwhile, or a lost worker's late step: another claim or the
    sweeper moved it on)."""
    if state in (Snippet.State.READY, Snippet.State.FAILED, Snippet.State.QUEUED):
        fields["lease_until"] = None  # the work is over (or handed back): nothing to sweep
    if state in (Snippet.State.FAILED, Snippet.State.QUEUED):
        fields["refine_pending"] = False  # a refine of the old result has nothing left to do
    moved = transition_rows(Snippet.objects.filter(pk=snippet_id), state, updated_at=timezone.now(), **fields)
    if not moved:
        log.info("snippet %s not moved to %s: removed, or its state no longer allows it", snippet_id, state)
    return bool(moved)


def snippet_claim(*, snippet_id: int) -> bool:
    """Compare-and-set queued -> fetching under a lease, so each snippet is processed once even if
    delivered twice. A running snippet whose lease expired belonged to a lost worker and may be
    claimed again (the sweeper also re-queues it)."""
    now = timezone.now()
    lease = lease_deadline()
    claimed = transition_rows(
        Snippet.objects.filter(pk=snippet_id, state=Snippet.State.QUEUED),
        Snippet.State.FETCHING, updated_at=now, error_code="", error_message="", lease_until=lease,
    )  # fmt: skip
    if not claimed:
        claimed = transition_rows(
            Snippet.objects.filter(pk=snippet_id, state__in=RUNNING, lease_until__lt=now),
            Snippet.State.FETCHING, updated_at=now, lease_until=lease,
        )  # fmt: skip
    return bool(claimed)


@sweep("snippets")
def snippets_sweep() -> list[int]:
    """Put snippets whose worker stopped renewing its lease back in the queue (beat: work_sweep).
    Running rows from before leases (no lease_until) count once they are older than the hard limit."""
    now = timezone.now()
    legacy = now - timedelta(seconds=settings.CELERY_TASK_TIME_LIMIT + 30)
    expired = Q(lease_until__lt=now) | Q(lease_until__isnull=True, updated_at__lt=legacy)
    requeued: list[int] = []
    rows = Snippet.objects.filter(expired, state__in=RUNNING).values_list("pk", "draft_job__contributor_id")
    for snippet_id, owner in rows:
        with transaction.atomic():
            lost = Snippet.objects.filter(expired, pk=snippet_id, state__in=RUNNING)
            if transition_rows(lost, Snippet.State.QUEUED, lease_until=None, updated_at=now):
                _enqueue_processing(snippet_id, owner)
                requeued.append(snippet_id)
    if requeued:
        log.warning("re-queued snippets of lost workers: %s", requeued)
    return requeued


@sweep("refines")
def snippet_refines_sweep() -> list[int]:
    """Queue again the refines whose worker stopped renewing the lease (beat: work_sweep), and those
    never started within the hard time limit (a lost message). A duplicate message is harmless:
    the refine claim lets one worker run it, and a finished refine clears `refine_pending`."""
    now = timezone.now()
    unstarted = now - timedelta(seconds=settings.CELERY_TASK_TIME_LIMIT + 30)
    expired = Q(lease_until__lt=now) | Q(lease_until__isnull=True, updated_at__lt=unstarted)
    pending = Q(state=Snippet.State.READY, refine_pending=True)
    requeued: list[int] = []
    for snippet_id, owner in Snippet.objects.filter(expired, pending).values_list("pk", "draft_job__contributor_id"):
        with transaction.atomic():
            if Snippet.objects.filter(expired, pending, pk=snippet_id).update(lease_until=None, updated_at=now):
                _enqueue_refine(snippet_id, owner)
                requeued.append(snippet_id)
    if requeued:
        log.warning("re-queued snippet refines of lost workers or messages: %s", requeued)
    return requeued


def snippet_fail(*, snippet_id: int, error_code: str, message: str, timings: dict[str, int] | None = None) -> None:
    """Mark a snippet failed with an error code (evidence.errors has the text the contributor reads)."""
    fields: dict[str, object] = {"error_code": error_code, "error_message": message[:2000]}
    if timings is not None:
        fields["timings_ms"] = timings
    _set_state(snippet_id, Snippet.State.FAILED, **fields)


def snippet_process(*, snippet_id: int, final_attempt: bool = True) -> None:
    """Fetch, extract, chunk, embed and match one snippet's URL, recording each stage.

    Failures end as state=failed with an error code; transient network errors raise
    TransientEvidenceError (snippet back to queued) unless this is the final attempt.
    """
    if not snippet_claim(snippet_id=snippet_id):
        log.info("snippet %s already claimed or done", snippet_id)
        return
    with heartbeat(Snippet, snippet_id):
        _process_claimed(snippet_id=snippet_id, final_attempt=final_attempt)


def _process_claimed(*, snippet_id: int, final_attempt: bool) -> None:
    snippet = Snippet.objects.select_related("post", "draft_job").filter(pk=snippet_id).first()
    if snippet is None:  # removed by the contributor meanwhile
        return
    matcher = services.get_matcher()
    run = pipeline.PipelineResult()
    timings = run.timings_ms

    def on_stage(state: str) -> None:
        if state != Snippet.State.FETCHING:  # the claim already set it
            _set_state(snippet_id, state)

    total = time.perf_counter()
    try:
        source = services.source_obtain(
            url=snippet.url, matcher=matcher, run=run, on_stage=on_stage,
            owner=snippet.draft_job.contributor_id if snippet.draft_job else None,
        )  # fmt: skip
    except FetchError as exc:
        if services.is_transient(exc) and not final_attempt:
            _set_state(
                snippet_id,
                Snippet.State.QUEUED,
                error_code=exc.error_code,
                error_message=f"retrying: {exc.message}",
                timings_ms=timings,
            )
            raise TransientEvidenceError(exc.error_code) from exc
        snippet_fail(snippet_id=snippet_id, error_code=exc.error_code, message=exc.message, timings=timings)
        return
    except ExtractionError as exc:
        snippet_fail(snippet_id=snippet_id, error_code=exc.error_code, message=exc.message, timings=timings)
        return
    _set_state(snippet_id, Snippet.State.EMBEDDING, source=source)
    passages = services.passages_for(source=source, matcher=matcher)
    try:
        result = pipeline.match(snippet.post.text, [p.text for p in passages], run, matcher=matcher)
    except ExtractionError as exc:
        snippet_fail(snippet_id=snippet_id, error_code=exc.error_code, message=exc.message, timings=timings)
        return
    services.passage_vectors_store(matcher=matcher, passages=passages, indices=result.embedded)
    chosen = passages[result.best_index]
    with pipeline.timed(timings, "sentence"):
        sentence = sentence_fields(matcher=matcher, post=snippet.post.text, passage=chosen)
    timings["total"] = int((time.perf_counter() - total) * 1000)
    refine = settings.EVIDENCE_REFINE and any(score is None for score in result.scores)
    ready = _set_state(
        snippet_id,
        Snippet.State.READY,
        source=source,
        passage=chosen,
        similarity=result.best_score,
        **sentence,
        scores=result.scores,
        timings_ms=timings,
        error_code="",
        error_message="",
        refine_pending=refine,
    )
    if ready and refine:
        _enqueue_refine(snippet_id, snippet.draft_job.contributor_id if snippet.draft_job else None)


def sentence_fields(*, matcher: Matcher, post: str, passage: Passage) -> dict[str, int | None]:
    """The Snippet fields of the passage's sentence closest to the post (Matcher.best_sentence):
    stored with the passage, in the same update, so the highlight always belongs to it."""
    found = matcher.best_sentence(post, passage.text)
    return {"sentence_start": found.start if found else None, "sentence_end": found.end if found else None}


def snippet_refine_claim(*, snippet_id: int) -> bool:
    """Compare-and-set: take a pending refine that nobody holds (or whose worker's lease expired)
    under a new lease. Exactly one of several deliveries wins."""
    now = timezone.now()
    free = Q(lease_until__isnull=True) | Q(lease_until__lt=now)
    return bool(
        Snippet.objects.filter(free, pk=snippet_id, state=Snippet.State.READY, refine_pending=True).update(
            lease_until=lease_deadline()
        )
    )


def snippet_refine(*, snippet_id: int) -> None:
    """One slice of the refine: embed at most EVIDENCE_SLICE_PASSAGES of the passages the
    pre-filter skipped (best pre-ranked first), for at most about EVIDENCE_SLICE_SECONDS (checked
    every EVIDENCE_SLICE_STEP passages), keep the best passage so far, and queue the next
    slice at the back of the queue, in the contributor's fair turn (queue.py). So a 200-passage
    document never holds a worker for minutes: every other user's next job runs between two of
    its slices. A passage the contributor already reviewed is kept; only scores change.

    Each slice runs under a lease with a heartbeat; the scores are stored at the end of every
    slice, so a lost worker's refine is re-queued by the sweeper and resumes from the last stored
    slice. `refine_pending` stays set between slices and is cleared when the last one ends (also
    on an error, so a failing refine is not retried forever)."""
    if not snippet_refine_claim(snippet_id=snippet_id):
        log.info("snippet %s refine already claimed or done", snippet_id)
        return
    more = False
    try:
        with heartbeat(Snippet, snippet_id):
            more = _refine_slice(snippet_id=snippet_id)
    finally:
        if more:
            with transaction.atomic():
                # The lease is given back with the slice; the next slice is a new message.
                if Snippet.objects.filter(pk=snippet_id, refine_pending=True).update(lease_until=None):
                    owner = Snippet.objects.filter(pk=snippet_id).values_list("draft_job__contributor_id", flat=True)
                    _enqueue_refine(snippet_id, owner.first())
        else:
            Snippet.objects.filter(pk=snippet_id, refine_pending=True).update(refine_pending=False, lease_until=None)


def refine_plan(*, scores: list[float | None], order: list[int], top_k: int) -> list[int]:
    """The passages a refine still has to embed, in the order it embeds them: those without a
    score, in pre-rank order, limited to the pre-rank's top_k when top_k > 0 (0: every passage)."""
    allowed = order[:top_k] if top_k > 0 else order
    return [i for i in allowed if scores[i] is None]


def _refine_slice(*, snippet_id: int) -> bool:
    """Embed the next slice; True when passages remain for another slice."""
    snippet = Snippet.objects.select_related("post", "source").filter(pk=snippet_id, state=Snippet.State.READY).first()
    if snippet is None or snippet.source is None:
        return False
    matcher = services.get_matcher()
    passages = services.passages_for(source=snippet.source, matcher=matcher)
    if not passages:
        return False
    started = time.perf_counter()
    texts = [p.text for p in passages]
    stored = list(snippet.scores or [])
    scores: list[float | None] = stored if len(stored) == len(passages) else [None] * len(passages)
    if None not in scores:
        return False
    order = matching_order(post=snippet.post.text, texts=texts, scores=scores, matcher=matcher)
    todo = refine_plan(scores=scores, order=order, top_k=settings.EVIDENCE_REFINE_TOP_K)
    batch = services.slice_embed(matcher=matcher, texts=texts, todo=todo, started=started)
    current = [i for i, s in enumerate(scores) if s is not None]
    best_so_far = max(current, key=lambda i: scores[i] or 0.0) if current else None
    # The slice and the best passage so far go through the same match as the first pick (its
    # embedding is cached, so it costs nothing), so both are judged by the same rule.
    subset = sorted({*batch, *([best_so_far] if best_so_far is not None else [])})
    run = pipeline.PipelineResult()
    result = pipeline.match(snippet.post.text, [texts[i] for i in subset], run, matcher=matcher, strategy="exhaustive")
    services.passage_vectors_store(matcher=matcher, passages=passages, indices=subset)
    for position, i in enumerate(subset):
        scores[i] = result.scores[position]
    best = subset[result.best_index]
    remaining = len(todo) - len(batch)
    elapsed = int((time.perf_counter() - started) * 1000)
    timings = {
        **snippet.timings_ms,
        "refine": int(snippet.timings_ms.get("refine", 0)) + elapsed,
        "refine_slices": int(snippet.timings_ms.get("refine_slices", 0)) + 1,
    }
    fields: dict[str, object] = {"scores": scores, "timings_ms": timings, "updated_at": timezone.now()}
    pending = Snippet.objects.filter(
        pk=snippet_id, state=Snippet.State.READY, confirmation=Snippet.Confirmation.PENDING
    )
    chosen = passages[best]
    sentence: dict[str, int | None] = {}
    if chosen.pk != snippet.passage_id or snippet.sentence_start is None:
        sentence = sentence_fields(matcher=matcher, post=snippet.post.text, passage=chosen)
    if not pending.update(passage=chosen, similarity=scores[best], **sentence, **fields):
        Snippet.objects.filter(pk=snippet_id, state=Snippet.State.READY).update(**fields)
    return remaining > 0


def matching_order(*, post: str, texts: list[str], scores: list[float | None], matcher: Matcher) -> list[int]:
    """Passage indices, most promising first by the matcher's cheap pre-rank (BM25 + static
    vectors), so the first slices are likely to hold the best passage. Few left: document order."""
    unscored = sum(score is None for score in scores)
    if unscored <= settings.EVIDENCE_SLICE_PASSAGES and settings.EVIDENCE_REFINE_TOP_K == 0:
        return list(range(len(texts)))
    pre = prerank(matcher.model, matcher.config.model_name, post, texts, matcher.config.cache_dir)
    return sorted(range(len(texts)), key=lambda i: (-pre[i], i))
