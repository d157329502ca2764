"""What the five X commands share: one JSON object on stdout, a clear error without credentials."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from xnotes.client import XClient, XNotConfigured


def client_or_error() -> XClient:
    try:
        return XClient()
    except XNotConfigured as exc:
        raise CommandError(
            f"X API credentials are not set: {', '.join(exc.missing)} (set them in the environment)"
        ) from None


def positive(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise CommandError(f"expected a positive integer, got {value!r}") from None
    if number < 1:
        raise CommandError(f"expected a positive integer, got {value!r}")
    return number


def emit(command: BaseCommand, payload: dict[str, Any]) -> None:
    command.stdout.write(json.dumps(payload, sort_keys=True, default=str))
