"""Abuse limits: per-user (or per-IP for anonymous visitors) request rates, via django-ratelimit
on the cache (Redis in production), and the 429 answer when one is hit.

`@limited("contribute")` counts the POSTs of one group of views; the rates live in
settings.RATE_LIMITS ("10/h" style, one env variable each) and are read on every request, so a
test or an operator can change them without a restart of the module. Login lockout after wrong
passwords is django-axes' job (settings AXES_*), not this module's.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django_ratelimit.core import is_ratelimited
from django_ratelimit.decorators import ratelimit
from django_ratelimit.exceptions import Ratelimited

# What a person was doing when the limit was hit, for the message.
ACTIONS = {
    "login": "log-in attempts",
    "signup": "sign-ups from your network",
    "contribute": "flagged posts",
    "evidence": "evidence additions",
    "draft": "draft requests",
    "preflight": "pre-flight checks",
    "rating": "ratings",
    "prefetch": "links read ahead",
    "supernote": "Supernote runs started by you",
    "supernote_site": "Supernote runs started on the whole site",
}


def _rate(group: str, request: HttpRequest) -> str:
    return settings.RATE_LIMITS[group]


def limited(group: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Refuse (429) the POSTs of `group` past its rate, counted per user, or per IP when anonymous."""
    if group not in ACTIONS:
        raise ValueError(f"unknown rate-limit group {group!r}")
    count = ratelimit(group=group, key="user_or_ip", rate=_rate, method="POST", block=True)

    def decorate(view: Callable[..., Any]) -> Callable[..., Any]:
        wrapped = count(view)
        wrapped.limit_group = group  # type: ignore[attr-defined]  # read back by `ratelimited`
        return wrapped

    return decorate


def _site_key(group: str, request: HttpRequest) -> str:
    return "site"


def limited_site(group: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Refuse (429) the POSTs of `group` past its rate counted for everybody together: a ceiling on
    costly work (Supernote runs) that many accounts cannot get around. Put it under `@limited`
    (per user), so a person over their own limit does not use up the site's."""
    if group not in ACTIONS:
        raise ValueError(f"unknown rate-limit group {group!r}")

    def decorate(view: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(view)
        def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
            if is_ratelimited(request, group=group, key=_site_key, rate=_rate, method="POST", increment=True):
                request.limit_group = group  # type: ignore[attr-defined]  # read back by `ratelimited`
                raise Ratelimited()
            return view(request, *args, **kwargs)

        return wrapped

    return decorate


def over_limit(request: HttpRequest, group: str) -> bool:
    """Count this POST against `group` and say whether it is past the rate, without refusing it:
    for background requests (the head start) whose page must not reload on a limit."""
    return is_ratelimited(request, group=group, key="user_or_ip", rate=_rate, method="POST", increment=True)


def limit_message(group: str) -> str:
    rate = settings.RATE_LIMITS.get(group, "")
    count, _, period = rate.partition("/")
    per = {"s": "second", "m": "minute", "h": "hour", "d": "day"}.get(period[-1:], period)
    return (
        f"Too many {ACTIONS.get(group, 'requests')}: at most {count} per {per}. "
        "Nothing was saved this time; please wait a little and try again."
    )


def ratelimited(request: HttpRequest, exception: Exception) -> HttpResponse:
    """RATELIMIT_VIEW: a page that says which limit was hit. Under htmx (which swaps only 2xx
    answers) the page reloads and shows the same text as a message."""
    group = getattr(request, "limit_group", "") or _group_of(request)
    text = limit_message(group)
    if getattr(request, "htmx", False):
        messages.error(request, text)
        response = HttpResponse(status=204)
        response["HX-Refresh"] = "true"
        return response
    return render(request, "429.html", {"message": text}, status=429)


def _group_of(request: HttpRequest) -> str:
    """The limit group of the view that refused, found from the resolved URL's view function."""
    match: Any = getattr(request, "resolver_match", None)
    func = getattr(match, "func", None)
    return getattr(func, "limit_group", "")
