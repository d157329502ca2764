"""The admin scoring page: the scorer's runs, and rescore now."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import redirect, render

from crowdnotes_site.access import AuthenticatedHttpRequest, endpoint
from notes.scoring import selectors, services


@endpoint(methods=["POST"], permission="notes.run_scoring")
def rescore(request: AuthenticatedHttpRequest) -> HttpResponse:
    services.notes_rescore_request(user=request.user)
    if request.htmx:
        return render(request, "notes/scoring.html#runs", {"overview": selectors.scoring_overview()})
    messages.success(request, "Rescoring queued; this page shows its progress.")
    return redirect("scoring")


@endpoint(methods=["GET"], permission="notes.run_scoring")
def scoring_page(request: AuthenticatedHttpRequest) -> HttpResponse:
    """Admin: the scorer's runs (last run, duration, counts, status changes, next run), rescore now."""
    overview = selectors.scoring_overview()
    template = "notes/scoring.html#runs" if request.htmx else "notes/scoring.html"
    return render(request, template, {"overview": overview})
