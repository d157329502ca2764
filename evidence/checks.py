"""Start-up check of the fetcher's local allow-list (EVIDENCE_ALLOWED_LOCAL): well-formed, and
naming none of the ports that must never be fetched (the app itself, the database, Redis), and
refused while SITE_PORTS is unset (the app's own port would be a guess)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import Error, register


@register()
def evidence_allowed_local(app_configs: Any = None, **kwargs: Any) -> list[Any]:
    # Deferred: the fetcher imports urllib3; this module loads in every django.setup(), the check
    # runs only under `manage.py check` and the server's start.
    from evidence.fetch import parse_host_ports

    try:
        pairs = parse_host_ports(settings.EVIDENCE_ALLOWED_LOCAL)
    except ValueError as exc:
        return [Error(f"EVIDENCE_ALLOWED_LOCAL: {exc}", id="evidence.E001")]
    never = set(settings.EVIDENCE_NEVER_LOCAL_PORTS)
    if pairs and not settings.SITE_PORTS_SET:
        return [
            Error(
                "EVIDENCE_ALLOWED_LOCAL is set but SITE_PORTS is not: the app's own port is unknown, so an "
                "entry of the allow-list could be the app itself. Set SITE_PORTS to the port(s) the app is "
                "served on (e.g. SITE_PORTS=8000).",
                id="evidence.E003",
            )
        ]
    return [
        Error(
            f"EVIDENCE_ALLOWED_LOCAL names {host}:{port}, a port of the app, the database or Redis; "
            "the fetcher refuses it anyway",
            id="evidence.E002",
        )
        for host, port in sorted(pairs)
        if port in never
    ]
