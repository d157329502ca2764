"""The role matrix: every view of the site, for every role, is allowed or refused as declared."""

from __future__ import annotations

import inspect
import typing
from typing import Any

import pytest
from django.contrib.auth.backends import ModelBackend
from django.urls import URLPattern, URLResolver, get_resolver

from crowdnotes_site.access import Access, AuthenticatedHttpRequest
from notes.models import Note
from notes.roles import ADMIN, CONTRIBUTOR, RATER, ROLE_PERMISSIONS
from notes.services import post_create

ROLES = [None, CONTRIBUTOR, RATER, ADMIN]
OUR_APPS = ("notes", "evidence", "judging", "crowdnotes_site", "xnotes")


def _our_patterns(resolver: URLResolver | None = None, prefix: str = "") -> list[tuple[str, URLPattern]]:
    resolver = resolver or get_resolver()
    found: list[tuple[str, URLPattern]] = []
    for entry in resolver.url_patterns:
        if isinstance(entry, URLResolver):
            found += _our_patterns(entry, prefix + str(entry.pattern))
        elif entry.callback.__module__.split(".")[0] in OUR_APPS:
            found.append((prefix + str(entry.pattern), entry))
    return found


def test_it_declares_methods_and_permission_on_every_view() -> None:
    undeclared = [route for route, p in _our_patterns() if not isinstance(getattr(p.callback, "access", None), Access)]
    assert undeclared == []


def test_it_requires_login_wherever_a_view_is_typed_for_a_signed_in_user() -> None:
    """`request: AuthenticatedHttpRequest` tells the type checker `request.user` is never anonymous:
    only true when the view's endpoint sends anonymous visitors to the login page first."""
    claims = {}
    for route, p in _our_patterns():
        request_type = typing.get_type_hints(inspect.unwrap(p.callback)).get("request")
        if isinstance(request_type, type) and issubclass(request_type, AuthenticatedHttpRequest):
            access = getattr(p.callback, "access", None)
            claims[route] = isinstance(access, Access) and access.login_required
    assert claims and all(claims.values()), claims


def _fill(route: str, objects: dict[str, int]) -> str:
    import re

    return "/" + re.sub(r"<(?:\w+:)?(\w+)>", lambda m: str(objects.get(m.group(1), 1)), route)


@pytest.mark.django_db
@pytest.mark.parametrize("role", ROLES, ids=lambda r: r or "anonymous")
def test_it_allows_or_refuses_each_view_by_role(role: str | None, make_user: Any) -> None:
    from tests.conftest import CsrfClient

    owner = make_user(f"owner-{role}", CONTRIBUTOR)
    post = post_create(text="Garlic cures the flu.", flagged_by=owner)
    note = Note.objects.create(post=post, text="No trial shows garlic cures influenza.")
    objects = {"post_id": post.pk, "note_id": note.pk, "pk": note.pk}
    client = CsrfClient()
    user = None
    if role:
        user = make_user(f"user-{role}", role, staff=role == ADMIN)
        client.force_login(user)

    checked = 0
    for route, pattern in _our_patterns():
        access: Access = pattern.callback.access  # type: ignore[attr-defined]
        url = _fill(route, objects)
        for method in access.methods:
            response = client.generic(method, url) if method != "POST" else client.post(url, {})
            checked += 1
            if access.permission is None and not access.login_required:
                assert response.status_code not in (401, 403), (role, method, url)
            elif user is None:
                assert response.status_code == 302 and "/accounts/login/" in response["Location"], (method, url)
            elif access.permission is None or user.has_perm(access.permission):
                assert response.status_code != 403, (role, method, url)
            else:
                assert response.status_code == 403, (role, method, url)
    assert checked > 0


def test_it_gives_admins_every_permission_of_the_roles() -> None:
    granted_to_others = {p for role in (CONTRIBUTOR, RATER) for p in ROLE_PERMISSIONS[role]}
    admin_apps = {p.split(".")[0] for p in ROLE_PERMISSIONS[ADMIN]}
    assert {p.split(".")[0] for p in granted_to_others} <= admin_apps


@pytest.mark.django_db
def test_it_refuses_other_methods(anon_client: Any) -> None:
    assert anon_client.options("/").status_code == 405


@pytest.mark.django_db
def test_permissions_come_from_one_query_and_answer_as_the_model_backend(make_user: Any) -> None:
    """crowdnotes_site/permissions.py: a user's own and their groups' permissions, in one query."""
    from django.contrib.auth.models import Permission
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from notes.roles import CONTRIBUTOR

    user = make_user("perry", CONTRIBUTOR)
    user.user_permissions.add(Permission.objects.get(codename="view_judgedecision"))
    fresh = type(user).objects.get(pk=user.pk)
    with CaptureQueriesContext(connection) as captured:
        assert fresh.has_perm("notes.add_post")  # from the group
        assert fresh.has_perm("judging.view_judgedecision")  # the user's own
        assert not fresh.has_perm("notes.run_scoring")
        assert fresh.has_module_perms("judging") and not fresh.has_module_perms("xnotes")
    assert len(captured) == 1
    assert fresh.get_all_permissions() == ModelBackend().get_all_permissions(type(user).objects.get(pk=user.pk))
    fresh.is_active = False
    assert not fresh.has_perm("notes.add_post")
