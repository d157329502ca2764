"""How every view states its HTTP methods and the permission it needs.

`@endpoint(methods=["GET"], permission="notes.add_post")` rejects other methods with 405,
sends anonymous visitors to the login page, and answers 403 to users without the
permission. The declaration is kept on the view so the role-matrix test can read it.

Views annotate `request` with one of the request types below, for the type checker:
`HtmxHttpRequest` (any view; HtmxMiddleware sets `request.htmx` on every request) or
`AuthenticatedHttpRequest` (only views whose endpoint requires login; the role-matrix test
checks that no public view claims an authenticated user).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed
from django_htmx.middleware import HtmxDetails

if TYPE_CHECKING:
    from django.contrib.auth.models import User

PUBLIC = None


class HtmxHttpRequest(HttpRequest):
    """A request that went through django_htmx's HtmxMiddleware (installed for every request)."""

    htmx: HtmxDetails


class AuthenticatedHttpRequest(HtmxHttpRequest):
    """A request to a view whose `@endpoint` requires login: `request.user` is never anonymous."""

    user: User


@dataclass(frozen=True)
class Access:
    methods: tuple[str, ...]
    permission: str | None  # None: anyone, including anonymous visitors
    login_required: bool


def endpoint(
    *, methods: Sequence[str], permission: str | None, login_required: bool | None = None
) -> Callable[[Callable[..., HttpResponse]], Callable[..., HttpResponse]]:
    access = Access(
        methods=tuple(m.upper() for m in methods),
        permission=permission,
        login_required=permission is not None if login_required is None else login_required,
    )

    def decorate(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
        @functools.wraps(view)
        def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            if request.method not in access.methods:
                return HttpResponseNotAllowed(access.methods)
            if access.login_required and not request.user.is_authenticated:
                return redirect_to_login(request.get_full_path())
            if access.permission and not request.user.has_perm(access.permission):
                raise PermissionDenied("Your account does not have the role this page needs.")
            return view(request, *args, **kwargs)

        wrapper.access = access  # type: ignore[attr-defined]
        return wrapper

    return decorate
