"""JSON lines read as a command's input: one object a line, every refusal naming its line."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any


class JsonLinesError(ValueError):
    """A line that cannot be taken; the message starts with `line N:`."""


def read_objects(lines: Iterable[str], *, required: Iterable[str] = ()) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) for each non-blank line; a line that is not a JSON object, or lacks a
    required key, stops the reading with a JsonLinesError naming the line."""
    keys = tuple(required)
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as exc:
            raise JsonLinesError(f"line {number}: not JSON ({exc.msg})") from exc
        if not isinstance(value, dict):
            raise JsonLinesError(f"line {number}: a JSON object is expected, not {type(value).__name__}")
        missing = [k for k in keys if k not in value]
        if missing:
            raise JsonLinesError(f"line {number}: missing {', '.join(repr(k) for k in missing)}")
        yield number, value


def text_field(number: int, obj: dict[str, Any], key: str, *, required: bool) -> str:
    """A string field (null or absent reads as empty); an empty required one is refused."""
    value = obj.get(key)
    if value is None:
        value = ""
    if not isinstance(value, str):
        raise JsonLinesError(f"line {number}: {key!r} must be a string or null, not {type(value).__name__}")
    if required and not value.strip():
        raise JsonLinesError(f"line {number}: {key!r} is empty")
    return value
