from __future__ import annotations

from django.apps import AppConfig


class XnotesConfig(AppConfig):
    name = "xnotes"
    verbose_name = "Connect to X"

    def ready(self) -> None:
        from xnotes import panels, signals  # noqa: F401  (signals: the pre-flight asks X's evaluator too)

        panels.register_all()
