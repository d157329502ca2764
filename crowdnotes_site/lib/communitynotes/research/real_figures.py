"""The source study's headline figures, measured again on the real Community Notes folder (pure).

Input: the loader's output (crowdnotes_site.lib.communitynotes.data.real: `read_statuses`, `read_notes`).
Output: one JSON-ready dict, written by `manage.py real_figures` and read back by the research page,
so the page shows exactly what the command computed.

- Final statuses (`statuses.tsv.gz`): the shares of Needs More Ratings, Helpful and Not Helpful, by the
  note's creation year and overall, over every note with a status and again over the mature ones only
  (status observed when the note was at least 14 days old: a younger status is mostly still Needs
  More Ratings, so the all-notes share overstates how many notes never get a verdict).
- Note -> first shown as Helpful (`notes.tsv`, the 2025 explorer's `helpfulShownAtMillis`): hours from
  the note's creation to the first time it was shown as Helpful, for the notes of `DELAY_YEAR` that
  have that time. Only Helpful notes have one, so this is the wait of the notes that got a Helpful
  verdict, not of every note; negative delays (clock or data errors) are counted and left out.

The source study (../shared/specs/PRODUCT.md, "figures from the source studies") measured health
notes: 87.9% never leave Needs More Ratings, and a median 7.2 h from a note to its first
helpfulness verdict. Its period and sample differ from this folder's; the figures are shown side by
side, not as a replication.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

from crowdnotes_site.lib import status as names
from crowdnotes_site.lib.communitynotes.data.real import NOTES_FILE, STATUSES_FILE, RealNote, Statuses
from crowdnotes_site.lib.communitynotes.research.delays import HOUR_MS, percentiles

FIGURES_FILE = "real_figures.json"
FORMAT = 1
DELAY_YEAR = 2025

# The source study's figures and their wording (../shared/specs/PRODUCT.md).
STUDY_NMR_SHARE = 0.879
STUDY_NOTE_TO_VERDICT_P50_H = 7.2
STUDY_NOTES = "30.8K health notes"
STUDY_WORDING = (
    "in 30.8K health notes the median time from a flagged post to its first note was 10.4 h, and another "
    '7.2 h to the first helpfulness verdict (17.6 h in all); 87.9% of health notes never leave "Needs More Ratings"'
)


class RealFiguresError(ValueError):
    """The figures file is missing or not one this module wrote (named in the message)."""


def figures_path(var_dir: str | Path) -> Path:
    """Where the command writes the figures and the research page reads them."""
    return Path(var_dir) / "research" / FIGURES_FILE


def _pct(part: int, whole: int) -> float | None:
    return round(100.0 * part / whole, 1) if whole else None


def _shares(status: np.ndarray) -> dict[str, Any]:
    n = int(status.size)
    nmr = int((status == names.NEEDS_MORE_RATINGS).sum())
    helpful = int((status == names.CURRENTLY_RATED_HELPFUL).sum())
    not_helpful = int((status == names.CURRENTLY_RATED_NOT_HELPFUL).sum())
    return {
        "n": n,
        "needs_more_ratings": nmr,
        "helpful": helpful,
        "not_helpful": not_helpful,
        "needs_more_ratings_pct": _pct(nmr, n),
        "helpful_pct": _pct(helpful, n),
        "not_helpful_pct": _pct(not_helpful, n),
    }


def status_shares(statuses: Statuses) -> dict[str, Any]:
    """The status shares by creation year and overall, over all notes with a status and over the
    mature ones, and per source repository; notes without a status are counted (`n_without_status`)
    and left out."""
    known = statuses.status != ""
    years = statuses.year
    mature = statuses.mature
    out: dict[str, Any] = {"n_rows": len(statuses), "n_without_status": int((~known).sum())}
    for name, chosen in (("all", known), ("mature", known & mature)):
        by_year = {str(int(y)): _shares(statuses.status[chosen & (years == y)]) for y in np.unique(years[chosen])}
        out[name] = {"overall": _shares(statuses.status[chosen]), "by_year": by_year}
    # Per source repository: one source may be a selected sample (the README says what each is).
    sources = statuses.status_source
    out["by_source"] = (
        {}
        if sources is None
        else {
            str(src): {
                "all": _shares(statuses.status[known & (sources == src)]),
                "mature": _shares(statuses.status[known & mature & (sources == src)]),
            }
            for src in sorted(set(sources[known].tolist()))
        }
    )
    return out


def shown_delay(notes: Sequence[RealNote], year: int = DELAY_YEAR) -> dict[str, Any]:
    """Hours from note to first shown as Helpful, for the notes created in `year` with a
    `helpfulShownAtMillis`: percentiles (numpy's linear interpolation), with what was left out."""
    of_year = [n for n in notes if n.year == year]
    recorded = [n for n in of_year if n.ratings_count is not None]  # the explorer saw the note
    shown = [n for n in of_year if n.helpful_shown_at_ms is not None]
    hours = percentiles(
        (n.helpful_shown_at_ms - n.created_at_ms) / HOUR_MS for n in shown if n.helpful_shown_at_ms is not None
    )
    return {
        "year": year,
        "n_notes_of_year": len(of_year),
        "n_recorded_by_explorer": len(recorded),
        "n_without_shown_time": len(of_year) - len(shown),
        "hours": hours.as_dict(),  # n: the delays counted; n_negative: those left out
    }


def readme_limits(readme: str) -> str:
    """The "Known limits:" paragraph of the folder's README, in one line ("" when it has none)."""
    start = readme.find("Known limits:")
    if start < 0:
        return ""
    paragraph = readme[start:].split("\n\n", 1)[0]
    return " ".join(paragraph.split())


def figures(
    notes: Sequence[RealNote], statuses: Statuses, *, folder: str | Path, readme: str, now: datetime
) -> dict[str, Any]:
    """Every figure the command writes, with its n and its source."""
    return {
        "format": FORMAT,
        "generated_at": now.isoformat(timespec="seconds"),
        "source": {
            "folder": str(folder),
            "statuses_file": STATUSES_FILE,
            "notes_file": NOTES_FILE,
            "n_notes_file_rows": len(notes),
            "limits": readme_limits(readme),
        },
        "statuses": status_shares(statuses),
        "shown_delay": shown_delay(notes),
        "study": {
            "never_left_nmr_pct": round(100 * STUDY_NMR_SHARE, 1),
            "note_to_first_verdict_p50_hours": STUDY_NOTE_TO_VERDICT_P50_H,
            "notes": STUDY_NOTES,
            "wording": STUDY_WORDING,
        },
    }


def write(path: str | Path, data: dict[str, Any]) -> None:
    """The figures as JSON; written whole or not at all (a reader never meets half a file)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial")
    partial.write_text(json.dumps(data, indent=1, sort_keys=True), encoding="utf-8")
    partial.replace(path)


def read(path: str | Path) -> dict[str, Any]:
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise RealFiguresError(f"{path}: not found") from exc
    except (OSError, ValueError) as exc:
        raise RealFiguresError(f"{path}: cannot be read ({exc})") from exc
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise RealFiguresError(f"{path}: not a figures file of format {FORMAT}")
    missing = [k for k in ("source", "statuses", "shown_delay", "study") if k not in data]
    if missing:
        raise RealFiguresError(f"{path}: lacks {', '.join(missing)}")
    return data


def share_rows(data: dict[str, Any]) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    """(year, shares over all notes, shares over mature notes) per year, then ("all", …): the rows
    of the command's table and of the page."""
    st = data["statuses"]
    none = _shares(np.array([], dtype=object))
    rows = [(y, st["all"]["by_year"][y], st["mature"]["by_year"].get(y, none)) for y in sorted(st["all"]["by_year"])]
    rows.append(("all", st["all"]["overall"], st["mature"]["overall"]))
    return rows


def table_lines(data: dict[str, Any]) -> list[str]:
    """The figures as the command prints them: one line per year, then the delay."""
    study = data["study"]
    st = data["statuses"]
    lines = [
        f"Final statuses ({data['source']['statuses_file']}, {st['n_rows']:,} rows, "
        f"{st['n_without_status']:,} without a status left out)",
        f"{'year':<8}{'notes':>10}{'NMR %':>8}{'Helpful %':>11}{'Not H. %':>10}"
        f"{'mature':>10}{'NMR %':>8}{'Helpful %':>11}{'Not H. %':>10}",
    ]
    for label, a, m in share_rows(data):
        lines.append(
            f"{label:<8}{a['n']:>10,}{_f(a['needs_more_ratings_pct']):>8}{_f(a['helpful_pct']):>11}"
            f"{_f(a['not_helpful_pct']):>10}{m['n']:>10,}{_f(m['needs_more_ratings_pct']):>8}"
            f"{_f(m['helpful_pct']):>11}{_f(m['not_helpful_pct']):>10}"
        )
    for source, s in st["by_source"].items():
        a, m = s["all"], s["mature"]
        lines.append(
            f"  from {source}: {a['n']:,} notes, NMR {_f(a['needs_more_ratings_pct'])}%; "
            f"mature {m['n']:,}, NMR {_f(m['needs_more_ratings_pct'])}%"
        )
    lines.append(f"source study (health notes): {study['never_left_nmr_pct']}% never leave Needs More Ratings")
    d = data["shown_delay"]
    h = d["hours"]
    lines += [
        f"Note -> first shown as Helpful, {d['year']} notes ({data['source']['notes_file']}): "
        f"n={h['n']:,} of {d['n_notes_of_year']:,} notes of {d['year']} ({d['n_recorded_by_explorer']:,} recorded "
        f"by the explorer; {d['n_without_shown_time']:,} without a shown time, {h['n_negative']} negative left out)",
        f"  hours: p25 {_f(h['p25'])}, median {_f(h['p50'])}, p75 {_f(h['p75'])}, p90 {_f(h['p90'])}",
        f"source study (health notes): median {study['note_to_first_verdict_p50_hours']} h note -> first "
        "helpfulness verdict",
    ]
    return lines


def _f(value: float | None) -> str:
    return "–" if value is None else f"{value:.1f}"
