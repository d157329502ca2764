"""Login lockout that a stranger cannot use to lock someone else out (settings.AXES_HANDLER).

django-axes' database handler locks the pair (username, client address) after
AXES_FAILURE_LIMIT wrong passwords (settings.AXES_LOCKOUT_PARAMETERS); the client address is
the real one behind the proxies (crowdnotes_site/clientip.py). A wrong-password spree from one
client therefore locks only that client out of that account. On top of it, a slower global
limit per username: AXES_USERNAME_FAILURE_LIMIT wrong passwords from all clients together within
the cool-off lock the account for everyone, to stop guessing spread over many addresses. A
locked client's further attempts are not counted (AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT
off), so each client adds at most AXES_FAILURE_LIMIT to that total: locking an account for
everyone takes AXES_USERNAME_FAILURE_LIMIT / AXES_FAILURE_LIMIT distinct clients at least.

The state lives in PostgreSQL (axes' AccessAttempt table), not in the cache, so log-in and its
lockout keep working while Redis is down.
"""

from __future__ import annotations

from typing import Any

from axes.attempts import get_cool_off_threshold
from axes.handlers.database import AxesDatabaseHandler
from axes.helpers import get_client_username, get_failure_limit
from axes.models import AccessAttempt
from django.conf import settings
from django.db.models import Sum
from django.http import HttpRequest


def username_failures(request: HttpRequest, username: str | None) -> int:
    """Wrong passwords for `username` from every client within the cool-off window."""
    if not username:
        return 0
    attempts = AccessAttempt.objects.filter(username=username, attempt_time__gte=get_cool_off_threshold(request))
    return attempts.aggregate(total=Sum("failures_since_start"))["total"] or 0


class PairAndUsernameHandler(AxesDatabaseHandler):
    """Locked when the pair (username, client) reached AXES_FAILURE_LIMIT, or the username alone
    reached AXES_USERNAME_FAILURE_LIMIT (then `request.axes_locked_everywhere` is set for the page)."""

    def get_failures(self, request: Any, credentials: dict[str, Any] | None = None) -> int:
        pair = super().get_failures(request, credentials)
        limit = get_failure_limit(request, credentials)
        if pair >= limit:
            return pair
        total = username_failures(request, get_client_username(request, credentials))
        if total >= settings.AXES_USERNAME_FAILURE_LIMIT:
            request.axes_locked_everywhere = True
            return limit
        return pair
