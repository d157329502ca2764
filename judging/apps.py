from __future__ import annotations

from django.apps import AppConfig

from judging import checks  # noqa: F401  (registers the timeout check)


class JudgingConfig(AppConfig):
    name = "judging"
    verbose_name = "Judges"
