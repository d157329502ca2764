"""Supernotes' pages: stuck posts, a run's progress and candidates, the evaluation, and the blind comparison of a Supernote with the best existing note."""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render

from crowdnotes_site.access import AuthenticatedHttpRequest, HtmxHttpRequest, endpoint
from crowdnotes_site.lib.communitynotes.supernotes import comparison as comparison_module
from crowdnotes_site.limits import limited, limited_site
from notes import services
from notes.forms import (
    ComparisonForm,
)
from notes.list_filters import hidden_context, list_filters, text_context
from notes.models import Post, SupernoteComparison, SupernoteRun, Topic
from notes.supernotes import selectors as supernote_selectors
from notes.supernotes import services as supernote_services

# --- Supernotes ------------------------------------------------------------------------------


def run_context(run: SupernoteRun | None) -> dict[str, object]:
    """What the post page and the run page show of a run: provenance, the chosen candidate, and
    the rejected candidates grouped by the first filter they failed."""
    if run is None:
        return {}
    candidates = list(run.candidates.all())
    rejected: dict[str, int] = {}
    for c in candidates:
        failed = c.failed_filters
        if failed:
            name = str(failed[0]["filter"])
            rejected[name] = rejected.get(name, 0) + 1
    scored = sorted((c for c in candidates if c.jury_intercept is not None), key=lambda c: -(c.jury_intercept or 0))
    # The proposal is the best-scored candidate (runs before winner_index: the top-scored one with its text).
    if run.winner_index is not None:
        chosen = next((c for c in candidates if c.index == run.winner_index), None) if run.proposed_note else None
    else:
        chosen = scored[0] if run.proposed_note and scored and scored[0].text == run.proposed_note.text else None
    return {
        "sources": supernote_selectors.source_notes(run=run),
        "candidates": candidates,
        "n_passed": sum(c.passed for c in candidates),
        "rejected_by_filter": sorted(rejected.items()),
        "chosen": chosen,
        "top_scored": scored[:5],
    }


@endpoint(methods=["GET"], permission="notes.add_supernoterun")
def stuck_posts(request: AuthenticatedHttpRequest) -> HttpResponse:
    topic, page, text = list_filters(request)
    stuck = supernote_selectors.stuck_page(page=page, topic=topic, text=text)
    context = {"stuck": stuck, "topics": Topic.choices, "topic": topic, **text_context(request, text)}
    return render(request, "notes/stuck_posts.html", {**context, **hidden_context(stuck.hidden_without_text)})


@endpoint(methods=["GET"], permission="notes.add_supernoterun")
def supernote_evaluation(request: AuthenticatedHttpRequest) -> HttpResponse:
    """The jury against one-line rules on the public sample and on real posts, as stored by
    `evaluate_jury_sample --store` and `evaluate_jury --real --store` (computed offline, never in a request)."""
    context = {"evaluation": supernote_selectors.jury_evaluation(), "real": supernote_selectors.real_jury_evaluation()}
    return render(request, "notes/supernote_evaluation.html", context)


@endpoint(methods=["POST"], permission="notes.add_supernoterun")
@limited("supernote")
@limited_site("supernote_site")
def supernote_generate(request: AuthenticatedHttpRequest, post_id: int) -> HttpResponse:
    post = get_object_or_404(Post, pk=post_id)
    try:
        run = supernote_services.supernote_run_start(post=post, user=request.user)
    except supernote_services.SupernoteError as exc:
        messages.error(request, str(exc))
        return redirect("stuck_posts")
    return redirect("supernote_run", run_id=run.pk)


@endpoint(methods=["GET"], permission="notes.add_supernoterun")
def supernote_run(request: HtmxHttpRequest, run_id: int) -> HttpResponse:
    run = get_object_or_404(SupernoteRun.objects.select_related("post", "proposed_note"), pk=run_id)
    if not supernote_services.supernote_run_visible_to(run, request.user):
        raise PermissionDenied("A Supernote run is shown to admins and to the person who started it.")
    context = {"run": run, "active": run.state in (SupernoteRun.State.QUEUED, SupernoteRun.State.RUNNING),
               **run_context(run)}  # fmt: skip
    template = "notes/_supernote_run.html" if request.htmx else "notes/supernote_run.html"
    return render(request, template, context)


# --- Blind comparison of a Supernote with the best existing note ----------------------------
# The URLs say "compare", never "supernote": nothing on the rater's page may tell which note is which.


@endpoint(methods=["POST"], permission="notes.add_supernotecomparison")
def comparison_start(request: AuthenticatedHttpRequest, post_id: int) -> HttpResponse:
    post = get_object_or_404(Post, pk=post_id)
    try:
        item = supernote_services.comparison_assign(rater=services.participant_for_user(user=request.user), post=post)
    except supernote_services.ComparisonError as exc:
        if exc.forbidden:
            raise PermissionDenied(str(exc)) from exc
        messages.error(request, str(exc))
        return redirect("rating_queue")
    return redirect("comparison", comparison_id=item.pk)


@endpoint(methods=["GET", "POST"], permission="notes.add_supernotecomparison")
@limited("rating")
def comparison(request: AuthenticatedHttpRequest, comparison_id: int) -> HttpResponse:
    """Two notes of one post as Note A and Note B (stored order), no origin, author or status."""
    participant = services.participant_for_user(user=request.user)
    item = get_object_or_404(
        SupernoteComparison.objects.select_related("supernote__post", "other_note"), pk=comparison_id, rater=participant
    )
    form = ComparisonForm(request.POST if request.method == "POST" else None)
    if request.method == "POST" and form.is_valid():  # the service refuses a second, different answer
        try:
            supernote_services.comparison_answer(
                item=item, rater=participant, preferred=form.cleaned_data["preferred"], scores_a=form.scores("a"),
                scores_b=form.scores("b"),
            )  # fmt: skip
        except supernote_services.ComparisonError as exc:
            form.add_error(None, str(exc))
        else:
            messages.success(request, "Thanks, your comparison is saved.")
            return redirect("rating_queue")
    elif request.method == "POST" and item.answered_at is not None:
        form.add_error(None, "You already answered this comparison: one answer per rater and pair.")
    sides = supernote_selectors.comparison_sides(item=item)
    context = {
        "item": item, "form": form, "post": item.supernote.post,
        "sides_list": [("A", sides.note_a), ("B", sides.note_b)],
        "field_groups": [("A", form.note_a_fields), ("B", form.note_b_fields)],
    }  # fmt: skip
    return render(request, "notes/comparison.html", context, status=400 if form.errors else 200)


@endpoint(methods=["GET"], permission="notes.view_supernotecomparison")
def comparison_results(request: AuthenticatedHttpRequest) -> HttpResponse:
    """Admin: the Supernote's win rate in the blind comparisons (Wilson 95 %), per-statement means."""
    context = {"result": supernote_selectors.comparison_results(),
               "study_percent": round(100 * comparison_module.STUDY_WIN_RATE, 1)}  # fmt: skip
    return render(request, "notes/comparison_results.html", context)
