from __future__ import annotations

from django.contrib.auth import login
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render

from notes import selectors, services
from notes.access import PUBLIC, endpoint
from notes.forms import SignupForm
from notes.models import Post


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
