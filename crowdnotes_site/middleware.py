"""Response hygiene and outages explained: headers every answer carries, and a plain "try again"
page instead of a bare 500 when the database or Redis fails under a request.

`SecurityHeadersMiddleware` adds `Permissions-Policy` (no camera, microphone, geolocation, payment,
USB, …: the site uses none of them) and drops any `Server` header (Django sets none; gunicorn's
own banner is hidden by the proxy, see README "Production").

`OutageMiddleware` turns a database error of the connection kind (the server dropped or refused
it) and a Redis error raised by a view into a 503 page that says what happened and what to do,
and closes the broken database connection so the next request opens a fresh one: a dropped
connection costs at most the one request that found it (with CONN_HEALTH_CHECKS, usually none).
Errors in other middleware fall through to templates/500.html, which explains too.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from django.db import InterfaceError, OperationalError, connections
from django.http import HttpRequest, HttpResponse
from django.template.loader import render_to_string
from redis.exceptions import RedisError

logger = logging.getLogger(__name__)

PERMISSIONS_POLICY = ", ".join(
    f"{feature}=()"
    for feature in (
        "accelerometer",
        "autoplay",
        "camera",
        "display-capture",
        "encrypted-media",
        "fullscreen",
        "geolocation",
        "gyroscope",
        "magnetometer",
        "microphone",
        "midi",
        "payment",
        "picture-in-picture",
        "publickey-credentials-get",
        "screen-wake-lock",
        "usb",
        "xr-spatial-tracking",
    )
)

DATABASE_MESSAGE = (
    "The connection to our database was interrupted while we answered this request. "
    "Reload the page in a moment; if you were saving something, check whether it was saved before sending it again."
)
REDIS_MESSAGE = (
    "A part of the site (our cache and request counter) is unreachable right now. "
    "Reading the site still works; please try again in a minute."
)


class SecurityHeadersMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        response.headers.setdefault("Permissions-Policy", PERMISSIONS_POLICY)
        if "Server" in response.headers:
            del response.headers["Server"]
        return response


class OutageMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if isinstance(exception, (OperationalError, InterfaceError)):
            logger.exception("database connection failed under %s %s", request.method, request.path)
            _close_broken_connections()
            return _outage_page(DATABASE_MESSAGE, retry_after=5)
        if isinstance(exception, RedisError):
            logger.exception("redis failed under %s %s", request.method, request.path)
            return _outage_page(REDIS_MESSAGE, retry_after=60)
        return None


def _close_broken_connections() -> None:
    for conn in connections.all(initialized_only=True):
        try:
            conn.close_if_unusable_or_obsolete()
        except Exception:  # a connection that cannot even close cleanly is dropped all the same
            logger.warning("closing a broken %s connection failed", conn.alias, exc_info=True)
            conn.connection = None


def _outage_page(message: str, *, retry_after: int) -> HttpResponse:
    """Rendered without the request: no session, user or database read can fail again here."""
    html = render_to_string("outage.html", {"message": message})
    response = HttpResponse(html, status=503)
    response["Retry-After"] = str(retry_after)
    return response
