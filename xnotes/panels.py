"""The X sections xnotes adds to notes' and judging's pages (crowdnotes_site/panels.py slots)."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from django.utils import timezone

from crowdnotes_site.panels import Panel, register
from xnotes.models import XProposal, XWrittenNote
from xnotes.services import evaluator

# How long the pre-flight polls for X's evaluator: past one rate-limit window (15 minutes), after
# which the task that asks X has waited for a reset and answered, or will not.
PREFLIGHT_WAIT_S = 20 * 60


def _user(request: HttpRequest | None) -> Any:
    return getattr(request, "user", None)


def note_detail(request: HttpRequest | None, *, note: Any) -> Panel | None:
    """The note page: its proposal to X (state, X id, mode, time, evaluator outcomes), or the
    link to propose it for admins and X writers."""
    # Deferred (here and below): register_all() runs in every process's django.setup(), and the
    # selectors import the proposal rules and with them evidence matching (numpy).
    from xnotes import selectors

    x_id = evaluator.x_post_id(note.post)
    proposal = XProposal.objects.filter(post_id=note.post_id).first()
    if not x_id and proposal is None:
        return None
    user = _user(request)
    view = selectors.proposal_view(note=note, user=user)
    may = bool(user and user.has_perm("xnotes.propose_xnote"))
    return Panel("xnotes/_panel_note.html", {"note": note, "view": view, "may_propose": may, "x": selectors.x_status()})


def my_notes_item(request: HttpRequest | None, *, note: Any) -> Panel | None:
    proposal = XProposal.objects.filter(note_id=note.pk).first()
    if proposal is None:
        return None
    written = XWrittenNote.objects.filter(x_note_id=proposal.x_note_id).first() if proposal.x_note_id else None
    return Panel("xnotes/_panel_my_notes_item.html", {"p": proposal, "written": written})


def post_detail(request: HttpRequest | None, *, post: Any) -> Panel | None:
    from xnotes import selectors  # deferred: see note_detail

    xpost = selectors.xpost_for(post)
    if xpost is None:
        return None
    return Panel("xnotes/_xpost.html", {"xpost": xpost})


def preflight(request: HttpRequest | None, *, check: Any) -> Panel | None:
    """Beside the judges' verdicts: X's ClaimOpinion score of the same text (asked by the
    task judging queues for it, xnotes.tasks.x_preflight_evaluate). Pending (the pre-flight keeps polling) until
    X answers, for at most PREFLIGHT_WAIT_S after the pre-flight was asked."""
    from xnotes import selectors  # deferred: see note_detail

    job = check.draft_job
    if job is None or not evaluator.x_post_id(job.post):
        return None
    x = selectors.x_status()
    evaluation = evaluator.evaluation_cached(post=job.post, text=check.note_text) if x.configured else None
    answered = evaluation is not None and (evaluation.claim_opinion_score is not None or bool(evaluation.error))
    waiting = x.configured and not answered
    overdue = waiting and (timezone.now() - check.created_at).total_seconds() > PREFLIGHT_WAIT_S
    context = {"x": x, "evaluation": evaluation, "check": check, "overdue": overdue,
               "wait_minutes": PREFLIGHT_WAIT_S // 60}  # fmt: skip
    return Panel("xnotes/_panel_preflight.html", context, pending=waiting and not overdue)


def register_all() -> None:
    register("note_detail", note_detail)
    register("my_notes_item", my_notes_item)
    register("post_detail", post_detail)
    register("preflight", preflight)
