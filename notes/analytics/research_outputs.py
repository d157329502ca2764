"""The research path's outputs (notes.analytics.download) read back for the analytics pages.

Pure: files only, no ORM. The research command writes small summaries beside the big tables
(delays.json, spikes.json, spikes_daily.tsv and one record per step); a page reads those, never
the scored-notes table, so it answers in milliseconds whatever the download's size.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

# The delay rows, in the order the database page shows them, with the research file's keys.
DELAY_ROWS = (
    ("post → first note (hours)", "post_to_first_note_hours"),
    ("note → first verdict (hours)", "note_to_first_verdict_hours"),
    ("note → first Helpful (hours)", "note_to_first_helpful_hours"),
    ("note → first Not Helpful (hours)", "note_to_first_not_helpful_hours"),
)


class ResearchOutputsError(ValueError):
    """The folder holds no research run, or one that cannot be read (named in the message)."""


@dataclass
class DailyRow:
    day: date
    notes: int
    rolling_mean: float | None
    threshold: float | None
    spike: bool


@dataclass
class ResearchRun:
    folder: Path
    steps: dict[str, dict[str, Any]]  # step name -> its record (rows, seconds, peak RSS, ...)
    finished_at: datetime | None  # when the newest step record was written
    delays: dict[str, Any] | None
    spikes: dict[str, Any] | None
    daily: list[DailyRow] = field(default_factory=list)

    @property
    def delay_rows(self) -> list[tuple[str, dict[str, Any]]]:
        if not self.delays:
            return []
        return [(label, self.delays[key]) for label, key in DELAY_ROWS if key in self.delays]

    @property
    def first_day(self) -> date | None:
        return self.daily[0].day if self.daily else None

    @property
    def last_day(self) -> date | None:
        return self.daily[-1].day if self.daily else None

    @property
    def statuses(self) -> dict[str, int] | None:
        score = self.steps.get("score")
        if not score:
            return None
        return {k: int(score.get(k, 0)) for k in ("helpful", "not_helpful", "needs_more_ratings")}


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ResearchOutputsError(f"{path}: cannot be read ({exc.__class__.__name__}: {exc})") from exc


def _float(text: str) -> float | None:
    return float(text) if text else None


def _daily(path: Path) -> list[DailyRow]:
    rows: list[DailyRow] = []
    try:
        with path.open(newline="") as fh:
            for i, r in enumerate(csv.DictReader(fh, delimiter="\t"), start=2):
                try:
                    row = DailyRow(
                        day=date.fromisoformat(r["day"]),
                        notes=int(r["notes"]),
                        rolling_mean=_float(r["rolling_mean"]),
                        threshold=_float(r["threshold"]),
                        spike=r["spike"] == "1",
                    )
                    rows.append(row)
                except (KeyError, TypeError, ValueError) as exc:
                    raise ResearchOutputsError(f"{path}:{i}: not a row of the daily spike table ({exc})") from exc
    except OSError as exc:
        raise ResearchOutputsError(f"{path}: cannot be read ({exc})") from exc
    return rows


def read(folder: str | Path) -> ResearchRun:
    """The research run whose outputs are in `folder` (the command's --out, FOLDER/research by
    default). Steps not run yet are absent; a folder with no step record is an error."""
    d = Path(folder)
    records = sorted((d / "steps").glob("*.json")) if d.is_dir() else []
    if not records:
        raise ResearchOutputsError(
            f"{d}: no research run here (no steps/*.json). Run `manage.py research_download FOLDER` "
            "and point RESEARCH_OUTPUTS_DIR at FOLDER/research."
        )
    steps = {p.stem: _json(p) for p in records}
    finished = max(p.stat().st_mtime for p in records)
    return ResearchRun(
        folder=d,
        steps=steps,
        finished_at=datetime.fromtimestamp(finished, UTC),
        delays=_json(d / "delays.json") if "delays" in steps and (d / "delays.json").exists() else None,
        spikes=_json(d / "spikes.json") if "spikes" in steps and (d / "spikes.json").exists() else None,
        daily=_daily(d / "spikes_daily.tsv") if "spikes" in steps and (d / "spikes_daily.tsv").exists() else [],
    )
