"""Abuse limits: per-user (or per-client-address for anonymous visitors) request rates, counted in
a sliding window on the "limits" cache (Redis in production), and the 429 answer when one is hit.

The window slides (a log of the accepted requests' times per key, a Redis sorted set trimmed and
counted in one atomic script): "3/h" means at most 3 accepted POSTs in any 60 minutes, so 3 at
12:59 and a 4th at 13:01 is refused (django-ratelimit's fixed windows let it through). Refused
requests are not logged, so a client that keeps knocking gets in again as soon as its oldest
accepted request leaves the window.

`@limited("contribute")` counts the POSTs of one group of views; the rates live in
settings.RATE_LIMITS ("10/h" style, one env variable each) and are read on every request, so a
test or an operator can change them without a restart of the module. Login lockout after wrong
passwords is django-axes' job (settings AXES_*, crowdnotes_site/lockout.py), not this module's.
The client address is the one the trusted proxies saw (crowdnotes_site/clientip.py).

When the counters cannot be read (Redis down or slow), a group fails open or closed:
reads (GET) are never counted, so they never depend on Redis; the POSTs that start costly work
(CPU or LLM: contribute, evidence, draft, preflight, prefetch, suggestion) or that the lockout does not
otherwise guard (signup) are refused with a 503 "try again in a minute" page, because letting
them through uncounted would let anyone queue unbounded work during an outage; log-in (guarded
by the lockout in the database) and ratings (one small row each) go through uncounted.
"""

from __future__ import annotations

import functools
import logging
import re
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.contrib import messages
from django.core.cache import caches
from django.core.cache.backends.redis import RedisCache
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from redis.exceptions import RedisError

from crowdnotes_site.clientip import client_ip

logger = logging.getLogger(__name__)

# The cache that holds the counters (settings.CACHES: Redis with REDIS_URL, else per process).
CACHE = "limits"

# What a person was doing when the limit was hit, for the message.
ACTIONS = {
    "login": "log-in attempts",
    "signup": "sign-ups from your network",
    "contribute": "flagged posts",
    "evidence": "evidence additions",
    "draft": "draft requests",
    "preflight": "pre-flight checks",
    "rating": "ratings",
    "suggestion": "suggestions",
    "note_request": "note requests",
    "prefetch": "links read ahead",
    "supernote": "Supernote runs started by you",
    "supernote_site": "Supernote runs started on the whole site",
    "retry": "retries",
    "x_write": "notes started from X posts",
}


# Refused while the counters are unreachable (see the module's docstring); the others go through.
FAIL_CLOSED = frozenset(
    {
        "signup",
        "contribute",
        "evidence",
        "draft",
        "preflight",
        "prefetch",
        "suggestion",
        "supernote",
        "supernote_site",
        "note_request",
        "retry",
        "x_write",
    }
)


def _rate(group: str, request: HttpRequest) -> str:
    return settings.RATE_LIMITS[group]


def _site_key(group: str, request: HttpRequest) -> str:
    return "site"


_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_RATE = re.compile(r"^\s*(\d+)\s*/\s*(\d*)\s*([smhd])\s*$")

# Trim the key's log to the window, refuse when it holds `limit` times already, else log `now`.
_SLIDING_LOG = """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', tonumber(ARGV[1]) - tonumber(ARGV[2]))
local past = redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[3])
if not past then redis.call('ZADD', KEYS[1], ARGV[1], ARGV[4]) end
redis.call('PEXPIRE', KEYS[1], math.ceil(tonumber(ARGV[2]) * 1000))
if past then return 1 end
return 0
"""
_local_logs: dict[str, list[float]] = {}
_local_lock = threading.Lock()


def parse_rate(rate: str) -> tuple[int, float]:
    """ "30/m" -> (30, 60.0) and "5/10m" -> (5, 600.0): requests allowed per window of seconds."""
    match = _RATE.match(rate)
    if match is None:
        raise ValueError(f"a rate reads like '30/m' or '5/10m', got {rate!r}")
    count, multiple, unit = match.groups()
    return int(count), float(int(multiple or 1) * _UNITS[unit])


def _client_key(request: HttpRequest) -> str:
    user = getattr(request, "user", None)
    if user is not None and user.is_authenticated:
        return f"user:{user.pk}"
    return f"ip:{client_ip(request)}"


def sliding_window_hit(key: str, rate: str, now: float | None = None) -> bool:
    """Log one request under `key` unless `rate` is already reached in the sliding window ending
    now: True when it was refused. Atomic on Redis; a per-process log on another cache (dev)."""
    limit, window = parse_rate(rate)
    now = time.time() if now is None else now
    cache = caches[CACHE]
    if isinstance(cache, RedisCache):
        full_key = cache.make_key(f"sliding:{key}")
        client = cache._cache.get_client(full_key, write=True)
        member = f"{now:.6f}:{uuid.uuid4().hex[:8]}"
        return bool(client.eval(_SLIDING_LOG, 1, full_key, now, window, limit, member))
    with _local_lock:
        log = [t for t in _local_logs.get(key, []) if t > now - window]
        past = len(log) >= limit
        if not past:
            log.append(now)
        _local_logs[key] = log
        return past


def _past_rate(request: HttpRequest, group: str, key: Any = "user_or_ip") -> bool | None:
    """Count this POST against `group` (per user or client by default, or for the whole site with
    key=_site_key): past the rate, within it, or None when the counters could not be reached
    (logged). Other methods are never counted."""
    if request.method != "POST":
        return False
    who = key(group, request) if callable(key) else _client_key(request)
    try:
        return sliding_window_hit(f"{group}:{who}", _rate(group, request))
    except (RedisError, OSError) as exc:
        logger.warning("rate limit %s: counters unreachable (%s): %s", group, exc.__class__.__name__, exc)
        return None


def _limit(group: str, key: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Refuse (429) the POSTs of `group` past its rate counted under `key`; with the counters
    unreachable, refuse (503) the groups in FAIL_CLOSED."""
    if group not in ACTIONS:
        raise ValueError(f"unknown rate-limit group {group!r}")

    def decorate(view: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(view)
        def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
            verdict = _past_rate(request, group, key=key)
            if verdict is None and group in FAIL_CLOSED:
                return _refuse(request, unavailable_message(group), status=503)
            if verdict:
                return _refuse(request, limit_message(group), status=429)
            return view(request, *args, **kwargs)

        wrapped.limit_group = group  # type: ignore[attr-defined]  # which group limits a view (tests read it)
        return wrapped

    return decorate


def limited(group: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Limit the POSTs of `group` per user, or per client address when anonymous."""
    return _limit(group, "user_or_ip")


def limited_site(group: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Limit the POSTs of `group` counted for everybody together: a ceiling on costly work
    (Supernote runs) that many accounts cannot get around. Put it under `@limited` (per user), so a
    person over their own limit does not use up the site's."""
    return _limit(group, _site_key)


def refusal(request: HttpRequest, group: str) -> HttpResponse | None:
    """Count this POST against `group` and answer its refusal (429, or 503 with the counters
    unreachable and the group failing closed), or None when it may go on. For a view whose
    actions are limited differently (only a snippet's retry starts work)."""
    verdict = _past_rate(request, group)
    if verdict is None and group in FAIL_CLOSED:
        return _refuse(request, unavailable_message(group), status=503)
    if verdict:
        return _refuse(request, limit_message(group), status=429)
    return None


def limit_state(request: HttpRequest, group: str) -> str:
    """Count this POST against `group` without refusing it: "within", "over" the rate, or
    "unavailable" (counters unreachable and the group fails closed). For background requests (the
    head start) whose page must not reload on a limit."""
    verdict = _past_rate(request, group)
    if verdict is None:
        return "unavailable" if group in FAIL_CLOSED else "within"
    return "over" if verdict else "within"


def limit_message(group: str) -> str:
    rate = settings.RATE_LIMITS.get(group, "")
    count, _, period = rate.partition("/")
    per = {"s": "second", "m": "minute", "h": "hour", "d": "day"}.get(period[-1:], period)
    return (
        f"Too many {ACTIONS.get(group, 'requests')}: at most {count} per {per}. "
        "Nothing was saved this time; please wait a little and try again."
    )


def unavailable_message(group: str) -> str:
    return (
        f"Our request counter is unreachable right now, so {ACTIONS.get(group, 'requests')} are paused "
        "(reading the site still works). Nothing was saved; please try again in a minute."
    )


def _refuse(request: HttpRequest, text: str, *, status: int) -> HttpResponse:
    """The refusal page (429 past a rate, 503 while the counters are unreachable). Under htmx
    (which swaps only 2xx answers) the page reloads and shows the same text as a message."""
    if getattr(request, "htmx", False):
        messages.error(request, text)
        response = HttpResponse(status=204)
        response["HX-Refresh"] = "true"
        return response
    template = "429.html" if status == 429 else "503.html"
    response = render(request, template, {"message": text}, status=status)
    if status == 503:
        response["Retry-After"] = "60"
    return response
