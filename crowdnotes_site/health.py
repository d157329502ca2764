"""/healthz: are the database, the cache (rate counters) and the Celery broker reachable?

Anyone sees the overall status and the names of the dependencies that are down (a load balancer
or an operator needs no login for that); the error text of a failed check is shown to staff
only and always logged, since error texts name internal hosts and ports."""

from __future__ import annotations

import logging

from django.core.cache import caches
from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache

from crowdnotes_site.access import PUBLIC, endpoint
from crowdnotes_site.queue import broker_app

logger = logging.getLogger(__name__)


def _check_database() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        cursor.fetchone()
    return "ok"


def _check_cache() -> str:
    cache = caches["limits"]  # the rate counters: with Redis down, costly POSTs are refused
    cache.set("healthz", "ok", timeout=10)
    if cache.get("healthz") != "ok":
        raise RuntimeError("the value just written could not be read back")
    return "ok"


def _check_broker() -> str:
    with broker_app().connection_for_write() as conn:
        conn.ensure_connection(max_retries=1, timeout=2)
    return "ok"


@never_cache
@endpoint(methods=["GET"], permission=PUBLIC)
def healthz(request: HttpRequest) -> JsonResponse:
    checks: dict[str, str] = {}
    for name, check in (("database", _check_database), ("cache", _check_cache), ("broker", _check_broker)):
        try:
            checks[name] = check()
        except Exception as exc:  # any failure means unhealthy; say which and why
            checks[name] = f"error: {exc.__class__.__name__}: {exc}"[:300]
            logger.warning("healthz: %s check failed: %s", name, checks[name])
    healthy = all(value == "ok" for value in checks.values())
    body: dict[str, object] = {
        "status": "ok" if healthy else "error",
        "down": [name for name, value in checks.items() if value != "ok"],
    }
    if request.user.is_staff:
        body["checks"] = checks
    return JsonResponse(body, status=200 if healthy else 503)
