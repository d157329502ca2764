"""Permissions in one query: Django's ModelBackend reads a user's own permissions and their groups'
in two queries on every signed-in request (the nav of every page asks `perms`). This backend,
listed before ModelBackend, reads both in one UNION query and stores the set where ModelBackend
keeps it (`user._perm_cache`), so ModelBackend then answers from the same set without a query.
It authenticates nobody and loads no user (no `get_user`: logins and sessions keep naming
ModelBackend)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import Permission


class OneQueryPermissionsBackend:
    def authenticate(self, request: Any, **credentials: Any) -> None:
        return None

    def get_all_permissions(self, user_obj: Any, obj: Any = None) -> set[str]:
        if not user_obj.is_active or user_obj.is_anonymous or obj is not None:
            return set()
        if not hasattr(user_obj, "_perm_cache"):
            fields = ("content_type__app_label", "codename")
            if user_obj.is_superuser:
                rows = Permission.objects.values_list(*fields)
            else:
                own = Permission.objects.filter(user=user_obj).values_list(*fields).order_by()
                rows = own.union(Permission.objects.filter(group__user=user_obj).values_list(*fields).order_by())
            user_obj._perm_cache = {f"{app_label}.{codename}" for app_label, codename in rows}
        return user_obj._perm_cache  # type: ignore[no-any-return]

    def has_perm(self, user_obj: Any, perm: str, obj: Any = None) -> bool:
        return bool(user_obj.is_active) and perm in self.get_all_permissions(user_obj, obj)

    def has_module_perms(self, user_obj: Any, app_label: str) -> bool:
        return bool(user_obj.is_active) and any(
            p[: p.index(".")] == app_label for p in self.get_all_permissions(user_obj)
        )
