"""The benchmark's dataset: one JSON object per line (pure: no ORM).

Fields: `post` (text), `note` (the human note's text), `urls` (its evidence URLs, a list),
`label` ("Helpful" or "Not Helpful": the crowd's verdict), `note_time` (ISO date or datetime:
automation may use only documents published before it). Optional: `id` (default "line-N"),
`demo` (true for made-up demo rows). Errors name the line and the field.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HELPFUL, NOT_HELPFUL = "Helpful", "Not Helpful"
LABELS = (HELPFUL, NOT_HELPFUL)
_LABEL_SPELLINGS = {
    "helpful": HELPFUL,
    "currently_rated_helpful": HELPFUL,
    "not helpful": NOT_HELPFUL,
    "not_helpful": NOT_HELPFUL,
    "currently_rated_not_helpful": NOT_HELPFUL,
}


class DatasetError(ValueError):
    """A line that is not a valid benchmark row; the message names the line."""


@dataclass(frozen=True)
class Row:
    id: str
    post: str
    note: str
    urls: tuple[str, ...]
    label: str
    note_time: dt.datetime
    demo: bool = False

    def inputs(self) -> dict[str, Any]:
        """The row as stored with every outcome (the JSONL's `inputs`)."""
        return {
            "post": self.post,
            "note": self.note,
            "urls": list(self.urls),
            "label": self.label,
            "note_time": self.note_time.isoformat(),
            "demo": self.demo,
        }


def parse_time(value: str) -> dt.datetime:
    """An ISO date or datetime; naive values are UTC."""
    parsed = dt.datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)


def parse_row(data: Any, line: int) -> Row:
    where = f"line {line}"
    if not isinstance(data, dict):
        raise DatasetError(f"{where}: expected a JSON object")
    for name in ("post", "note", "label", "note_time"):
        if not isinstance(data.get(name), str) or not data[name].strip():
            raise DatasetError(f"{where}: {name!r} must be a non-empty string")
    urls = data.get("urls")
    if not isinstance(urls, list) or not urls or not all(isinstance(u, str) and u.strip() for u in urls):
        raise DatasetError(f"{where}: 'urls' must be a non-empty list of URLs")
    bad = [u for u in urls if not u.strip().lower().startswith(("http://", "https://"))]
    if bad:
        raise DatasetError(f"{where}: not an http(s) URL: {bad[0]!r}")
    label = _LABEL_SPELLINGS.get(data["label"].strip().lower())
    if label is None:
        raise DatasetError(f"{where}: 'label' must be one of {', '.join(LABELS)}, not {data['label']!r}")
    try:
        note_time = parse_time(data["note_time"])
    except ValueError as exc:
        raise DatasetError(f"{where}: 'note_time' is not an ISO date or datetime ({exc})") from None
    row_id = data.get("id", f"line-{line}")
    if not isinstance(row_id, str | int) or not str(row_id).strip():
        raise DatasetError(f"{where}: 'id' must be a string or a number")
    return Row(
        id=str(row_id).strip(),
        post=data["post"].strip(),
        note=data["note"].strip(),
        urls=tuple(dict.fromkeys(u.strip() for u in urls)),
        label=label,
        note_time=note_time,
        demo=bool(data.get("demo", False)),
    )


def load_dataset(path: Path) -> list[Row]:
    """Every row of the file, validated; blank lines are skipped; ids must be unique."""
    rows: list[Row] = []
    seen: set[str] = set()
    with path.open(encoding="utf-8") as handle:
        for number, text in enumerate(handle, start=1):
            if not text.strip():
                continue
            try:
                data = json.loads(text)
            except json.JSONDecodeError as exc:
                raise DatasetError(f"line {number}: not JSON ({exc.msg})") from None
            row = parse_row(data, number)
            if row.id in seen:
                raise DatasetError(f"line {number}: duplicate id {row.id!r}")
            seen.add(row.id)
            rows.append(row)
    if not rows:
        raise DatasetError(f"{path}: no rows")
    return rows
