from __future__ import annotations

from typing import Any

from django.apps import AppConfig
from django.db import connections
from django.db.models.signals import post_migrate

from evidence import checks  # noqa: F401  (registers the allow-list check)
from evidence.index.store import ensure_schema


def _ensure_index(using: str = "default", **_: Any) -> None:
    ensure_schema(connections[using])


class EvidenceConfig(AppConfig):
    name = "evidence"
    verbose_name = "Evidence"

    def ready(self) -> None:
        # SQLite loses a table's triggers when a later migration rebuilds the table: re-create
        # the full-text index's triggers (and rebuild it) after every migrate.
        post_migrate.connect(_ensure_index, sender=self)
