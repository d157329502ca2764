from __future__ import annotations

from django.contrib import messages
from django.contrib.auth import login
from django.contrib.auth.base_user import AbstractBaseUser
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django_htmx.middleware import HtmxDetails

from notes import selectors, services
from notes.access import PUBLIC, endpoint
from notes.forms import RatingForm, SignupForm
from notes.models import Participant, Post


@endpoint(methods=["GET"], permission=PUBLIC)
def home(request: HttpRequest) -> HttpResponse:
    return render(request, "notes/home.html", {"posts": selectors.posts_for_home()})


@endpoint(methods=["GET"], permission=PUBLIC)
def post_detail(request: HttpRequest, post_id: int) -> HttpResponse:
    post = get_object_or_404(Post, pk=post_id)
    notes = post.notes.select_related("author__user").order_by("-created_at")
    return render(request, "notes/post_detail.html", {"post": post, "notes": notes})


@endpoint(methods=["GET", "POST"], permission=PUBLIC)
def signup(request: HttpRequest) -> HttpResponse:
    form = SignupForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        user = services.user_signup(
            username=form.cleaned_data["username"],
            password=form.cleaned_data["password1"],
            email=form.cleaned_data["email"],
            roles=form.cleaned_data["roles"],
        )
        login(request, user, backend="django.contrib.auth.backends.ModelBackend")
        return redirect("home")
    return render(request, "registration/signup.html", {"form": form})


class HtmxHttpRequest(HttpRequest):
    htmx: HtmxDetails


def _participant(request: HttpRequest) -> Participant:
    user = request.user
    assert isinstance(user, AbstractBaseUser)  # @endpoint with a permission requires login
    return services.participant_for_user(user=user)


@endpoint(methods=["GET"], permission="notes.add_rating")
def rating_queue(request: HttpRequest) -> HttpResponse:
    participant = _participant(request)
    notes = selectors.rating_queue(participant=participant)
    return render(request, "notes/rating_queue.html", {"notes": notes})


@endpoint(methods=["GET", "POST"], permission="notes.add_rating")
def rate_note(request: HtmxHttpRequest, note_id: int) -> HttpResponse:
    participant = _participant(request)
    note, own = selectors.note_for_rating(note_id=note_id, participant=participant)
    if note.author_id == participant.pk:
        raise PermissionDenied("You cannot rate your own note.")
    form = RatingForm(request.POST or None, initial=RatingForm.initial_for(own))
    saved = False
    if request.method == "POST" and form.is_valid():
        services.rating_submit(rater=participant, note=note, level=form.cleaned_data["level"], tags=form.tags)
        if not request.htmx:
            messages.success(request, "Thanks, your rating is saved. You can change it at any time.")
            return redirect("rating_queue")
        saved = True
    if request.htmx:  # htmx only swaps 2xx responses, so errors come back as 200 with the form
        return render(request, "notes/rate_note.html#rating-form", {"note": note, "form": form, "saved": saved})
    return render(request, "notes/rate_note.html", {"note": note, "form": form}, status=400 if form.errors else 200)


@endpoint(methods=["POST"], permission="notes.run_scoring")
def rescore(request: HttpRequest) -> HttpResponse:
    services.notes_rescore_request()
    messages.success(request, "Rescoring queued; statuses update when it finishes.")
    return redirect("rating_queue")
