"""The head-start endpoints (evidence.prefetch): thin, no model and no fetch in the request."""

from __future__ import annotations

from urllib.parse import urlencode

from django.core.exceptions import ValidationError
from django.core.validators import URLValidator
from django.http import HttpResponse
from django.shortcuts import render
from django.urls import reverse

from crowdnotes_site.access import AuthenticatedHttpRequest, endpoint
from crowdnotes_site.limits import limit_state
from evidence import prefetch

_valid_url = URLValidator(schemes=["http", "https"])


def _urls(values: list[str]) -> list[str]:
    """The complete-looking http(s) URLs among the lines typed so far (a half-typed one is skipped)."""
    urls: list[str] = []
    for value in values:
        for line in value.splitlines():
            url = line.strip()
            try:
                _valid_url(url)
            except ValidationError:
                continue
            if url not in urls:
                urls.append(url)
    return urls


def _fragment(request: AuthenticatedHttpRequest, statuses: list[prefetch.PrefetchStatus]) -> HttpResponse:
    pending = any(s.pending for s in statuses)
    poll = f"{reverse('evidence_prefetch')}?{urlencode([('url', s.url) for s in statuses])}" if pending else ""
    return render(request, "evidence/_prefetch.html", {"statuses": statuses, "poll": poll})


@endpoint(methods=["GET", "POST"], permission="evidence.add_snippet")
def prefetch_view(request: AuthenticatedHttpRequest) -> HttpResponse:
    """POST (the form's URL field, debounced): start head starts; GET ?url=…: their status (polled)."""
    if request.method == "POST":
        urls = _urls(request.POST.getlist("urls"))
        # Rate-limited like every POST group (crowdnotes_site.limits), but answered in the fragment:
        # a 429 would make htmx reload the form the contributor is typing in.
        state = limit_state(request, "prefetch")
        if state != "within":
            statuses = prefetch.prefetch_limited(urls=urls, paused=state == "unavailable")
        else:
            statuses = prefetch.prefetch_request(user=request.user, urls=urls)
    else:
        statuses = prefetch.prefetch_statuses(user=request.user, urls=_urls(request.GET.getlist("url")))
    return _fragment(request, statuses)
