"""/favicon.ico: browsers ask for it on every page; it is the site's SVG icon (also linked from base.html)."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponsePermanentRedirect
from django.templatetags.static import static

from crowdnotes_site.access import PUBLIC, endpoint


@endpoint(methods=["GET"], permission=PUBLIC)
def favicon(request: HttpRequest) -> HttpResponsePermanentRedirect:
    return HttpResponsePermanentRedirect(static("favicon.svg"))
