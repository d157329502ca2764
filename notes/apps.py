from __future__ import annotations

from typing import Any

from django.apps import AppConfig, apps
from django.db.models.signals import post_migrate

from notes.roles import sync_roles


def _sync_roles(**_: Any) -> None:
    # Permissions added by later migrations reach the role groups without another data migration.
    sync_roles(apps)


class NotesConfig(AppConfig):
    name = "notes"
    verbose_name = "Posts, notes and ratings"

    def ready(self) -> None:
        post_migrate.connect(_sync_roles, dispatch_uid="notes.sync_roles")
