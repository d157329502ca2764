"""/healthz: is the database reachable, and the Celery broker?"""

from __future__ import annotations

from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache

from crowdnotes_site.access import PUBLIC, endpoint


def _check_database() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        cursor.fetchone()
    return "ok"


def _check_broker() -> str:
    from crowdnotes_site.celery import app

    with app.connection_for_write() as conn:
        conn.ensure_connection(max_retries=1, timeout=2)
    return "ok"


@never_cache
@endpoint(methods=["GET"], permission=PUBLIC)
def healthz(request: HttpRequest) -> JsonResponse:
    checks: dict[str, str] = {}
    for name, check in (("database", _check_database), ("broker", _check_broker)):
        try:
            checks[name] = check()
        except Exception as exc:  # any failure means unhealthy; say which and why
            checks[name] = f"error: {exc.__class__.__name__}: {exc}"[:300]
    healthy = all(value == "ok" for value in checks.values())
    return JsonResponse({"status": "ok" if healthy else "error", "checks": checks}, status=200 if healthy else 503)
