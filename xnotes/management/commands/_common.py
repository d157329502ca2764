"""What the five X commands share: one JSON object on stdout, a clear error without credentials."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from xnotes import budget
from xnotes.client import XApiError, XClient, XNotConfigured
from xnotes.rules import XShapeError


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


@contextmanager
def x_answers_checked() -> Iterator[None]:
    """End the command with a non-zero exit and a message naming what X sent when X answers what
    cannot be read (an HTML page, garbage, JSON of the wrong shape), an error, or 429s past the
    cap on the total wait (X_API_MAX_TOTAL_WAIT_S)."""
    try:
        yield
    except budget.WaitCapExceeded as exc:
        raise CommandError(str(exc)) from None
    except XShapeError as exc:
        raise CommandError(f"X's answer could not be read: {exc}") from None
    except XApiError as exc:
        raise CommandError(f"X's answer could not be used: {exc}") from None
