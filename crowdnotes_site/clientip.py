"""The client's address as the trusted proxies saw it: the one key of every per-address limit.

Behind a reverse proxy `REMOTE_ADDR` is the proxy, so keying rates and the login lockout on it
would put every visitor in one bucket. Each trusted proxy appends the address it received the
request from to `X-Forwarded-For`; with `TRUSTED_PROXY_COUNT = n` the client is the n-th entry
from the right. Entries further left were written by the client and are ignored, so a forged
`X-Forwarded-For: 1.2.3.4` cannot choose the key. With n = 0 (the default: the app is reached
directly) the header is not read at all.

Used by the rate limits (crowdnotes_site/limits.py) and django-axes (`AXES_CLIENT_IP_CALLABLE`).
A TRUSTED_PROXY_COUNT that the requests contradict (0 while they carry the header, or more
proxies than their header shows) is logged as an error, once per process and kind.
"""

from __future__ import annotations

import ipaddress
import logging

from django.conf import settings
from django.http import HttpRequest

logger = logging.getLogger(__name__)
_reported: set[str] = set()  # contradictions already logged by this process (once each)

# An empty REMOTE_ADDR (a proxy on a Unix socket with TRUSTED_PROXY_COUNT = 0): one shared key.
_UNKNOWN = "0.0.0.0"  # noqa: S104 - an address to key on, not one to bind to


def forwarded_client(forwarded_for: str, remote_addr: str, trusted_hops: int) -> str:
    """The client address from an `X-Forwarded-For` value, trusting its last `trusted_hops` entries.

    A chain shorter than the trusted hops (a request that did not pass every proxy) gives its
    leftmost entry; a missing header, or an entry that is not an IP address, gives `remote_addr`."""
    if trusted_hops <= 0:
        return remote_addr
    entries = [entry.strip() for entry in forwarded_for.split(",") if entry.strip()]
    if not entries:
        return remote_addr
    candidate = entries[-trusted_hops] if len(entries) >= trusted_hops else entries[0]
    try:
        return str(ipaddress.ip_address(candidate))
    except ValueError:
        return remote_addr


def proxy_count_contradiction(forwarded_for: str, trusted_hops: int) -> str | None:
    """Why a request's `X-Forwarded-For` contradicts TRUSTED_PROXY_COUNT, or None.

    0 while requests carry the header: the app is behind a proxy it does not trust, so every
    visitor is keyed on the proxy's address (one limit and lockout bucket for everybody). n with
    fewer than n entries: there are fewer proxies than that, so the client's own header decides
    its key and it can pick a new one for every request."""
    entries = [entry for entry in forwarded_for.split(",") if entry.strip()]
    if trusted_hops <= 0 and entries:
        return (
            "requests arrive with X-Forwarded-For but TRUSTED_PROXY_COUNT is 0: behind a proxy every visitor "
            "shares the proxy's address, so one visitor's rate limits and log-in lockout hit everybody. Set "
            "TRUSTED_PROXY_COUNT to the number of proxies in front of the app (nginx alone: 1)."
        )
    if trusted_hops > 0 and len(entries) < trusted_hops:
        return (
            f"a request arrived with {len(entries)} X-Forwarded-For entr{'y' if len(entries) == 1 else 'ies'} but "
            f"TRUSTED_PROXY_COUNT is {trusted_hops}: with fewer proxies than that, a client's own header chooses "
            "the address its limits and lockout are keyed on. Set TRUSTED_PROXY_COUNT to the number of proxies."
        )
    return None


def _report_contradiction(forwarded_for: str, trusted_hops: int) -> None:
    """Log (ERROR, once per process and kind) a TRUSTED_PROXY_COUNT the requests contradict."""
    problem = proxy_count_contradiction(forwarded_for, trusted_hops)
    if problem is not None:
        kind = problem[:20]
        if kind not in _reported:
            _reported.add(kind)
            logger.error("TRUSTED_PROXY_COUNT looks wrong: %s", problem)


def client_ip(request: HttpRequest) -> str:
    """The address limits and the login lockout key on (see the module's docstring)."""
    _report_contradiction(request.META.get("HTTP_X_FORWARDED_FOR", ""), settings.TRUSTED_PROXY_COUNT)
    return forwarded_client(
        request.META.get("HTTP_X_FORWARDED_FOR", ""),
        request.META.get("REMOTE_ADDR", "") or _UNKNOWN,
        settings.TRUSTED_PROXY_COUNT,
    )
