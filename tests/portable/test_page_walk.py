"""Every page of the site as each role, on the demo's data: the pages the navigation links to (read
from the rendered base template, so a new nav link is walked without editing this file), then
every page those pages link to, one per URL pattern. A page the role may see answers 200, one it
may not a redirect to the login page (anonymous) or 403; no page answers 500.

This module runs twice: on PostgreSQL in the normal suite, and on SQLite (the demo's embedded
database) with `--ds tests.settings_sqlite` (scripts/test.sh, docs/architecture/tests.md)."""

from __future__ import annotations

import datetime as dt
import traceback
from html.parser import HTMLParser
from io import StringIO
from typing import Any
from urllib.parse import urlsplit

import pytest
from django.core.management import call_command
from django.urls import Resolver404, resolve
from django.utils import timezone

from crowdnotes_site.access import Access
from notes.models import ImportedNoteHistory, Post
from notes.roles import ADMIN, CONTRIBUTOR, RATER
from notes.services import draft_job_start
from tests.conftest import CsrfClient

pytestmark = pytest.mark.django_db

ROLES: dict[str, str | None] = {"anonymous": None, "contributor": CONTRIBUTOR, "rater": RATER, "admin": ADMIN}
# Not pages to walk: static files, and the Django admin past its index (Django's own generic pages).
ADMIN_PREFIX = "/django-admin/"
SKIPPED_PREFIXES = ("/static/", "/media/", ADMIN_PREFIX)


class _Links(HTMLParser):
    """A page's local GET links: `<a href>` (htmx: False) and htmx `hx-get` (True); and the
    `<a href>` inside `<nav>`."""

    def __init__(self) -> None:
        super().__init__()
        self.links: list[tuple[str, bool]] = []
        self.nav: list[str] = []
        self._in_nav = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "nav":
            self._in_nav += 1
        values = dict(attrs)
        for name in ("href", "hx-get") if tag == "a" else ("hx-get",):
            url = (values.get(name) or "").split("#")[0]
            if url.startswith("/") and not url.startswith("//"):
                self.links.append((url, name == "hx-get"))
                if self._in_nav and name == "href":
                    self.nav.append(url)

    def handle_endtag(self, tag: str) -> None:
        if tag == "nav":
            self._in_nav -= 1


def _parse(html: str) -> _Links:
    parser = _Links()
    parser.feed(html)
    return parser


def _route(url: str) -> str | None:
    """The URL pattern a local URL resolves to (None: not a page to walk)."""
    path = urlsplit(url).path
    if path.startswith(SKIPPED_PREFIXES) and path != ADMIN_PREFIX:
        return None
    try:
        return resolve(path).route
    except Resolver404:
        return None


def _expected_status(url: str, user: Any | None) -> int | None:
    """200, 302 (to the login page) or 403, from the view's declared access; None: not declared
    (Django's own views: the login page, the admin index)."""
    access = getattr(resolve(urlsplit(url).path).func, "access", None)
    if not isinstance(access, Access):
        return None
    if access.login_required and user is None:
        return 302
    if access.permission and (user is None or not user.has_perm(access.permission)):
        return 403
    return 200


def _problem(url: str, response: Any, want: int | None) -> str | None:
    body = "" if response.streaming else response.content.decode(errors="replace")
    if response.status_code >= 500 or "Traceback" in body:
        exc = getattr(response, "exc_info", None)
        detail = "".join(traceback.format_exception(*exc)) if exc else body[:2000]
        return f"{url}: {response.status_code}\n{detail}"
    if want is not None and response.status_code != want:
        return f"{url}: {response.status_code}, expected {want}"
    if want == 302 and "/login/" not in response["Location"]:
        return f"{url}: redirected to {response['Location']}, not to the login page"
    return None


def _html(response: Any) -> str:
    ok = response.status_code == 200 and "html" in response.get("Content-Type", "") and not response.streaming
    return response.content.decode() if ok else ""


def _demo_data() -> None:
    """The demo as `scripts/demo.sh` loads it (no model training, no LLM, no workers needed), and a
    row of imported status history (the public sample's file) for the delays page."""
    call_command("load_demo", "--no-public-sample", "--no-judging", "--no-living", "--no-benchmark", stdout=StringIO())
    now = timezone.now()
    ImportedNoteHistory.objects.create(
        note_external_id="1", created_at=now - dt.timedelta(hours=30), first_verdict_at=now
    )


def test_it_answers_every_linked_page_for_every_role(make_user: Any) -> None:
    _demo_data()
    clients: dict[str, tuple[CsrfClient, Any]] = {}
    navs: dict[str, list[str]] = {}
    for name, role in ROLES.items():
        client = CsrfClient(raise_request_exception=False)
        user = None
        if role is not None:
            user = make_user(f"walk-{name}", role, staff=role == ADMIN)
            client.force_login(user)
            if role != RATER:  # an open draft: the draft workspace and My notes' draft links
                draft_job_start(post=Post.objects.filter(is_demo=True).earliest("pk"), user=user, urls=[])
        clients[name] = (client, user)
        home = client.get("/")
        assert home.status_code == 200, (name, home.status_code)
        navs[name] = [url for url in dict.fromkeys(_parse(_html(home)).nav) if _route(url) is not None]
    every_nav = list(dict.fromkeys(url for urls in navs.values() for url in urls))
    assert len(navs["admin"]) > len(navs["contributor"]) > len(navs["anonymous"]) > 0, navs
    assert "/analytics/" in navs["admin"], navs["admin"]

    problems: list[str] = []
    walked: dict[str, list[str]] = {}
    for name, (client, user) in clients.items():
        # Every role's nav page as this role: the page, or the refusal its access declares.
        queue = _parse(_html(client.get("/"))).links
        for url in every_nav:
            want = _expected_status(url, user)
            response = client.get(url)
            if problem := _problem(url, response, 200 if url in navs[name] and want is None else want):
                problems.append(f"[{name}] nav {problem}")
            queue += _parse(_html(response)).links
        # Then every page linked from there on, one URL per URL pattern (each pattern is one view).
        seen = {_route(url) for url in ["/", *every_nav]}
        walked[name] = []
        while queue:
            url, htmx = queue.pop(0)
            route = _route(url)
            if route is None or route in seen:
                continue
            seen.add(route)
            response = client.get(url, headers={"HX-Request": "true"} if htmx else {})
            walked[name].append(url)
            want = _expected_status(url, user)
            if want == 200 and response.status_code in (301, 302):
                want = None  # a link may lead on (a finished run's page to its result)
            if problem := _problem(url, response, want):
                problems.append(f"[{name}] link {problem}")
            queue += _parse(_html(response)).links
    assert problems == [], "\n\n".join(problems)
    # The analytics pages, delays included, are reached from the admin's nav.
    assert {"/analytics/delays/", "/analytics/spikes/", "/analytics/judging/"} <= set(walked["admin"]), walked["admin"]
