"""The X API request budget, shared by every worker and web process through the cache (Redis).

X counts requests per endpoint family in fixed windows and says where each answer leaves the
window: `x-rate-limit-remaining` (requests left) and `x-rate-limit-reset` (epoch seconds when the
window starts again). The budget keeps both per bucket ("notes": the Community Notes endpoints,
90 per 15 minutes; "tweets": the post lookup), takes one request off before each call (an atomic
`decr`, so two workers cannot both spend the last one) and, after a 429 or when nothing is left,
refuses every request until the reset: the caller gets `RateLimited(reset_at)` and re-queues its
work with that countdown. No request is ever sent inside a closed window. While no window is known
(nothing answered yet, or the last one reset), one request at a time goes out to learn it (the
probe); the others are refused for PROBE_WAIT_S, so workers starting together cannot all send.
A command, which may wait, sleeps until each reset instead (`ResetWaiter`, within
X_API_MAX_TOTAL_WAIT_S in all).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core.cache import caches

log = logging.getLogger(__name__)

PREFIX = "xapi:budget"
BUCKETS = ("notes", "tweets")
# How long a request waits while another one learns the window (its answer usually takes well under this).
PROBE_WAIT_S = 2.0


class RateLimited(Exception):
    """The budget is spent until `reset_at` (epoch seconds)."""

    def __init__(self, reset_at: float, bucket: str = "notes") -> None:
        self.reset_at = reset_at
        self.bucket = bucket
        super().__init__(f"X API rate limit ({bucket}): the next request is allowed at {reset_at:.0f}")

    def wait_s(self, now: float | None = None) -> float:
        """Seconds to wait, with one second of margin for clock skew (never negative)."""
        return max(0.0, self.reset_at - (time.time() if now is None else now)) + 1.0


@dataclass(frozen=True)
class BudgetState:
    bucket: str
    remaining: int | None  # None: no answer seen in the current window
    reset_at: float | None
    blocked_until: float | None


def _cache() -> Any:
    return caches["default"]


def _key(bucket: str, name: str) -> str:
    return f"{PREFIX}:{bucket}:{name}"


def _ttl(until: float, now: float) -> int:
    return max(1, int(until - now) + 60)


def acquire(bucket: str = "notes", *, now: float | None = None, probe_ttl_s: float = 30.0) -> bool:
    """Take one request from the bucket or raise RateLimited (never waits). True when this request
    is the bucket's probe (no window known): the caller calls end_probe once it has its answer or
    gave up; a probe never ended frees itself after `probe_ttl_s`."""
    now = time.time() if now is None else now
    cache = _cache()
    blocked = cache.get(_key(bucket, "blocked_until"))
    if blocked is not None and now < float(blocked):
        raise RateLimited(float(blocked), bucket)
    reset = cache.get(_key(bucket, "reset"))
    if reset is None or now >= float(reset):
        return _probe(cache, bucket, now, probe_ttl_s)
    try:
        remaining = cache.decr(_key(bucket, "remaining"))
    except ValueError:  # the counter expired meanwhile: learn the window again
        return _probe(cache, bucket, now, probe_ttl_s)
    if remaining < 0:
        cache.set(_key(bucket, "blocked_until"), float(reset), _ttl(float(reset), now))
        raise RateLimited(float(reset), bucket)
    return False


def _probe(cache: Any, bucket: str, now: float, probe_ttl_s: float) -> bool:
    if cache.add(_key(bucket, "probe"), now, max(1, int(probe_ttl_s))):
        return True
    raise RateLimited(now + PROBE_WAIT_S, bucket)


def end_probe(bucket: str) -> None:
    """The probe has its answer (observed) or none will come: the next request may go."""
    _cache().delete(_key(bucket, "probe"))


def observe(bucket: str, status: int, headers: Any, *, now: float | None = None, window_s: int = 900) -> None:
    """Refresh the bucket from an answer's headers; a 429 closes it until its reset."""
    now = time.time() if now is None else now
    cache = _cache()
    reset_raw = headers.get("x-rate-limit-reset")
    remaining_raw = headers.get("x-rate-limit-remaining")
    try:
        reset = float(reset_raw) if reset_raw is not None else None
    except ValueError:
        reset = None
    try:
        remaining = int(remaining_raw) if remaining_raw is not None else None
    except ValueError:
        remaining = None
    if status == 429:
        until = reset if reset is not None and reset > now else now + window_s
        cache.set(_key(bucket, "blocked_until"), until, _ttl(until, now))
        return
    if reset is None or remaining is None:
        return
    ttl = _ttl(reset, now)
    cache.set(_key(bucket, "reset"), reset, ttl)
    cache.set(_key(bucket, "remaining"), remaining, ttl)
    if remaining <= 0 and reset > now:
        cache.set(_key(bucket, "blocked_until"), reset, ttl)


def state(bucket: str = "notes") -> BudgetState:
    cache = _cache()
    remaining = cache.get(_key(bucket, "remaining"))
    reset = cache.get(_key(bucket, "reset"))
    blocked = cache.get(_key(bucket, "blocked_until"))
    return BudgetState(
        bucket=bucket,
        remaining=None if remaining is None else max(0, int(remaining)),
        reset_at=None if reset is None else float(reset),
        blocked_until=None if blocked is None else float(blocked),
    )


def clear() -> None:
    """Forget every bucket (tests, and an operator after changing credentials)."""
    _cache().delete_many([_key(b, n) for b in BUCKETS for n in ("remaining", "reset", "blocked_until", "probe")])


# --- Waiting for a reset (the commands) ------------------------------------------------------


class WaitCapExceeded(Exception):
    """X kept answering 429: the next reset lies past the command's cap on its total wait."""


class ResetWaiter:
    """The commands' wait on a 429 / spent budget: a sleep until each reset, at most
    X_API_MAX_TOTAL_WAIT_S in all for one command; a reset that would pass the cap raises
    WaitCapExceeded (naming what X sent) at once instead of sleeping."""

    def __init__(self, *, cap_s: float | None = None, sleep: Callable[[float], None] = time.sleep) -> None:
        self.cap_s = float(settings.X_API_MAX_TOTAL_WAIT_S if cap_s is None else cap_s)
        self.sleep = sleep
        self.waited_s = 0.0
        self.answers = 0

    def __call__(self, limited: RateLimited) -> None:
        self.answers += 1
        wait = limited.wait_s()
        if self.waited_s + wait > self.cap_s:
            raise WaitCapExceeded(
                f"X answered 429 Too Many Requests ({limited.bucket}) {self.answers} time"
                f"{'s' if self.answers != 1 else ''}; waited {self.waited_s:.0f} s in all, and its next reset is "
                f"{wait:.0f} s away, past the cap on the total wait (X_API_MAX_TOTAL_WAIT_S = {self.cap_s:.0f} s). "
                "Nothing fetched so far is lost; run the command again later."
            )
        log.info("X API rate limit: waiting %.0f s for the reset", wait)
        self.sleep(wait)
        self.waited_s += wait


def sleep_until_reset(limited: RateLimited) -> None:
    """The commands' wait on a 429 / spent budget: one sleep until the reset (no polling)."""
    wait = limited.wait_s()
    log.info("X API rate limit: waiting %.0f s for the reset", wait)
    time.sleep(wait)
