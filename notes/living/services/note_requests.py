"""Note requests: people ask for a note on a post (or on a post on X, by its id); a writer's request
starts a draft."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from django.conf import settings
from django.db import transaction

from evidence.search.services import AutomationError, automation_run_start
from notes.models import DraftJob, NoteRequest, Post
from notes.services import draft_job_start, post_for_x_id

if TYPE_CHECKING:
    from django.contrib.auth.models import User


logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class RequestResult:
    request: NoteRequest
    created: bool
    count: int
    started_draft: DraftJob | None


@transaction.atomic
def note_request_create(*, post: Post, user: User, reason: str = "") -> RequestResult:
    """Record the user's request for a note on the post (once per user and post). When the post's
    count passes NOTE_REQUEST_AUTO_DRAFT_THRESHOLD (and no request started a draft before), a draft
    with "find evidence for me" is started, through the queue, for this requester if they may
    write notes, else for the earliest requester who may."""
    Post.objects.select_for_update().filter(pk=post.pk).first()  # serialize requests of one post
    request, created = NoteRequest.objects.get_or_create(post=post, user=user, defaults={"reason": reason[:500]})
    count = NoteRequest.objects.filter(post=post).count()
    started = None
    threshold = settings.NOTE_REQUEST_AUTO_DRAFT_THRESHOLD
    already = NoteRequest.objects.filter(post=post, started_draft__isnull=False).exists()
    if created and threshold and count > threshold and not already and not post.text_missing_reason():
        writer_request = request if user.has_perm("notes.add_note") else None
        if writer_request is None:
            for r in NoteRequest.objects.filter(post=post).select_related("user").order_by("created_at"):
                if r.user.has_perm("notes.add_note"):
                    writer_request = r
                    break
        if writer_request is not None:
            started = _auto_draft(post=post, request=writer_request)
    return RequestResult(request, created, count, started)


@transaction.atomic
def note_request_by_x_id(*, x_id: str, user: User, reason: str = "") -> RequestResult:
    """A request for a note on the post on X with this id (see post_for_x_id)."""
    post, _created = post_for_x_id(x_id=x_id, user=user)
    return note_request_create(post=post, user=user, reason=reason)


def _auto_draft(*, post: Post, request: NoteRequest) -> DraftJob | None:
    job, _created, _added, _skipped = draft_job_start(post=post, user=request.user, urls=[], find_evidence=False)
    try:
        automation_run_start(job=job)
    except AutomationError as exc:
        logger.info("request draft %s: no evidence search (%s)", job.pk, exc)
    NoteRequest.objects.filter(pk=request.pk).update(started_draft=job)
    return job
