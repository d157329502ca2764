from __future__ import annotations

from typing import Any

from django.apps import AppConfig
from django.db.models.signals import post_migrate


def _sync_roles(**_: Any) -> None:
    # Permissions added by later migrations reach the role groups without another data migration.
    from django.apps import apps

    from notes.roles import sync_roles

    sync_roles(apps)


class NotesConfig(AppConfig):
    name = "notes"
    verbose_name = "Posts, notes and ratings"

    def ready(self) -> None:
        post_migrate.connect(_sync_roles, dispatch_uid="notes.sync_roles")
