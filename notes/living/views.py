"""Pages of living notes: request a note, the request queue, a note's versions, a
suggester's outcomes, the suggestion source review, and the revision audit."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render

from crowdnotes_site.access import PUBLIC, AuthenticatedHttpRequest, endpoint
from crowdnotes_site.lib import xids
from crowdnotes_site.lib.communitynotes.research import spikes
from crowdnotes_site.limits import limited
from notes.analytics.selectors import CURRENT_SPIKE_DAYS
from notes.living import selectors, services
from notes.models import Note, Post, RevisionRun, Suggestion
from notes.selectors import participant_of
from notes.supernotes.selectors import hidden_note_ids


class RequestForm(forms.Form):
    reason = forms.CharField(required=False, max_length=500, widget=forms.Textarea(attrs={"rows": 2}),
                             label="Why does this post need a note? (optional)")  # fmt: skip


class RequestByLinkForm(RequestForm):
    reference = forms.CharField(max_length=300, label="Link or ID of the post on X",
                                widget=forms.TextInput(attrs={"placeholder": "https://x.com/<user>/status/<id>"}))  # fmt: skip
    field_order = ["reference", "reason"]

    def clean_reference(self) -> str:
        x_id = xids.post_id_from_reference(self.cleaned_data["reference"])
        if x_id is None:
            raise forms.ValidationError(
                "This is not a post on X: paste its link (https://x.com/<user>/status/<id>, or the same on "
                "twitter.com) or its numeric id."
            )
        return x_id


def _say(request: HttpRequest, done: services.RequestResult) -> HttpResponse:
    if not done.created:
        messages.info(request, f"You already requested a note on this post ({done.count} request(s) in all).")
    else:
        messages.success(request, f"Your request is counted: {done.count} request(s) for a note on this post.")
    if done.started_draft is not None:
        messages.info(request, "Enough people asked: a draft with an evidence search was started.")
    return redirect("post_detail", post_id=done.request.post_id)


@endpoint(methods=["POST"], permission=PUBLIC, login_required=True)
@limited("note_request")
def request_note(request: AuthenticatedHttpRequest, post_id: int) -> HttpResponse:
    post = get_object_or_404(Post, pk=post_id)
    form = RequestForm(request.POST)
    if not form.is_valid():
        messages.error(request, "A reason may have at most 500 characters.")
        return redirect("post_detail", post_id=post.pk)
    return _say(request, services.note_request_create(post=post, user=request.user, reason=form.cleaned_data["reason"]))


@endpoint(methods=["POST"], permission=PUBLIC, login_required=True)
@limited("note_request")
def request_note_by_link(request: AuthenticatedHttpRequest) -> HttpResponse:
    """A request by the link or id of a post on X (a post without text here is created as such)."""
    form = RequestByLinkForm(request.POST)
    if not form.is_valid():
        return render(request, "notes/living/request_queue.html", _queue_context(form), status=400)
    data = form.cleaned_data
    return _say(
        request, services.note_request_by_x_id(x_id=data["reference"], user=request.user, reason=data["reason"])
    )


@endpoint(methods=["GET"], permission=PUBLIC)
def request_queue(request: HttpRequest) -> HttpResponse:
    return render(request, "notes/living/request_queue.html", _queue_context(RequestByLinkForm()))


def _queue_context(form: RequestByLinkForm) -> dict[str, object]:
    return {"rows": selectors.request_queue(), "link_form": form, "spike_days": CURRENT_SPIKE_DAYS,
            "spike_k": spikes.K_SIGMA, "spike_window": spikes.WINDOW_DAYS}  # fmt: skip


@endpoint(methods=["GET"], permission=PUBLIC)
def note_versions(request: HttpRequest, note_id: int) -> HttpResponse:
    # 404 for either note of the viewer's open blind comparison, as on every page that shows notes.
    blind = hidden_note_ids(user=request.user)
    note = get_object_or_404(Note.objects.select_related("post", "current_version").exclude(pk__in=blind), pk=note_id)
    history = selectors.note_history(note=note)
    previous = history[1].version if len(history) > 1 else None
    return render(request, "notes/living/note_versions.html", {"note": note, "history": history, "previous": previous})


@endpoint(methods=["GET"], permission="notes.add_rating")
def my_suggestions(request: AuthenticatedHttpRequest) -> HttpResponse:
    participant = participant_of(user=request.user)
    if participant is None:
        return render(request, "notes/living/my_suggestions.html", {"suggestions": [], "invitations": []})
    blind = hidden_note_ids(user=request.user)
    context = {"suggestions": selectors.suggestions_of(participant=participant, hidden_notes=blind),
               "invitations": selectors.invitations(participant=participant, hidden_notes=blind)}  # fmt: skip
    return render(request, "notes/living/my_suggestions.html", context)


@endpoint(methods=["POST"], permission="notes.add_rating")
def suggestion_source_review(request: AuthenticatedHttpRequest, suggestion_id: int, action: str) -> HttpResponse:
    suggestion = get_object_or_404(
        Suggestion.objects.select_related("snippet__passage"), pk=suggestion_id, rater__user=request.user
    )
    if action not in ("confirm", "reject"):
        return redirect("my_suggestions")
    shown = request.POST.get("passage", "")
    try:
        services.suggestion_snippet_review(
            suggestion=suggestion, user=request.user, confirmed=action == "confirm",
            passage_id=int(shown) if shown.isdigit() else None,
        )  # fmt: skip
    except services.LivingError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, "Passage confirmed." if action == "confirm" else "Passage rejected.")
    return redirect("my_suggestions")


@endpoint(methods=["GET"], permission="judging.view_judgedecision")
def revision_audit(request: AuthenticatedHttpRequest) -> HttpResponse:
    note_id = request.GET.get("note", "")
    note = Note.objects.filter(pk=note_id).first() if note_id.isdigit() else None
    return render(
        request, "notes/living/revision_audit.html", {"runs": selectors.revision_runs(note=note), "note": note}
    )


@endpoint(methods=["GET"], permission="notes.view_scores")
def living_analytics(request: AuthenticatedHttpRequest) -> HttpResponse:
    context = {"kinds": selectors.suggestions_by_kind(), "revisions": selectors.revisions_before_after(),
               "delays": selectors.request_delays()}  # fmt: skip
    return render(request, "notes/living/analytics.html", context)


class DecisionForm(forms.Form):
    decision = forms.ChoiceField(choices=[("accept", "Accept"), ("decline", "Decline")])
    reason = forms.CharField(required=False, max_length=2000, widget=forms.Textarea(attrs={"rows": 2}),
                             label="Your reason (required to decline; the suggesters see it)")  # fmt: skip


def _proposal_or_404(request: AuthenticatedHttpRequest, run_id: int) -> tuple[RevisionRun, bool]:
    """The run and whether this user decides on it. Its decider, and whoever may read the revision
    audit, may see it; anyone else gets a 404."""
    run = get_object_or_404(
        RevisionRun.objects.select_related("note__post", "note__author__user", "base_version", "published_version"),
        pk=run_id,
    )
    decides = services.may_decide(run=run, user=request.user)
    if not decides and not request.user.has_perm("judging.view_judgedecision"):
        raise Http404("No such revision.")
    return run, decides


@endpoint(methods=["GET"], permission=PUBLIC, login_required=True)
def revision_proposal(request: AuthenticatedHttpRequest, run_id: int) -> HttpResponse:
    """A revision beside the current text, with its diff, the suggestions it read, the checks, the
    judges' reasons and the jury's figures; its decider accepts or declines it here."""
    run, decides = _proposal_or_404(request, run_id)
    return _proposal_page(request, run, decides, DecisionForm())


def _proposal_page(
    request: AuthenticatedHttpRequest, run: RevisionRun, decides: bool, form: DecisionForm, status: int = 200
) -> HttpResponse:
    context = {
        "run": run, "decides": decides and run.outcome == RevisionRun.Outcome.PROPOSED, "form": form,
        "diff": selectors.word_diff(run.base_version.text, run.candidate_text) if run.candidate_text else None,
        "suggestions": selectors.proposal_suggestions(run=run),
        "decider": services.proposal_decider(run.note),
    }  # fmt: skip
    return render(request, "notes/living/proposal.html", context, status=status)


@endpoint(methods=["POST"], permission=PUBLIC, login_required=True)
def revision_proposal_decide(request: AuthenticatedHttpRequest, run_id: int) -> HttpResponse:
    run, decides = _proposal_or_404(request, run_id)
    if not decides:
        raise PermissionDenied("Only the note's author (or an admin, for a note without one) decides on its revisions.")
    form = DecisionForm(request.POST)
    if not form.is_valid():
        return _proposal_page(request, run, decides, form, status=400)
    accept = form.cleaned_data["decision"] == "accept"
    try:
        run = services.revision_proposal_decide(
            run_id=run.pk, user=request.user, accept=accept, reason=form.cleaned_data["reason"]
        )
    except services.ProposalError as exc:
        form.add_error(None, str(exc))
        run.refresh_from_db()
        return _proposal_page(request, run, decides, form, status=409)
    if run.published_version is not None:
        messages.success(request, f"Version {run.published_version.number} is now the note's text; it starts its own "
                                  "ratings, and the post shows the previous version's status until it has one.")  # fmt: skip
    else:
        messages.success(request, "Declined: the revision is kept with your reason on Revision decisions.")
    return redirect("note_versions", note_id=run.note_id)
