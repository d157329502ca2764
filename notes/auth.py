"""Permissions that depend on a setting: with SUPERNOTES_OPEN_TO_TRUSTED on, members of the
"Trusted contributor" group (notes.roles.TRUSTED, given by an admin) hold notes.add_supernoterun,
so they may open the stuck posts page and start Supernote runs. Off (the default), Supernote runs
are admins' only: each is ~300 LLM calls. An authentication backend that authenticates nobody;
`user.has_perm` (views' @endpoint, templates' `perms`) asks it after the model backend."""

from __future__ import annotations

from typing import Any

from django.conf import settings

from notes.roles import TRUSTED

TRUSTED_PERMISSIONS = frozenset({"notes.add_supernoterun"})


class TrustedContributorBackend:
    def authenticate(self, request: Any, **credentials: Any) -> None:
        return None

    def get_user(self, user_id: int) -> None:
        return None

    def has_perm(self, user_obj: Any, perm: str, obj: Any = None) -> bool:
        if perm not in TRUSTED_PERMISSIONS or not settings.SUPERNOTES_OPEN_TO_TRUSTED:
            return False
        if not user_obj.is_active or user_obj.is_anonymous:
            return False
        cached = getattr(user_obj, "_trusted_contributor", None)
        if cached is None:
            cached = user_obj.groups.filter(name=TRUSTED).exists()
            user_obj._trusted_contributor = cached
        return bool(cached)
