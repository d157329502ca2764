"""Browser tests' sign-in (defined once): a session made by Django's test client, put into the
browser as its cookie, so a test signs in as any user in one step without the login form (the
form itself has its own flows in tests/browser)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.test import Client


def sign_in(page: Any, live_server: Any, user: Any) -> None:
    """Sign the Playwright `page` in as `user` on `live_server` (any earlier sign-in is dropped)."""
    client = Client()
    client.force_login(user)
    page.context.clear_cookies()
    page.context.add_cookies(
        [{"name": settings.SESSION_COOKIE_NAME,
          "value": client.cookies[settings.SESSION_COOKIE_NAME].value,
          "url": live_server.url}]
    )  # fmt: skip


def after_htmx_swap(page: Any, action: Any) -> None:
    """Do `action` (a click or check that makes htmx swap part of the page) and return once the
    swap has settled, so the next step meets the new elements, never the ones being replaced."""
    page.evaluate(
        "() => { window.__htmxSettled = false;"
        " document.body.addEventListener('htmx:afterSettle', () => { window.__htmxSettled = true }, {once: true}) }"
    )
    action()
    page.wait_for_function("() => window.__htmxSettled === true")
