"""CSV exports that a spreadsheet cannot run (pure): formula injection neutralised.

A text cell beginning with = + - @ (or tab / carriage return, which some spreadsheets skip
before reading a formula), also after leading spaces or as its full-width form, is prefixed with
a single quote, so `=HYPERLINK(…)` in an override reason or an LLM's reasoning is shown as text.
Numbers are written as they are (a negative latency is still a number)."""

from __future__ import annotations

import csv
import unicodedata
from collections.abc import Iterable
from typing import Any, Protocol

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


class _Writable(Protocol):
    def write(self, text: str, /) -> Any: ...


def neutralise(value: Any) -> Any:
    """The value a spreadsheet shows as text: a quote in front of a would-be formula."""
    if not isinstance(value, str) or not value:
        return value
    head = unicodedata.normalize("NFKC", value.lstrip(" ")[:1])
    if value[0] in FORMULA_STARTS or head.startswith(FORMULA_STARTS):
        return "'" + value
    return value


class SafeWriter:
    """csv.writer whose every text cell goes through `neutralise`."""

    def __init__(self, out: _Writable) -> None:
        self._writer = csv.writer(out)

    def writerow(self, row: Iterable[Any]) -> None:
        self._writer.writerow([neutralise(value) for value in row])

    def writerows(self, rows: Iterable[Iterable[Any]]) -> None:
        for row in rows:
            self.writerow(row)
