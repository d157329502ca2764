from __future__ import annotations

import hashlib
import re
from datetime import datetime

from django.contrib.auth.models import AbstractBaseUser, Group
from django.db import transaction
from django.utils import timezone

from evidence.models import Snippet
from notes.models import DraftJob, Note, NoteStatusChange, Participant, Post


def normalize_post_text(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().casefold()


def post_text_hash(text: str) -> str:
    return hashlib.sha256(normalize_post_text(text).encode()).hexdigest()


def participant_for_user(*, user: AbstractBaseUser) -> Participant:
    """The scoring identity of an app user, created on first use."""
    participant, _ = Participant.objects.get_or_create(user=user, defaults={"external_id": f"user-{user.pk}"})
    return participant


@transaction.atomic
def user_signup(*, username: str, password: str, email: str, roles: list[str]) -> AbstractBaseUser:
    """Create an account in the chosen roles (Contributor and/or Rater)."""
    from django.contrib.auth import get_user_model

    user = get_user_model().objects.create_user(username=username, password=password, email=email)
    user.groups.set(Group.objects.filter(name__in=roles))
    participant_for_user(user=user)
    return user


@transaction.atomic
def post_create(
    *,
    text: str,
    flagged_by: AbstractBaseUser | None = None,
    source_url: str = "",
    author_handle: str = "",
    **extra: object,
) -> Post:
    return Post.objects.create(
        text=text,
        text_hash=post_text_hash(text),
        flagged_by=flagged_by,
        source_url=source_url,
        author_handle=author_handle,
        **extra,
    )


# --- Contributor flow: flag a post, gather evidence, confirm snippets, draft, submit ---------------


class FlowError(Exception):
    """A contributor action that is not allowed in the current state; the message is for the user."""


def post_flag(
    *,
    text: str,
    user: AbstractBaseUser,
    source_url: str = "",
    author_handle: str = "",
    posted_at: datetime | None = None,
) -> tuple[Post, bool]:
    """Flag a post, or return the existing one when the same post was flagged before."""
    duplicate = Post.objects.filter(text_hash=post_text_hash(text)).order_by("created_at").first()
    if duplicate is None and source_url:
        duplicate = Post.objects.filter(source_url=source_url).order_by("created_at").first()
    if duplicate is not None:
        return duplicate, False
    post = post_create(
        text=text, flagged_by=user, source_url=source_url, author_handle=author_handle, posted_at=posted_at
    )
    return post, True


def _enqueue_evidence(snippet_ids: list[int]) -> None:
    from evidence.tasks import snippet_process

    for snippet_id in snippet_ids:
        transaction.on_commit(lambda sid=snippet_id: snippet_process.delay(sid))  # type: ignore[misc]


def _add_snippets(job: DraftJob, urls: list[str]) -> list[Snippet]:
    start = job.snippets.count()
    snippets = [
        Snippet.objects.create(post=job.post, draft_job=job, url=url, position=start + i) for i, url in enumerate(urls)
    ]
    _enqueue_evidence([s.pk for s in snippets])
    return snippets


@transaction.atomic
def draft_job_start(*, post: Post, user: AbstractBaseUser, urls: list[str]) -> DraftJob:
    """Open a draft for `post` and start fetching each evidence URL in the background."""
    job = DraftJob.objects.create(post=post, contributor=user, mode=DraftJob.Mode.AUGMENTATION)
    _add_snippets(job, urls)
    return job


@transaction.atomic
def draft_job_add_urls(*, job: DraftJob, urls: list[str]) -> list[Snippet]:
    if job.state == DraftJob.State.SUBMITTED:
        raise FlowError("This note was already submitted.")
    return _add_snippets(job, urls)


def passage_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@transaction.atomic
def snippet_review(*, snippet: Snippet, user: AbstractBaseUser, confirmed: bool) -> Snippet:
    """Record that the contributor read the passage and confirmed (or rejected) it as support."""
    if snippet.state != Snippet.State.READY or snippet.passage is None:
        raise FlowError("This source has no passage to review yet.")
    if snippet.draft_job and snippet.draft_job.state == DraftJob.State.SUBMITTED:
        raise FlowError("This note was already submitted.")
    snippet.confirmation = Snippet.Confirmation.CONFIRMED if confirmed else Snippet.Confirmation.REJECTED
    snippet.confirmed_by = user
    snippet.confirmed_at = timezone.now()
    snippet.confirmed_text_hash = passage_hash(snippet.passage.text)
    snippet.save(update_fields=["confirmation", "confirmed_by", "confirmed_at", "confirmed_text_hash", "updated_at"])
    return snippet


@transaction.atomic
def snippet_retry(*, snippet: Snippet) -> Snippet:
    """Fetch a failed source again. Its review starts over: the evidence may change."""
    Snippet.objects.filter(pk=snippet.pk).update(
        state=Snippet.State.QUEUED,
        error_code="",
        error_message="",
        passage=None,
        similarity=None,
        confirmation=Snippet.Confirmation.PENDING,
        confirmed_by=None,
        confirmed_at=None,
        confirmed_text_hash="",
        updated_at=timezone.now(),
    )
    _enqueue_evidence([snippet.pk])
    snippet.refresh_from_db()
    return snippet


@transaction.atomic
def snippet_remove(*, snippet: Snippet) -> None:
    if snippet.draft_job and snippet.draft_job.state == DraftJob.State.SUBMITTED:
        raise FlowError("This note was already submitted.")
    snippet.delete()


@transaction.atomic
def draft_job_request_draft(*, job: DraftJob) -> DraftJob:
    """Ask the drafter (LLM or offline baseline) for a draft from the confirmed snippets only."""
    from notes.selectors import draft_gate

    gate = draft_gate(job=job)
    if not gate.can_draft:
        raise FlowError(" ".join(gate.reasons))
    claimed = DraftJob.objects.filter(pk=job.pk).exclude(state__in=[DraftJob.State.DRAFTING, DraftJob.State.SUBMITTED])
    if not claimed.update(state=DraftJob.State.DRAFTING, progress=0, error="", updated_at=timezone.now()):
        raise FlowError("A draft is already being written, or the note was submitted.")
    from notes.tasks import draft_generate

    transaction.on_commit(lambda: draft_generate.delay(job.pk))
    job.refresh_from_db()
    return job


def draft_job_generate(*, job_id: int) -> DraftJob:
    """Write the draft (runs in a worker). An unreachable LLM leaves a visible, retryable failure."""
    from notes import drafting
    from notes.selectors import draft_gate

    job = DraftJob.objects.select_related("post").get(pk=job_id)
    if job.state != DraftJob.State.DRAFTING:
        return job  # already done (a duplicate delivery) or cancelled
    confirmed = draft_gate(job=job).confirmed
    try:
        draft = drafting.draft_note(post=job.post.text, snippets=[(s.url, s.passage.text) for s in confirmed])
    except drafting.DraftError as exc:
        DraftJob.objects.filter(pk=job.pk, state=DraftJob.State.DRAFTING).update(
            state=DraftJob.State.FAILED, error=str(exc), updated_at=timezone.now()
        )
        job.refresh_from_db()
        return job
    DraftJob.objects.filter(pk=job.pk, state=DraftJob.State.DRAFTING).update(
        state=DraftJob.State.DRAFTED,
        draft_text=draft.text,
        draft_method=draft.method,
        draft_provenance=draft.provenance,
        progress=100,
        updated_at=timezone.now(),
    )
    job.refresh_from_db()
    return job


@transaction.atomic
def note_submit(*, job: DraftJob, user: AbstractBaseUser, text: str) -> Note:
    """Record the contributor's note with its evidence, confirmations and starting draft.

    Submitting queues the judges; nothing is published automatically.
    """
    from notes.selectors import draft_gate

    job = DraftJob.objects.select_for_update().get(pk=job.pk)
    if job.state == DraftJob.State.SUBMITTED:
        raise FlowError("This note was already submitted.")
    gate = draft_gate(job=job)
    if not gate.can_draft:
        raise FlowError(" ".join(gate.reasons))
    urls = [s.url for s in gate.confirmed]
    note = Note.objects.create(
        post=job.post,
        author=participant_for_user(user=user),
        text=text,
        origin=Note.Origin.AUGMENTED if job.draft_text else Note.Origin.HUMAN,
        evidence_urls=urls,
        draft_job=job,
        draft_text=job.draft_text,
    )
    job.snippets.filter(pk__in=[s.pk for s in gate.confirmed]).update(note=note)
    job.state = DraftJob.State.SUBMITTED
    job.save(update_fields=["state", "updated_at"])
    NoteStatusChange.objects.create(note=note, status=note.status)
    _enqueue_judges(note)
    return note


def _enqueue_judges(note: Note) -> None:
    try:
        from judging.services import judge_run_enqueue
    except ImportError:  # the judges are optional for the contributor flow itself
        return
    judge_run_enqueue(note=note)
