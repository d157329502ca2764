"""The research path's outputs (crowdnotes_site.lib.communitynotes.research.run) read back for the analytics pages.

Pure: files only, no ORM. The research command writes small summaries beside the big tables
(delays.json, spikes.json, spikes_daily.tsv and one record per step); a page reads those, never
the scored-notes table, so it answers in milliseconds whatever the download's size. The status
counts in the score step's record are counted from scored_notes.tsv as written (`status_counts`),
so the page and the file agree.
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
        """The statuses of scored_notes.tsv: counted from the file when the score step wrote it (its
        record's "statuses"); a record written before then is counted from the file here, as its
        own counts also held notes known only from ratings, which the file leaves out."""
        score = self.steps.get("score")
        if not score:
            return None
        if isinstance(score.get("statuses"), dict):
            return {k: int(score["statuses"].get(k, 0)) for k in STATUS_KEYS}
        return status_counts(self.folder / "scored_notes.tsv")

    @property
    def step_rows(self) -> list[tuple[str, dict[str, Any], str]]:
        """(step, its record, its peak memory in words) in the order the steps were recorded."""
        return [(name, rec, memory_text(rec.get("peak_rss_bytes"))) for name, rec in self.steps.items()]


# The statuses a scored_notes.tsv holds, under the keys the page and the step record use.
STATUS_KEYS = {"helpful": "CURRENTLY_RATED_HELPFUL", "not_helpful": "CURRENTLY_RATED_NOT_HELPFUL",
               "needs_more_ratings": "NEEDS_MORE_RATINGS"}  # fmt: skip
_STATUS_COLUMN = "coreRatingStatus"


def status_counts(path: Path) -> dict[str, int]:
    """How many notes of the scored-notes file have each status (the one truth for the page's
    counts: what the research run wrote). ResearchOutputsError when it cannot be read."""
    found = dict.fromkeys(STATUS_KEYS.values(), 0)
    try:
        with path.open(encoding="utf-8", newline="") as fh:
            header = fh.readline().rstrip("\n").split("\t")
            if _STATUS_COLUMN not in header:
                raise ResearchOutputsError(f"{path}: no {_STATUS_COLUMN} column")
            column = header.index(_STATUS_COLUMN)
            for line in fh:
                cells = line.rstrip("\n").split("\t")
                if len(cells) > column and cells[column] in found:
                    found[cells[column]] += 1
    except OSError as exc:
        raise ResearchOutputsError(f"{path}: cannot be read ({exc})") from exc
    return {key: found[status] for key, status in STATUS_KEYS.items()}


def memory_text(peak_bytes: object) -> str:
    """A step's peak resident memory in the unit that shows it (MiB below a GiB), or "not measured"."""
    if not isinstance(peak_bytes, int | float) or isinstance(peak_bytes, bool) or peak_bytes <= 0:
        return "not measured"
    if peak_bytes < 2**30:
        return f"{peak_bytes / 2**20:,.0f} MiB"
    return f"{peak_bytes / 2**30:,.2f} GiB"


# The shapes of the JSON files the page reads (what crowdnotes_site.lib.communitynotes.research.run writes). A shape is a
# dict of keys to shapes (a key ending in "?" may be absent), a one-item list (each item has that
# shape), _Values(shape) (an object whose every value has it), or the Python types a value may have.
_NUMBER = (int, float)
_NUMBER_OR_NULL = (int, float, type(None))


@dataclass(frozen=True)
class _Values:
    shape: Any


_PERCENTILES = {**dict.fromkeys(("p25", "p50", "p75", "p90"), _NUMBER_OR_NULL), "n": int, "n_negative": int}
DELAYS_SHAPE = {
    "post_to_first_note_hours": _PERCENTILES,
    "note_to_first_verdict_hours": _PERCENTILES,
    "note_to_first_helpful_hours?": _PERCENTILES,
    "note_to_first_not_helpful_hours?": _PERCENTILES,
    "never_left_nmr_share": _NUMBER_OR_NULL,
    "notes": int,
    "posts": int,
    "definitions": str,
    "by_classification?": _Values(
        {"notes": int, "note_to_first_verdict_hours": _PERCENTILES, "never_left_nmr_share": _NUMBER_OR_NULL}
    ),
}
SPIKES_SHAPE = {
    "window": int,
    "k": _NUMBER,
    "rule": str,
    "spikes": [{"day": str, "count": int, "mean": _NUMBER, "threshold": _NUMBER, "terms": [list]}],
}
_STEP_SHAPE = {"rows?": _NUMBER, "seconds?": _NUMBER, "rows_per_s?": _NUMBER, "peak_rss_bytes?": _NUMBER}
_SCORE_COUNTS = ("helpful", "not_helpful", "needs_more_ratings", "notes_written", "ratings_scored", "raters_written")
STEP_SHAPES: dict[str, Any] = {
    "score": {**_STEP_SHAPE, **dict.fromkeys(_SCORE_COUNTS, int), "dropped": _Values(int), "statuses?": _Values(int)}
}


# JSON's kinds of value as the messages name them.
_KINDS = {
    int: "a number", float: "a number", str: "text", list: "a list", dict: "an object", bool: "true/false",
    type(None): "null",
}  # fmt: skip


def _kind(value: Any) -> str:
    return _KINDS.get(type(value), type(value).__name__)


def _expected(kinds: tuple[type, ...]) -> str:
    return " or ".join(dict.fromkeys(_KINDS[k] for k in kinds))


def shape_problem(value: Any, shape: Any, where: str = "") -> str | None:
    """Where `value` departs from `shape` ("spikes[0].count is text, expected a number"), or None
    when it fits. Keys beyond the shape's are allowed (a newer writer may add some)."""
    here = where or "the file"
    if isinstance(shape, dict | _Values):
        if not isinstance(value, dict):
            return f"{here} is {_kind(value)}, expected an object"
        keys = {str(k): shape.shape for k in value} if isinstance(shape, _Values) else shape
        for key, inner in keys.items():
            name = key.rstrip("?")
            path = f"{where}.{name}" if where else name
            if name not in value:
                if not key.endswith("?"):
                    return f"{path} is missing"
            elif problem := shape_problem(value[name], inner, path):
                return problem
        return None
    if isinstance(shape, list):
        if not isinstance(value, list):
            return f"{here} is {_kind(value)}, expected a list"
        for i, item in enumerate(value):
            if problem := shape_problem(item, shape[0], f"{where}[{i}]"):
                return problem
        return None
    kinds = shape if isinstance(shape, tuple) else (shape,)
    if isinstance(value, bool) or not isinstance(value, kinds):
        return f"{here} is {_kind(value)}, expected {_expected(kinds)}"
    return None


def _json(path: Path, shape: Any = None) -> Any:
    """The JSON file at `path`, checked against `shape`: a file that cannot be read or has another
    shape is an error naming it and what is wrong, so the page never shows blanks for it."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ResearchOutputsError(f"{path}: cannot be read ({exc.__class__.__name__}: {exc})") from exc
    if shape is not None and (problem := shape_problem(data, shape)):
        raise ResearchOutputsError(f"{path}: not the shape this page reads: {problem}")
    return data


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
    steps = {p.stem: _json(p, STEP_SHAPES.get(p.stem, _STEP_SHAPE)) for p in records}
    finished = max(p.stat().st_mtime for p in records)
    return ResearchRun(
        folder=d,
        steps=steps,
        finished_at=datetime.fromtimestamp(finished, UTC),
        delays=_json(d / "delays.json", DELAYS_SHAPE) if "delays" in steps and (d / "delays.json").exists() else None,
        spikes=_json(d / "spikes.json", SPIKES_SHAPE) if "spikes" in steps and (d / "spikes.json").exists() else None,
        daily=_daily(d / "spikes_daily.tsv") if "spikes" in steps and (d / "spikes_daily.tsv").exists() else [],
    )
