from __future__ import annotations

from django.apps import AppConfig


class XnotesConfig(AppConfig):
    name = "xnotes"
    verbose_name = "Connect to X"

    def ready(self) -> None:
        # Panels are page sections an upper app adds to lower apps' pages; registered once the
        # app registry is ready (their module imports models).
        from xnotes import panels

        panels.register_all()
