"""The client's address as the trusted proxies saw it: the one key of every per-address limit.

Behind a reverse proxy `REMOTE_ADDR` is the proxy, so keying rates and the login lockout on it
would put every visitor in one bucket. Each trusted proxy appends the address it received the
request from to `X-Forwarded-For`; with `TRUSTED_PROXY_COUNT = n` the client is the n-th entry
from the right. Entries further left were written by the client and are ignored, so a forged
`X-Forwarded-For: 1.2.3.4` cannot choose the key. With n = 0 (the default: the app is reached
directly) the header is not read at all.

Used by django-ratelimit (`RATELIMIT_IP_META_KEY`) and django-axes (`AXES_CLIENT_IP_CALLABLE`).
"""

from __future__ import annotations

import ipaddress

from django.conf import settings
from django.http import HttpRequest

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


def client_ip(request: HttpRequest) -> str:
    """The address limits and the login lockout key on (see the module's docstring)."""
    return forwarded_client(
        request.META.get("HTTP_X_FORWARDED_FOR", ""),
        request.META.get("REMOTE_ADDR", "") or _UNKNOWN,
        settings.TRUSTED_PROXY_COUNT,
    )
