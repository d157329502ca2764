"""The X pages: the contributors' queue "From X", an X post, proposing a note, the admin "X writer"
page with "Fetch from X now". Thin: services write, selectors read."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render

from crowdnotes_site.access import AuthenticatedHttpRequest, endpoint
from crowdnotes_site.limits import limited
from notes.models import Note, Post
from notes.services import draft_job_start
from xnotes import selectors
from xnotes.forms import ProposeForm
from xnotes.services import XFlowError, eligible, proposals, runs

MANAGE = "xnotes.manage_x"
QUEUE_PAGE = 100


@endpoint(methods=["GET"], permission="notes.add_post")
def queue(request: AuthenticatedHttpRequest) -> HttpResponse:
    page = request.GET.get("page", "1")
    number = int(page) if page.isdigit() and 0 < int(page) <= 10_000 else 1
    rows = list(selectors.awaiting_note()[(number - 1) * QUEUE_PAGE : number * QUEUE_PAGE + 1])
    context = {
        "x": selectors.x_status(),
        "posts": rows[:QUEUE_PAGE],
        "page": number,
        "has_next": len(rows) > QUEUE_PAGE,
        "unclassified": selectors.unclassified_count(),
    }
    return render(request, "xnotes/queue.html", context)


@endpoint(methods=["GET", "POST"], permission="notes.add_post")
@limited("x_write")
def post(request: AuthenticatedHttpRequest, post_id: int) -> HttpResponse:
    """An X post with its context, media and suggested sources; POST starts a note with the
    suggested sources added for review (never confirmed for the contributor)."""
    the_post = get_object_or_404(Post, pk=post_id)
    xpost = selectors.xpost_for(the_post)
    if request.method == "POST":
        if the_post.text_missing_reason():
            return redirect(f"/contribute/?post={the_post.pk}")
        urls = list(xpost.suggested_source_links) if xpost else []
        job, _, added, _ = draft_job_start(post=the_post, user=request.user, urls=urls)
        if added:
            messages.info(
                request, f"{len(added)} source{'s' if len(added) != 1 else ''} suggested on X added for you to review."
            )
        return redirect("draft_detail", job_id=job.pk)
    return render(request, "xnotes/post.html", {"x": selectors.x_status(), "post": the_post, "xpost": xpost})


@endpoint(methods=["GET", "POST"], permission="xnotes.propose_xnote")
def propose(request: AuthenticatedHttpRequest, note_id: int) -> HttpResponse:
    note = get_object_or_404(Note.objects.select_related("post"), pk=note_id)
    view = selectors.proposal_view(note=note, user=request.user)
    suggestion = selectors.suggested_choice(note)
    initial = {"classification": suggestion.classification, "tags": suggestion.tags}
    form = ProposeForm(request.POST if request.method == "POST" else None, initial=initial)
    x = selectors.x_status()
    if request.method == "POST" and x.configured and form.is_valid():
        try:
            _, created = proposals.proposal_request(
                note=note, user=request.user, classification=form.cleaned_data["classification"],
                tags=form.cleaned_data["tags"],
            )  # fmt: skip
        except XFlowError as exc:
            form.add_error(None, str(exc))
        else:
            if created:
                messages.info(request, "Queued: the note is being proposed to X.")
            else:
                messages.info(request, "This post was already proposed to X; nothing new was sent.")
            return redirect("xnotes:propose", note_id=note.pk)
    context = {
        "x": x, "note": note, "view": view, "form": form, "text": proposals.x_note_text(note),
        "trustworthy": proposals.trustworthy_sources(note), "quota": proposals.quota(), "suggestion": suggestion,
        "evaluation": selectors.evaluation_for(post=note.post, text=note.text),
        "poll_seconds": selectors.POLL_SECONDS if view.proposal and view.proposal.state in ("queued", "sending", "uncertain") else 0,
    }  # fmt: skip
    if request.htmx and request.method == "GET":
        return render(request, "xnotes/propose.html#status", context)
    return render(request, "xnotes/propose.html", context)


@endpoint(methods=["GET"], permission=MANAGE)
def writer(request: AuthenticatedHttpRequest) -> HttpResponse:
    page = selectors.writer_page()
    if request.htmx:
        return render(request, "xnotes/writer.html#live", {"page": page})
    return render(request, "xnotes/writer.html", {"page": page})


@endpoint(methods=["POST"], permission=MANAGE)
def fetch_now(request: AuthenticatedHttpRequest) -> HttpResponse:
    if not selectors.x_status().configured:
        messages.error(request, "X is not connected: set the X API credentials first (see below).")
        return redirect("xnotes:writer")
    _, created = eligible.fetch_run_request(user=request.user)
    if not created:
        messages.info(request, "A fetch from X is already running; its progress is below.")
    if request.htmx:
        return render(request, "xnotes/writer.html#live", {"page": selectors.writer_page()})
    return redirect("xnotes:writer")


@endpoint(methods=["POST"], permission=MANAGE)
def run_now(request: AuthenticatedHttpRequest, kind: str) -> HttpResponse:
    """The writer page's buttons "Fill imported posts' text now" and "Follow notes back now": a run is
    recorded and its task queued (a worker asks X, within the shared request budget); no X call here."""
    if not selectors.x_status().configured:
        messages.error(request, "X is not connected: set the X API credentials first (see below).")
        return redirect("xnotes:writer")
    run, created = runs.task_run_request(kind=kind, user=request.user)
    if not created:
        messages.info(request, f"{run.get_kind_display()} is already running; its progress is below.")
    if request.htmx:
        return render(request, "xnotes/writer.html#live", {"page": selectors.writer_page()})
    return redirect("xnotes:writer")
