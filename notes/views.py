from __future__ import annotations

from django.contrib import messages
from django.contrib.auth import login
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.html import format_html

from crowdnotes_site import limits
from crowdnotes_site.access import PUBLIC, AuthenticatedHttpRequest, HtmxHttpRequest, endpoint
from crowdnotes_site.lib.memo import Memo
from crowdnotes_site.limits import limited
from evidence import local_copies, snippets
from evidence.models import Snippet
from evidence.search.selectors import automation_view
from evidence.search.services import AutomationError, automation_run_start
from judging.selectors import preflight_queue_waiting
from notes import selectors, services
from notes.analytics.selectors import spike_queue
from notes.forms import (
    AddEvidenceForm,
    ContributeForm,
    DraftTextForm,
    NoteForm,
    RatingForm,
    SignupForm,
)
from notes.list_filters import hidden_context, list_filters, text_context
from notes.living import selectors as living_selectors
from notes.living import services as living_services
from notes.models import DraftJob, Note, Participant, Post, Topic
from notes.supernotes import selectors as supernote_selectors
from notes.supernotes import services as supernote_services
from notes.supernotes.views import run_context


@endpoint(methods=["GET"], permission=PUBLIC)
def home(request: HttpRequest) -> HttpResponse:
    topic, page_number, text = list_filters(request)
    hidden_notes = supernote_selectors.hidden_note_ids(user=request.user)
    home = selectors.posts_for_home(page=page_number, topic=topic, text=text, hidden_notes=hidden_notes)
    # The list is the same for every visitor: rendered once per worker and content (rendering 20
    # posts with their notes cost more than the queries that read them).
    listing = _HOME_LISTS.get_or_build(
        (home.content_key(), topic, text),
        lambda: render_to_string(
            "notes/_home_posts.html",
            {"home": home, "topic": topic, "text": text, "shown": _shown_on_home(home)},
        ),
    )
    context = {"listing": listing.value, "topics": Topic.choices, "topic": topic, **text_context(request, text)}
    return render(request, "notes/home.html", {**context, **hidden_context(home.hidden_without_text)})


def _shown_on_home(home: selectors.HomePage) -> dict[int, living_selectors.ShownStatus]:
    """A note whose new version gathers ratings shows the version the crowd rated, as on its post's
    page (derived from each note's text and status, which the list's content key holds)."""
    return living_selectors.shown_statuses(notes=[note for post in home.posts for note in post.notes.all()])


_HOME_LISTS: Memo[str] = Memo(size=64)


@endpoint(methods=["GET"], permission="notes.add_post")
def spiking_posts(request: AuthenticatedHttpRequest) -> HttpResponse:
    return render(request, "notes/spiking_posts.html", {"queue": spike_queue()})


@endpoint(methods=["GET"], permission=PUBLIC)
def post_detail(request: HttpRequest, post_id: int) -> HttpResponse:
    post = get_object_or_404(Post, pk=post_id)
    # A rater with an open blind comparison on this post sees neither of its two notes, nor the
    # run's proposal, until they answer it; the page links to the comparison instead.
    open_comparisons = supernote_selectors.open_comparisons(user=request.user)
    notes, left_out = selectors.post_notes(post=post, hidden_notes=open_comparisons)
    viewer = selectors.participant_of(user=request.user)
    run = supernote_selectors.latest_run(post=post)
    # The run's details only for admins and its starter; raters still get the blind comparison.
    run_visible = run is not None and not left_out and supernote_services.supernote_run_visible_to(run, request.user)
    context = {"post": post, "notes": notes, "viewer": viewer, "run": run, "run_visible": run_visible,
               "n_blind": len(left_out), "comparisons": sorted({open_comparisons[pk] for pk in left_out})}  # fmt: skip
    # A note whose new version gathers ratings keeps showing the version the crowd rated.
    context["shown"] = living_selectors.shown_statuses(notes=notes)
    return render(request, "notes/post_detail.html", {**context, **(run_context(run) if run_visible else {})})


@endpoint(methods=["GET", "POST"], permission=PUBLIC)
@limited("signup")
def signup(request: HttpRequest) -> HttpResponse:
    form = SignupForm(request.POST if request.method == "POST" else None)
    if request.method == "POST" and form.is_valid():
        try:
            user = services.user_signup(
                username=form.cleaned_data["username"],
                password=form.cleaned_data["password1"],
                email=form.cleaned_data["email"],
                roles=form.cleaned_data["roles"],
            )
        except services.UsernameTaken:
            form.add_error("username", services.USERNAME_TAKEN)
        else:
            login(request, user, backend="django.contrib.auth.backends.ModelBackend")
            return redirect("home")
    return render(request, "registration/signup.html", {"form": form})


def _participant(request: AuthenticatedHttpRequest) -> Participant:
    return services.participant_for_user(user=request.user)


# --- Contributor flow ------------------------------------------------------------------------


def _own_job(request: AuthenticatedHttpRequest, job_id: int) -> DraftJob:
    return get_object_or_404(DraftJob.objects.select_related("post"), pk=job_id, contributor=request.user)


def _own_snippet(request: AuthenticatedHttpRequest, snippet_id: int) -> Snippet:
    return get_object_or_404(
        Snippet.objects.select_related("draft_job", "passage"), pk=snippet_id, draft_job__contributor=request.user
    )


def _workspace(request: HtmxHttpRequest, job: DraftJob, **extra: object) -> HttpResponse:
    gate = selectors.draft_gate(job=job)
    context = {"job": job, "gate": gate, "automation": automation_view(job=job), **extra}
    if request.htmx:
        # The submit button sits outside the workspace: it comes along out of band, so confirming a
        # passage enables it (and removing the last one disables it) without a reload.
        response = render(request, "notes/draft_detail.html#workspace", {**context, "oob": True})
        if request.GET.get("was") == DraftJob.State.DRAFTING and job.state != DraftJob.State.DRAFTING:
            response["HX-Refresh"] = "true"  # the editor needs the new draft text
        return response
    if "note_form" not in context:
        context["note_form"] = _note_form(job, gate.urls, job.editor_text)
    context.setdefault("add_form", AddEvidenceForm(existing=[]))
    if job.state == DraftJob.State.SUBMITTED:
        note = selectors.submitted_note(job=job)
        context.update(submitted_note=note, unsent_text=selectors.unsent_text(job=job, note=note))
    response = render(request, "notes/draft_detail.html", context)
    # Never from the browser's cache: the back button and a reload show the last saved text.
    response["Cache-Control"] = "no-store"
    return response


def _note_form(job: DraftJob, urls: list[str], text: str) -> NoteForm:
    autosave = reverse("draft_text_save", args=[job.pk])
    initial = {"text": text, "seen": services.draft_text_token(job)}
    return NoteForm(initial=initial, urls=urls, autosave_url=autosave)


def _stale_text(request: AuthenticatedHttpRequest, job: DraftJob, text: str, exc: services.StaleText) -> HttpResponse:
    """The page again with this tab's text in the editor and the other tab's text beside it."""
    job.refresh_from_db()
    form = _note_form(job, selectors.draft_gate(job=job).urls, text)
    return _workspace(request, job, note_form=form, stale=exc)


def _within_evidence_cap(request: AuthenticatedHttpRequest, form: ContributeForm | AddEvidenceForm) -> bool:
    """The per-user cap on evidence pages waiting for the CPU queue; past it, a form error says why."""
    refusal = snippets.snippets_cap_refusal(user=request.user, adding=len(form.cleaned_data["urls"]))
    if refusal:
        form.add_error("urls", refusal)
    return refusal is None


@endpoint(methods=["GET", "POST"], permission="notes.add_post")
@limited("contribute")
def contribute(request: AuthenticatedHttpRequest) -> HttpResponse:
    post_id = request.GET.get("post", "")
    post = Post.objects.filter(pk=post_id).first() if post_id.isdigit() else None
    finding = request.POST.get("action") == "find"
    imported = post if post is not None and post.text_missing_reason() else None
    initial_text = "" if post is None or imported is not None else post.text
    form = ContributeForm(
        request.POST if request.method == "POST" else None, initial={"text": initial_text}, finding=finding
    )
    if request.method == "POST" and form.is_valid() and _within_evidence_cap(request, form):
        data = form.cleaned_data
        done = services.contribution_submit(
            text=data["text"],
            user=request.user,
            urls=data["urls"],
            source_url=data["source_url"],
            author_handle=data["author_handle"],
            posted_at=data["posted_at"],
            find_evidence=finding,
            imported_post=imported,
        )
        job = done.job
        if not done.job_created:
            added = len(done.added)
            text = f"You already have an open draft on this post: {added} new source{'s' if added != 1 else ''} added to it"
            if done.skipped:
                text += f" ({len(done.skipped)} it already had)"
            messages.info(request, text + ".")
        elif not done.post_created:
            messages.info(request, "This post was already flagged; a new draft of your note on it was started.")
        if done.same_link is not None:
            messages.warning(
                request,
                format_html(
                    'A post with this link was flagged before with a different text (<a href="{}">see it</a>). '
                    "Your note, its evidence matching and its judges use the text you pasted, kept as a post "
                    "of its own.",
                    reverse("post_detail", args=[done.same_link.pk]),
                ),
            )
        return redirect("draft_detail", job_id=job.pk)
    return render(request, "notes/contribute.html", {"form": form, "imported_post": imported})


@endpoint(methods=["GET"], permission="notes.view_draftjob")
def draft_detail(request: AuthenticatedHttpRequest, job_id: int) -> HttpResponse:
    job = _own_job(request, job_id)
    check_id = request.GET.get("check", "")
    if check_id.isdigit() and not request.htmx:  # the pre-flight this page redirected to (post/redirect/get)
        check = selectors.preflight_of(job=job, check_id=int(check_id))
        if check is not None:
            return _workspace(request, job, preflight_check=check, queue_waiting=preflight_queue_waiting(check=check))
    return _workspace(request, job)


@endpoint(methods=["POST"], permission="notes.change_draftjob")
def draft_text_save(request: AuthenticatedHttpRequest, job_id: int) -> HttpResponse:
    """Keep the editor's text on the draft: htmx saves it as it is edited; without JavaScript the
    "Save my text" button posts here and comes back to the editor. A save that lost to another
    tab's is refused, and says so in this tab, with this tab's text kept."""
    job = _own_job(request, job_id)
    form = DraftTextForm(request.POST)
    stale = None
    if form.is_valid():
        seen = form.cleaned_data["seen"] if "seen" in request.POST else None
        try:
            job = services.draft_text_save(job=job, text=form.cleaned_data["text"], seen=seen)
        except services.StaleText as exc:
            stale = exc
            job.refresh_from_db()
    if request.htmx:  # htmx swaps only 2xx answers: the status line says whether it was saved
        token = services.draft_text_token(job)
        return render(
            request,
            "notes/draft_detail.html#autosave",
            {"job": job, "form": form, "stale": stale, "token": token, "oob": True},
        )
    if stale is not None:
        return _stale_text(request, job, form.cleaned_data["text"], stale)
    if form.is_valid():
        messages.success(request, "Your text is saved.")
    else:
        messages.error(request, "Not saved: " + " ".join(str(e) for e in form.errors.get("text", [])))
    return redirect(f"{reverse('draft_detail', args=[job.pk])}#editor")


@endpoint(methods=["POST"], permission="notes.change_draftjob")
@limited("evidence")
def draft_add_urls(request: AuthenticatedHttpRequest, job_id: int) -> HttpResponse:
    job = _own_job(request, job_id)
    form = AddEvidenceForm(request.POST, existing=list(job.snippets.values_list("url", flat=True)))
    if not (form.is_valid() and _within_evidence_cap(request, form)):
        return _workspace(request, job, add_form=form)
    try:
        services.draft_job_add_urls(job=job, urls=form.cleaned_data["urls"])
    except services.FlowError as exc:
        messages.error(request, str(exc))
    return redirect("draft_detail", job_id=job.pk)


@endpoint(methods=["POST"], permission="notes.change_draftjob")
@limited("evidence")
def automation_start(request: AuthenticatedHttpRequest, job_id: int) -> HttpResponse:
    """ "Find evidence for me": queue the search; its progress and proposals appear on the draft page."""
    job = _own_job(request, job_id)
    try:
        automation_run_start(job=job)
    except AutomationError as exc:
        messages.error(request, str(exc))
    if request.htmx:
        return _workspace(request, job)
    return redirect(f"{reverse('draft_detail', args=[job.pk])}#automation")


@endpoint(methods=["POST"], permission="evidence.change_snippet")
def snippet_action(request: AuthenticatedHttpRequest, snippet_id: int, action: str) -> HttpResponse:
    snippet = _own_snippet(request, snippet_id)
    job = snippet.draft_job
    assert job is not None
    if action == "retry" and (refused := limits.refusal(request, "retry")):
        return refused
    try:
        if action in ("confirm", "reject"):
            shown = request.POST.get("passage", "")
            snippets.snippet_review(
                snippet=snippet,
                user=request.user,
                confirmed=action == "confirm",
                passage_id=int(shown) if shown.isdigit() else None,
            )
        elif action == "retry":
            snippets.snippet_retry(snippet=snippet)
        elif action == "remove":
            snippets.snippet_remove(snippet=snippet)
        else:
            raise Http404
    except snippets.SnippetError as exc:
        if request.htmx:  # the swapped-in workspace shows it; a message would only appear on the next page
            return _workspace(request, job, flow_error=str(exc))
        messages.error(request, str(exc))
    if request.htmx:
        return _workspace(request, job)
    return redirect(f"{reverse('draft_detail', args=[job.pk])}#evidence")


@endpoint(methods=["GET"], permission="notes.view_draftjob")
def snippet_context(request: AuthenticatedHttpRequest, snippet_id: int) -> HttpResponse:
    snippet = _own_snippet(request, snippet_id)
    return render(request, "notes/snippet_context.html", snippets.snippet_in_context(snippet=snippet))


@endpoint(methods=["POST"], permission="notes.change_draftjob")
@limited("draft")
def draft_request(request: AuthenticatedHttpRequest, job_id: int) -> HttpResponse:
    job = _own_job(request, job_id)
    seen = request.POST.get("round", "")
    try:
        job = services.draft_job_request_draft(job=job, seen_round=int(seen) if seen.isdigit() else None)
    except services.FlowError as exc:
        job.refresh_from_db()
        if request.htmx:
            return _workspace(request, job, flow_error=str(exc))
        messages.error(request, str(exc))
    if request.htmx:
        return _workspace(request, job)
    return redirect("draft_detail", job_id=job.pk)


@endpoint(methods=["POST"], permission="notes.change_draftjob")
def draft_discard(request: AuthenticatedHttpRequest, job_id: int) -> HttpResponse:
    """The owner discards an unsubmitted draft (e.g. one left behind by an outage)."""
    job = _own_job(request, job_id)
    try:
        services.draft_job_discard(job=job)
    except services.FlowError as exc:
        messages.error(request, str(exc))
        return redirect("draft_detail", job_id=job.pk)
    messages.success(request, "Draft discarded.")
    return redirect("my_notes")


@endpoint(methods=["POST"], permission="notes.add_note")
def note_submit(request: AuthenticatedHttpRequest, job_id: int) -> HttpResponse:
    """Submit the note; on any refusal the text is kept on the draft and the page comes back with
    why (post/redirect/get: a reload never posts it again)."""
    job = _own_job(request, job_id)
    form = NoteForm(request.POST, urls=selectors.draft_gate(job=job).urls)
    if not form.is_valid():
        services.draft_text_save(job=job, text=request.POST.get("text", "")[:5000])
        for error in form.errors.get("text", []) + list(form.non_field_errors()):
            messages.error(request, f"Not submitted: {error}")
        return redirect(f"{reverse('draft_detail', args=[job.pk])}#editor")
    text = form.cleaned_data["text"]
    if (submitted := selectors.submitted_note(job=job)) is not None:
        return _already_submitted(request, job, submitted, text)
    try:
        seen = form.cleaned_data["seen"] if "seen" in request.POST else None
        job = services.draft_text_save(job=job, text=text, seen=seen)
        note = services.note_submit(job=job, user=request.user, text=text)
    except services.StaleText as exc:
        return _stale_text(request, job, text, exc)
    except services.FlowError as exc:
        if (submitted := selectors.submitted_note(job=job)) is not None:  # another tab won meanwhile
            return _already_submitted(request, job, submitted, text)
        messages.error(request, f"Not submitted: {exc}")
        return redirect(f"{reverse('draft_detail', args=[job.pk])}#editor")
    messages.success(
        request, "Note submitted. The judges' verdicts appear below as they arrive; raters decide its status."
    )
    return redirect("my_note_detail", note_id=note.pk)


def _already_submitted(request: AuthenticatedHttpRequest, job: DraftJob, note: Note, text: str) -> HttpResponse:
    """A submit of a draft that already is a note: the same text again (the back button, a resent
    form) is told where its note is; another text (another tab) is kept on the draft to copy."""
    link = reverse("my_note_detail", args=[note.pk])
    if text.split() == note.text.split() or local_copies.real_addresses(text).split() == note.text.split():
        messages.info(
            request, format_html('This draft was submitted as note {} (<a href="{}">see it</a>).', note.pk, link)
        )
    else:
        services.draft_text_save(job=job, text=text)
        messages.error(
            request,
            format_html(
                'Not submitted: this draft was already submitted as note {} (<a href="{}">see the submitted '
                "note</a>). The text you sent is kept below to copy.",
                note.pk,
                link,
            ),
        )
    return redirect(f"{reverse('draft_detail', args=[job.pk])}#editor")


@endpoint(methods=["GET"], permission="notes.add_note")
def my_notes(request: AuthenticatedHttpRequest) -> HttpResponse:
    progress = selectors.notes_progress(notes=list(selectors.notes_for_user(user=request.user)))
    if request.htmx:
        return render(request, "notes/my_notes.html#notes", {"progress": progress})
    context = {"drafts": selectors.drafts_for_user(user=request.user), "progress": progress,
               "proposals": living_selectors.proposals_for_author(user=request.user)}  # fmt: skip
    return render(request, "notes/my_notes.html", context)


@endpoint(methods=["GET"], permission="notes.add_note")
def my_note_detail(request: AuthenticatedHttpRequest, note_id: int) -> HttpResponse:
    """The contributor's own note: each judge's verdict as it arrives, then the crowd status and why."""
    note = selectors.own_note(user=request.user, note_id=note_id)
    progress = selectors.notes_progress(notes=[note])
    context = {"note": note, "item": progress.items[0], "progress": progress}
    if request.htmx:
        return render(request, "notes/my_note_detail.html#live", context)
    return render(request, "notes/my_note_detail.html", context)


@endpoint(methods=["GET"], permission="notes.add_rating")
def rating_queue(request: AuthenticatedHttpRequest) -> HttpResponse:
    participant = _participant(request)
    text = selectors.text_filter(request.GET.get("text"))
    blind = supernote_selectors.hidden_note_ids(user=request.user)
    notes = selectors.rating_queue(participant=participant, text=text, hidden_notes=blind)
    hidden = (
        selectors.rating_queue_hidden(participant=participant, hidden_notes=blind) if text == selectors.TEXT_WITH else 0
    )
    pairs = supernote_selectors.comparisons_available(participant=participant)
    invitations = living_selectors.invitations(participant=participant, hidden_notes=blind)
    context = {
        "notes": notes,
        "pairs": pairs,
        **hidden_context(hidden),
        "invitations": invitations,
        **text_context(request, text),
    }
    return render(request, "notes/rating_queue.html", context)


@endpoint(methods=["GET", "POST"], permission="notes.add_rating")
@limited("rating")
def rate_note(request: AuthenticatedHttpRequest, note_id: int) -> HttpResponse:
    participant = _participant(request)
    blind = supernote_selectors.hidden_note_ids(user=request.user)
    note, own = selectors.note_for_rating(note_id=note_id, participant=participant, hidden_notes=blind)
    if not note.can_be_rated_by(participant):
        raise PermissionDenied(
            "You wrote this note, and authors cannot rate their own notes: its status comes from other raters."
        )
    form = RatingForm(
        request.POST if request.method == "POST" else None,
        initial=RatingForm.initial_for(own, request.GET if request.htmx else None),
    )
    saved = False
    if request.method == "POST" and form.is_valid() and form.cleaned_data["suggestion_source"]:
        refusal = living_services.suggestion_source_refusal(user=request.user)
        if refusal:
            form.add_error("suggestion_source", refusal)
    # A suggestion has its own rate on top of the rating's (its source fetch and kind tagging cost more).
    if request.method == "POST" and form.is_valid() and form.cleaned_data["suggestion"]:
        if refused := limits.refusal(request, "suggestion"):
            return refused
    if request.method == "POST" and form.is_valid():
        if note.current_version_id is None:  # a note without versions gets its text as version 1
            living_services.current_version(note)
        text, source = form.cleaned_data["suggestion"], form.cleaned_data["suggestion_source"]
        try:
            rating, _ = services.rating_submit(
                rater=participant, note=note, level=form.cleaned_data["level"], tags=form.tags,
                read_version=form.cleaned_data["version"],
            )  # fmt: skip
            if text:
                living_services.suggestion_add(rating=rating, text=text, source_url=source)
        except (services.StaleVersionError, living_services.StaleSuggestionError) as exc:
            return _stale_rating(request, note, str(exc))
        if not request.htmx:
            thanks = "Thanks, your rating is saved. You can change it at any time."
            if text:
                thanks += " Your suggestion is recorded: My suggestions shows what becomes of it"
                thanks += " (and the passage of your source to confirm)." if source else "."
            messages.success(request, thanks)
            return redirect("my_suggestions" if source else "rating_queue")
        saved = True
    context = {"note": note, "form": form, "saved": saved, "own": own, "version": note.current_version}
    if request.htmx:  # htmx only swaps 2xx responses, so errors come back as 200 with the form
        return render(request, "notes/rate_note.html#rating-form", context)
    return render(request, "notes/rate_note.html", context, status=400 if form.errors else 200)


def _stale_rating(request: AuthenticatedHttpRequest, note: Note, message: str) -> HttpResponse:
    """The rater read a text that is no longer the note's: say so and show the current text."""
    messages.error(request, message)
    if request.htmx:  # the new text is outside the swapped form: reload the page
        return HttpResponse(headers={"HX-Redirect": reverse("rate_note", args=[note.pk])})
    note.refresh_from_db()
    context = {"note": note, "form": RatingForm(), "saved": False, "own": None, "version": note.current_version}
    return render(request, "notes/rate_note.html", context, status=409)


@endpoint(methods=["POST"], permission="notes.add_rating")
def rating_withdraw(request: AuthenticatedHttpRequest, note_id: int) -> HttpResponse:
    """The rater withdraws their rating; a pending suggestion made with it is withdrawn too."""
    note = get_object_or_404(Note, pk=note_id)
    if living_services.rating_withdraw(rater=_participant(request), note=note):
        messages.success(request, "Your rating (and any pending suggestion with it) was withdrawn.")
    return redirect("rating_queue")


@endpoint(methods=["POST"], permission="notes.add_note")
@limited("preflight")
def note_preflight(request: AuthenticatedHttpRequest, job_id: int) -> HttpResponse:
    """Queue the judges on the text in the editor; the page polls their verdicts. Submits nothing."""
    job = _own_job(request, job_id)
    gate = selectors.draft_gate(job=job)
    form = NoteForm(request.POST, urls=gate.urls)
    if not form.is_valid():
        services.draft_text_save(job=job, text=request.POST.get("text", "")[:5000])
        for error in form.errors.get("text", []):
            messages.error(request, f"Not checked: {error}")
        return redirect(f"{reverse('draft_detail', args=[job.pk])}#editor")
    services.draft_text_save(job=job, text=form.cleaned_data["text"])
    check = services.note_preflight(job=job, gate=gate, text=form.cleaned_data["text"], user=request.user)
    # Post/redirect/get: a reload shows the verdicts, it never queues the judges again.
    return redirect(f"{reverse('draft_detail', args=[job.pk])}?check={check.pk}#preflight-result")
