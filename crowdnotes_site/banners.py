"""/banners/: the site-wide banners (the demo's warm-up, the demo's benchmark run), which every
page polls while one shows, so a page left open loses its banner when the work is done."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from crowdnotes_site.access import PUBLIC, endpoint


@endpoint(methods=["GET"], permission=PUBLIC)
def banners(request: HttpRequest) -> HttpResponse:
    return render(request, "_banners.html")
