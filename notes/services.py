from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.contrib.auth.models import Group
from django.db import IntegrityError, connection, transaction
from django.db.models import F, Q
from django.utils import timezone

from crowdnotes_site.leases import heartbeat, lease_deadline, sweep
from crowdnotes_site.lib import xids
from crowdnotes_site.lib.hashing import sha256_hex
from crowdnotes_site.lib.llm import drafting
from crowdnotes_site.lib.llm.steps.common import Evidence
from crowdnotes_site.llm import llm_client
from crowdnotes_site.queue import enqueue_on_commit
from crowdnotes_site.transitions import TransitionRefused, transition_rows
from evidence import local_copies, snippets
from evidence.models import Snippet
from evidence.search.services import AutomationError, automation_run_start
from judging.selectors import unjudgeable_reason
from judging.services import judge_run_request, preflight_request
from notes import selectors
from notes.models import (
    TAGS_FOR_LEVEL,
    DraftJob,
    Note,
    NoteStatusChange,
    NoteVersion,
    Participant,
    Post,
    Rating,
    Suggestion,
)
from notes.selectors import draft_gate

if TYPE_CHECKING:
    from django.contrib.auth.models import User


def normalize_post_text(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().casefold()


def post_text_hash(text: str) -> str:
    return sha256_hex(normalize_post_text(text))


def participant_for_user(*, user: User) -> Participant:
    """The scoring identity of an app user, created on first use."""
    participant, _ = Participant.objects.get_or_create(user=user, defaults={"external_id": f"user-{user.pk}"})
    return participant


class UsernameTaken(Exception):
    """Another sign-up took this username (in any letter case) first, possibly a moment ago."""


USERNAME_TAKEN = "A user with that username already exists."


def user_signup(*, username: str, password: str, email: str, roles: list[str]) -> User:
    """Create an account in the chosen roles (Contributor and/or Rater). Concurrent sign-ups of one
    name (in any letter case) serialize on an advisory lock, and the later ones get UsernameTaken
    (never a duplicate-key error); the form's own check only sees accounts committed before it."""
    from django.contrib.auth import get_user_model

    model = get_user_model()
    try:
        with transaction.atomic():
            if connection.vendor == "postgresql":
                with connection.cursor() as cursor:
                    cursor.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 11))", [username.casefold()])
            if model.objects.filter(username__iexact=username).exists():
                raise UsernameTaken(username)
            user = model.objects.create_user(username=username, password=password, email=email)
            user.groups.set(Group.objects.filter(name__in=roles))
            participant_for_user(user=user)
    except IntegrityError as error:  # a writer that bypassed the lock (the admin, a shell)
        raise UsernameTaken(username) from error
    return user


@transaction.atomic
def post_create(
    *,
    text: str,
    flagged_by: User | None = None,
    source_url: str = "",
    author_handle: str = "",
    **extra: object,
) -> Post:
    """Create a post and queue its health-topic classification (only when it has text: an
    imported placeholder is never classified)."""
    post = Post.objects.create(
        text=text,
        text_hash=post_text_hash(text),
        flagged_by=flagged_by,
        source_url=source_url,
        author_handle=author_handle,
        **extra,
    )
    _classify_on_commit(post)
    return post


def _classify_on_commit(post: Post) -> None:
    if settings.TOPICS_CLASSIFY_NEW_POSTS and post.text_available and post.text.strip():
        # In the flagger's fair turn on the llm queue; one call per flagged post (itself rate-limited).
        enqueue_on_commit("notes.tasks.topic_classify_post", post.pk, owner=post.flagged_by_id)


@transaction.atomic
def post_text_supply(*, post: Post, text: str) -> Post:
    """A contributor pastes the text of a post imported without it: the placeholder is replaced
    and the post can be drafted, judged and classified from now on. When another post already
    has this text, that post is the one flagged (returned) and the imported one is left as it was."""
    duplicate = Post.objects.filter(text_hash=post_text_hash(text)).exclude(pk=post.pk).order_by("created_at").first()
    if duplicate is not None:
        return duplicate
    updated = Post.objects.filter(pk=post.pk, text_available=False).update(
        text=text, text_hash=post_text_hash(text), text_available=True
    )
    post.refresh_from_db()
    if updated:
        _classify_on_commit(post)
    return post


# --- Contributor flow: flag a post, gather evidence, confirm snippets, draft, submit ---------------


class FlowError(Exception):
    """A contributor action that is not allowed in the current state; the message is for the user."""


def _closed(job: DraftJob, doing: str) -> FlowError:
    """Why `doing` is refused on a draft that is no longer open (DraftJob.TRANSITIONS: nothing
    follows submitted or discarded)."""
    if job.state == DraftJob.State.SUBMITTED:
        return FlowError(f"This note was already submitted; it cannot be {doing}.")
    if job.state == DraftJob.State.DISCARDED:
        return FlowError(f"This draft was discarded; it cannot be {doing}.")
    return FlowError(f"This draft is {job.get_state_display().lower()}; it cannot be {doing} now.")


@dataclass(frozen=True)
class Flag:
    """What flagging a post found or created."""

    post: Post
    created: bool  # False: a post with the same (normalised) text was flagged before
    # An earlier post with the same link but a different text, kept apart: the page says so.
    same_link: Post | None = None


def post_flag(
    *,
    text: str,
    user: User,
    source_url: str = "",
    author_handle: str = "",
    posted_at: datetime | None = None,
) -> Flag:
    """Flag a post, or find the one flagged before with the same text (case and whitespace aside).

    A post is never matched on its link alone: when a post with this `source_url` was flagged
    with a different text, the text this contributor pasted becomes a post of its own (and
    `same_link` names the earlier one), so their drafts, evidence matching and judges use the
    words they pasted, never someone else's. The one exception fills a gap rather than replacing
    words: a post imported with this link but without its text gets the pasted text."""
    duplicate = Post.objects.filter(text_hash=post_text_hash(text)).order_by("created_at").first()
    if duplicate is not None:
        return Flag(duplicate, created=False)
    same_link = None
    if source_url:
        linked = Post.objects.filter(source_url=source_url).order_by("created_at")
        imported = linked.filter(text_available=False).first()
        if imported is not None:
            supplied = post_text_supply(post=imported, text=text)
            if supplied.text_hash == post_text_hash(text):  # not supplied by someone else meanwhile
                return Flag(supplied, created=False)
        same_link = linked.exclude(text_available=False).first() or linked.first()
    post = post_create(
        text=text, flagged_by=user, source_url=source_url, author_handle=author_handle, posted_at=posted_at
    )
    return Flag(post, created=True, same_link=same_link)


def _lock_post_text(text: str) -> None:
    """Serialize flags of the same post text (PostgreSQL advisory lock until the transaction ends),
    so two identical concurrent contributions find each other instead of both creating rows."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 7))", [post_text_hash(text)])


def post_for_x_id(*, x_id: str, user: User) -> tuple[Post, bool]:
    """The post with this X id: one imported or fetched with it, else one flagged with a link to
    it, else a new post without text (created, True), which X's post lookup (xnotes
    `x_hydrate_posts`) or a contributor pasting its text fills in. X is not asked here."""
    placeholder = f"Post {x_id} on X (requested by its link; its text is not known here yet)"
    _lock_post_text(placeholder)  # two requests of one new id make one post
    post = Post.objects.filter(external_id=x_id).order_by("-text_available", "created_at").first()
    if post is not None:
        return post, False
    for linked in Post.objects.filter(source_url__contains=f"/status/{x_id}").order_by("created_at"):
        if xids.post_id_from_reference(linked.source_url) == x_id:
            return linked, False
    post = Post.objects.create(
        text=placeholder, text_hash=post_text_hash(placeholder), text_available=False, external_id=x_id,
        source_url=f"https://x.com/i/status/{x_id}", posted_at=xids.x_id_time(x_id), flagged_by=user,
    )  # fmt: skip
    return post, True


@dataclass(frozen=True)
class Contribution:
    """What a contribution did, so the page can say it truthfully."""

    job: DraftJob
    post_created: bool  # False: the post was flagged before
    same_link: Post | None  # an earlier post with this link and another text (see post_flag)
    job_created: bool  # False: the contributor's open draft on this post was reused
    added: list[Snippet]  # the URLs attached now
    skipped: list[str]  # the URLs the open draft already had


@transaction.atomic
def contribution_submit(
    *,
    text: str,
    user: User,
    urls: list[str],
    source_url: str = "",
    author_handle: str = "",
    posted_at: datetime | None = None,
    find_evidence: bool = False,
    imported_post: Post | None = None,
) -> Contribution:
    """Flag a post (or find it) and add the evidence to the contributor's one open draft on it.

    Idempotent: repeating it (a retry, a double click, going back and flagging again) adds to the
    same draft job instead of opening another; concurrent identical requests serialize on the
    post text, and the database allows one open draft job per (contributor, post)."""
    _lock_post_text(text)
    if imported_post is not None and imported_post.text_missing_reason():
        # "Write a note" on a post imported without its text: the contributor supplies the text.
        flag = Flag(post_text_supply(post=imported_post, text=text), created=False)
    else:
        flag = post_flag(text=text, user=user, source_url=source_url, author_handle=author_handle, posted_at=posted_at)
    job, job_created, added, skipped = draft_job_start(
        post=flag.post, user=user, urls=urls, find_evidence=find_evidence
    )
    return Contribution(
        job=job,
        post_created=flag.created,
        same_link=flag.same_link,
        job_created=job_created,
        added=added,
        skipped=skipped,
    )


def draft_job_open(*, post: Post, user: User) -> DraftJob | None:
    """The contributor's open (not submitted, not discarded) draft job on the post, locked."""
    return (
        DraftJob.objects.select_for_update()
        .filter(post=post, contributor=user)
        .exclude(state__in=DraftJob.CLOSED_STATES)
        .first()
    )


@transaction.atomic
def draft_job_start(
    *, post: Post, user: User, urls: list[str], find_evidence: bool = False
) -> tuple[DraftJob, bool, list[Snippet], list[str]]:
    """Open a draft for `post` (or reuse the contributor's open one) and start fetching each new
    evidence URL in the background; with find_evidence, CrowdNotes also searches for evidence and
    proposes sources for review. Returns (job, created, snippets added, URLs it already had)."""
    job = draft_job_open(post=post, user=user)
    created = job is None
    if job is None:
        mode = DraftJob.Mode.AUTOMATION if find_evidence else DraftJob.Mode.AUGMENTATION
        try:
            with transaction.atomic():
                job = DraftJob.objects.create(post=post, contributor=user, mode=mode)
        except IntegrityError:
            # A concurrent identical request opened it first (one_open_draft_job_per_contributor_post,
            # checked once that one committed): add to that draft, as a later repeat would.
            job = draft_job_open(post=post, user=user)
            if job is None:
                raise
            created = False
    added = snippets.snippets_add(job=job, urls=urls)
    new = {snippet.url for snippet in added}
    skipped = [u for u in urls if local_copies.real_address(u) not in new]
    if find_evidence:
        try:
            automation_run_start(job=job)
        except AutomationError:
            pass  # already looking (one run at a time) or nothing to search from: the draft page says why
    return job, created, added, skipped


@transaction.atomic
def draft_job_discard(*, job: DraftJob) -> DraftJob:
    """The owner gives up on an unsubmitted draft (e.g. one orphaned by an outage): it leaves
    "My notes", its queued work is dropped, and a new contribution on the post starts afresh."""
    locked = DraftJob.objects.select_for_update().get(pk=job.pk)
    try:
        locked.transition(DraftJob.State.DISCARDED)
    except TransitionRefused as exc:
        raise _closed(locked, "discarded") from exc
    locked.lease_until = None
    locked.save(update_fields=["state", "lease_until", "updated_at"])
    transition_rows(
        Snippet.objects.filter(draft_job=locked, state=Snippet.State.QUEUED),
        Snippet.State.FAILED, error_code="discarded", error_message="the draft was discarded",
    )  # fmt: skip
    return locked


@transaction.atomic
def draft_job_add_urls(*, job: DraftJob, urls: list[str]) -> list[Snippet]:
    job = DraftJob.objects.select_for_update().get(pk=job.pk)
    if DraftJob.TRANSITIONS.final(job.state):  # evidence changes only while the draft is open
        raise _closed(job, "given more evidence")
    return snippets.snippets_add(job=job, urls=urls)


@transaction.atomic
def draft_job_request_draft(*, job: DraftJob, seen_round: int | None = None) -> DraftJob:
    """Ask the drafter (LLM or offline baseline) for a draft from the confirmed snippets only.

    `seen_round` is the draft round the contributor's page showed: two requests made from the
    same page (a double click, two tabs) queue one draft task; the second is told so."""
    gate = draft_gate(job=job)
    if not gate.can_draft:
        raise FlowError(" ".join(gate.reasons))
    claimed = DraftJob.objects.filter(pk=job.pk)
    if seen_round is not None:
        claimed = claimed.filter(draft_round=seen_round)
    if not transition_rows(  # not while a draft is being written, nor once the note was submitted or discarded
        claimed,
        DraftJob.State.DRAFTING,
        progress=0,
        error="",
        draft_round=F("draft_round") + 1,
        lease_until=None,
        updated_at=timezone.now(),
    ):
        raise FlowError("This draft was already requested (or the note was submitted); showing its current state.")
    enqueue_on_commit("notes.tasks.draft_generate", job.pk, owner=job.contributor_id)
    job.refresh_from_db()
    return job


def draft_job_generate(*, job_id: int) -> DraftJob:
    """Write the draft (runs in a worker). An unreachable LLM leaves a visible, retryable failure."""

    now = timezone.now()
    unclaimed = Q(lease_until__isnull=True) | Q(lease_until__lt=now)
    claimed = DraftJob.objects.filter(unclaimed, pk=job_id, state=DraftJob.State.DRAFTING).update(
        lease_until=lease_deadline()
    )
    job = DraftJob.objects.select_related("post").get(pk=job_id)
    if not claimed:
        return job  # done, cancelled, or another worker holds a live lease (a duplicate delivery)
    with heartbeat(DraftJob, job_id):
        return _draft_claimed(job)


@sweep("drafts")
def draft_jobs_sweep() -> list[int]:
    """Re-queue drafts whose worker stopped renewing its lease (beat: work_sweep)."""
    requeued: list[int] = []
    expired = DraftJob.objects.filter(state=DraftJob.State.DRAFTING, lease_until__lt=timezone.now())
    for job_id in expired.values_list("pk", flat=True):
        with transaction.atomic():
            if DraftJob.objects.filter(pk=job_id, state=DraftJob.State.DRAFTING, lease_until__lt=timezone.now()).update(
                lease_until=None
            ):
                owner = DraftJob.objects.filter(pk=job_id).values_list("contributor_id", flat=True).first()
                enqueue_on_commit("notes.tasks.draft_generate", job_id, owner=owner)
                requeued.append(job_id)
    return requeued


def _draft_claimed(job: DraftJob) -> DraftJob:
    confirmed = draft_gate(job=job).confirmed
    try:
        missing = job.post.text_missing_reason()
        if missing:  # never draft from a placeholder (the gate refuses it; a queued task re-checks)
            raise drafting.DraftError(f"No draft: {missing}.")
        # Every confirmed snippet has a passage (snippet_is_confirmed checks it); the filter narrows the type.
        evidence = [(s.url, s.passage.text) for s in confirmed if s.passage is not None]
        client = llm_client(owner=job.contributor_id)
        draft = drafting.draft_note(post=job.post.text, snippets=evidence, client=client)
    except drafting.DraftError as exc:
        transition_rows(
            DraftJob.objects.filter(pk=job.pk, state=DraftJob.State.DRAFTING),
            DraftJob.State.FAILED, error=str(exc), lease_until=None, updated_at=timezone.now(),
        )  # fmt: skip
        job.refresh_from_db()
        return job
    transition_rows(
        DraftJob.objects.filter(pk=job.pk, state=DraftJob.State.DRAFTING),
        DraftJob.State.DRAFTED,
        draft_text=draft.text,
        # The contributor asked for this new draft: the editor shows it (their request replaced the text).
        edited_text="",
        edited_at=None,
        draft_method=draft.method,
        draft_provenance=draft.provenance,
        progress=100,
        lease_until=None,
        updated_at=timezone.now(),
    )
    job.refresh_from_db()
    return job


# A submitted text keeping less than this share of the machine draft (difflib ratio) is the
# contributor's own writing: the draft did not survive.
DRAFT_SURVIVAL_MIN = 0.5


def draft_survival(*, draft: str, final: str) -> float | None:
    """How much of the machine draft the final text kept: difflib's ratio on words (None: no draft)."""
    if not draft.strip():
        return None
    return difflib.SequenceMatcher(a=draft.split(), b=final.split(), autojunk=False).ratio()


def note_origin(*, confirmed: list[Snippet], survival: float | None) -> str:
    """Who chose the evidence and who wrote the text, as it happened.

    Evidence: the contributor's, CrowdNotes' proposals, or both (mixed). Text: the machine draft
    when at least DRAFT_SURVIVAL_MIN of it survived in the submitted text, else the contributor.
    human: own evidence, own words; augmented: own evidence, machine draft kept; automated:
    proposed evidence, machine draft kept; human-written with machine evidence: proposed evidence,
    own words; mixed: evidence from both (whoever wrote the text)."""
    proposed = [s for s in confirmed if s.proposed_by_id is not None]
    machine_text = survival is not None and survival >= DRAFT_SURVIVAL_MIN
    if proposed and len(proposed) < len(confirmed):
        return Note.Origin.MIXED
    if proposed:
        return Note.Origin.AUTOMATED if machine_text else Note.Origin.HUMAN_MACHINE_EVIDENCE
    return Note.Origin.AUGMENTED if machine_text else Note.Origin.HUMAN


class StaleText(FlowError):
    """Another tab (or a new machine draft) changed the draft's text after this tab loaded it."""

    def __init__(self, *, saved_text: str, saved_at: datetime | None) -> None:
        when = f" at {timezone.localtime(saved_at):%H:%M:%S}" if saved_at else ""
        super().__init__(
            f"Not saved: this draft's text was changed in another tab{when} after this page loaded it. Your text "
            "is still here; saving again replaces the other one."
        )
        self.saved_text, self.saved_at = saved_text, saved_at


def draft_text_token(job: DraftJob) -> str:
    """The version of the saved text a page was rendered with (its form sends it back with a save)."""
    return job.edited_at.isoformat() if job.edited_at else ""


def _same_text(a: str, b: str) -> bool:
    return a.split() == b.split()


def draft_text_save(*, job: DraftJob, text: str, seen: str | None = None) -> DraftJob:
    """Keep the text in the contributor's editor on the draft (autosave, "Save my text", a
    pre-flight, a failed submit), so every way back to the draft page shows it. Also on a draft
    already submitted: the losing tab of a double submit keeps its text there to copy.

    `seen` is the draft_text_token the tab's page was rendered with (None: save whatever is there).
    When the saved text changed since and is not this text, the save is refused (StaleText), so a
    tab is never told "saved" while another tab's save silently replaces it, or replaces another's."""
    now = timezone.now()
    rows = DraftJob.objects.filter(pk=job.pk)
    if seen is not None:
        try:
            rows = rows.filter(edited_at=datetime.fromisoformat(seen)) if seen else rows.filter(edited_at=None)
        except ValueError:
            rows = rows.none()
    if not rows.update(edited_text=text, edited_at=now, updated_at=now):
        current = DraftJob.objects.values("edited_text", "edited_at").get(pk=job.pk)
        if current["edited_at"] is None or not _same_text(current["edited_text"], text):
            raise StaleText(saved_text=current["edited_text"], saved_at=current["edited_at"])
        now = current["edited_at"]  # this very text, saved meanwhile (this tab's own autosave in flight)
    job.edited_text, job.edited_at = text, now
    return job


@transaction.atomic
def note_submit(*, job: DraftJob, user: User, text: str) -> Note:
    """Record the contributor's note with its evidence, confirmations and starting draft.

    Submitting queues the judges; nothing is published automatically.
    """
    job = DraftJob.objects.select_for_update().get(pk=job.pk)
    if not job.can_move_to(DraftJob.State.SUBMITTED):
        raise _closed(job, "submitted again" if job.state == DraftJob.State.SUBMITTED else "submitted")
    gate = draft_gate(job=job)
    if not gate.can_draft:
        raise FlowError(" ".join(gate.reasons))
    text = local_copies.real_addresses(text)  # a local copy's URL typed in the text: its page's real address
    survival = draft_survival(draft=job.draft_text, final=text)
    note = Note.objects.create(
        post=job.post,
        author=participant_for_user(user=user),
        text=text,
        origin=note_origin(confirmed=gate.confirmed, survival=survival),
        draft_survival=survival,
        evidence_urls=gate.urls,
        draft_job=job,
        draft_text=job.draft_text,
    )
    job.snippets.filter(pk__in=[s.pk for s in gate.confirmed]).update(note=note)
    version = NoteVersion.objects.create(
        note=note, number=1, text=text, evidence_urls=gate.urls, producer=f"user:{user.get_username()}",
        reason="the text as submitted" + (f" (from a draft by {job.draft_method})" if job.draft_method else ""),
        snippets=[{"url": s.url, "text": s.passage.text, "snippet": s.pk} for s in gate.confirmed if s.passage],
    )  # fmt: skip
    Note.objects.filter(pk=note.pk).update(current_version=version)
    note.current_version = version
    job.transition(DraftJob.State.SUBMITTED)
    # The editor's text is the note's from now on: a text saved later is one that was not submitted.
    job.edited_text, job.edited_at = text, timezone.now()
    job.save(update_fields=["state", "edited_text", "edited_at", "updated_at"])
    NoteStatusChange.objects.create(note=note, status=note.status)
    if unjudgeable_reason(note) is None:  # a post imported without text is never judged
        judge_run_request(note=note)
    return note


# --- Ratings ----------------------------------------------------------------------------


class RatingError(Exception):
    """A rating that the rules do not allow (shown to the rater as is)."""


class StaleVersionError(RatingError):
    """The rater read a version of the note that is no longer its text: the rating is not attached
    to another text than the one read."""


@transaction.atomic
def rating_submit(
    *, rater: Participant, note: Note, level: str, tags: Iterable[str] = (), read_version: int | None = None
) -> tuple[Rating, bool]:
    """Create or change this rater's one rating of the note. Returns (rating, created).

    `read_version` is the version number the rater read (the rating form carries it): when another
    version is current by the time the rating arrives, it is refused (StaleVersionError)."""
    if not note.can_be_rated_by(rater):
        raise RatingError("You cannot rate your own note.")
    if level not in TAGS_FOR_LEVEL:
        raise RatingError(f"Unknown rating level {level!r}.")
    tag_list = sorted(set(tags))
    invalid = set(tag_list) - TAGS_FOR_LEVEL[level]
    if invalid:
        raise RatingError(f"Tags not allowed for {level}: {', '.join(sorted(invalid))}.")
    # The version rated is read under the note's row lock: a revision that publishes meanwhile holds
    # it while it retires the old version's ratings, so no rating of a replaced text stays scored.
    version_id = (
        Note.objects.select_for_update(no_key=True).filter(pk=note.pk).values_list("current_version_id", flat=True)
    ).first()
    if read_version is not None:
        # A note without versions is read as its version 1.
        number = NoteVersion.objects.filter(pk=version_id or 0).values_list("number", flat=True).first() or 1
        if number != read_version:
            raise StaleVersionError(
                f"This note has a new text (version {number}) since you opened it (version {read_version}): "
                "your rating was not saved. Read the text below and rate again."
            )
    before = Rating.objects.filter(note=note, rater=rater).values_list("level", "tags").first()
    rating, created = Rating.objects.update_or_create(
        note=note, rater=rater, defaults={"level": level, "tags": tag_list, "version_id": version_id}
    )
    if before is not None and before != (level, tag_list):
        # A changed rating withdraws the suggestion made with it; a new one may follow.
        Suggestion.objects.filter(note=note, rater=rater, state=Suggestion.State.PENDING).update(
            state=Suggestion.State.WITHDRAWN, outcome_reason="the rating was changed"
        )
    if created:
        # The rating queue orders by these counters; the next scoring recounts them from the fit.
        counters: dict[str, Any] = {"num_ratings": F("num_ratings") + 1}
        if rater.rater_factor is not None:
            side = "neg_side_ratings" if rater.rater_factor < 0 else "pos_side_ratings"
            counters[side] = F(side) + 1
        Note.objects.filter(pk=note.pk).update(**counters)
    return rating, created


def note_preflight(*, job: DraftJob, gate: selectors.DraftGate, text: str, user: User) -> Any:
    """Queue the judges' verdicts on a draft before submission (advice only, decides nothing)."""
    return preflight_request(
        user=user,
        post_text=job.post.text,
        note_text=text,
        urls=gate.urls,
        snippets=[Evidence(text=s.passage.text, source=s.url) for s in gate.confirmed if s.passage],
        draft_job_id=job.pk,
    )
