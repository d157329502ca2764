from __future__ import annotations

from django.apps import AppConfig


class JudgingConfig(AppConfig):
    name = "judging"
    verbose_name = "Judges"

    def ready(self) -> None:
        from judging import checks  # noqa: F401  (registers the timeout check)
