"""Delay analytics (pure): post -> first note, note -> first verdict, never left Needs More Ratings.

Definitions (shared by the operator command on public files and the admin page on the app's
own data, so the numbers are comparable):

- an X id (post or note) encodes its creation time: milliseconds since the X epoch
  (2010-11-04 01:42:54.657 UTC) = id >> 22;
- a note's time is its createdAtMillis when positive, else the time in its note id;
- post -> first note, per post: the earliest note time minus the post's time;
- note -> first verdict, per note that left Needs More Ratings: the time of its first
  Helpful / Not Helpful status minus the note's time;
- the never-left-NMR share: notes without a first non-NMR status over all notes considered.

Percentiles use numpy's default (linear interpolation). A negative delay (a note dated before
its post, a verdict before its note: clock or data errors) is never drawn or counted as a
delay: it is left out of the percentiles and counted in `n_negative`, which the pages and the
command print beside them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from crowdnotes_site.lib.xids import snowflake_ms

PERCENTILES = (25, 50, 75, 90)
HOUR_MS = 3_600_000


def note_time_ms(note_id: int | str, created_at_ms: int | None) -> int:
    """createdAtMillis when positive, else the time in the note id."""
    return created_at_ms if created_at_ms and created_at_ms > 0 else snowflake_ms(note_id)


@dataclass(frozen=True)
class Percentiles:
    p25: float | None
    p50: float | None
    p75: float | None
    p90: float | None
    n: int
    n_negative: int = 0  # negative delays left out of the percentiles (see the module docstring)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def percentiles(values: Iterable[float]) -> Percentiles:
    """The percentiles of the non-negative values; negative ones are only counted."""
    arr = np.asarray(list(values), dtype=float)
    negative = int((arr < 0).sum())
    arr = arr[arr >= 0]
    if arr.size == 0:
        return Percentiles(None, None, None, None, 0, negative)
    p25, p50, p75, p90 = (float(v) for v in np.percentile(arr, PERCENTILES))
    return Percentiles(p25, p50, p75, p90, int(arr.size), negative)


@dataclass(frozen=True)
class DelayReport:
    post_to_first_note_hours: Percentiles
    note_to_first_verdict_hours: Percentiles
    never_left_nmr_share: float | None
    n_notes_status: int  # notes the NMR share is over

    def as_json(self) -> dict[str, Any]:
        return {
            "post_to_first_note_hours": self.post_to_first_note_hours.as_dict(),
            "note_to_first_verdict_hours": self.note_to_first_verdict_hours.as_dict(),
            "never_left_nmr_share": self.never_left_nmr_share,
        }


def post_to_first_note_hours(post_ms: Mapping[str, int], note_ms_by_post: Iterable[tuple[str, int]]) -> list[float]:
    """Per post with a known time: (earliest note time - post time) in hours."""
    first: dict[str, int] = {}
    for post_key, note_ms in note_ms_by_post:
        if post_key in post_ms and (post_key not in first or note_ms < first[post_key]):
            first[post_key] = note_ms
    return [(ms - post_ms[key]) / HOUR_MS for key, ms in first.items()]


def delay_report(
    *,
    post_delays_hours: Iterable[float],
    notes_first_verdict: Iterable[tuple[int, int | None]],
) -> DelayReport:
    """notes_first_verdict: per note, (note time ms, first verdict time ms or None)."""
    verdict_hours: list[float] = []
    total = never = 0
    for note_ms, verdict_ms in notes_first_verdict:
        total += 1
        if verdict_ms is None or verdict_ms <= 0:
            never += 1
        else:
            verdict_hours.append((verdict_ms - note_ms) / HOUR_MS)
    return DelayReport(
        post_to_first_note_hours=percentiles(post_delays_hours),
        note_to_first_verdict_hours=percentiles(verdict_hours),
        never_left_nmr_share=never / total if total else None,
        n_notes_status=total,
    )


def delays_from_rows(
    note_rows: Iterable[tuple[int, int, str]],
    status_rows: Iterable[tuple[int, int, int | None]],
) -> DelayReport:
    """The public-files report.

    note_rows: (noteId, createdAtMillis or 0, tweetId) of the notes file;
    status_rows: (noteId, createdAtMillis or 0, timestampMillisOfFirstNonNMRStatus or None)."""
    note_created: dict[int, int] = {}
    pairs: list[tuple[str, int]] = []
    post_ms: dict[str, int] = {}
    for note_id, created_ms, tweet_id in note_rows:
        ms = note_time_ms(note_id, created_ms)
        if created_ms > 0:
            note_created[note_id] = created_ms
        if tweet_id.isdigit() and int(tweet_id) > 0:
            post_ms[tweet_id] = snowflake_ms(tweet_id)
            pairs.append((tweet_id, ms))
    status = [
        (note_time_ms(note_id, created_ms if created_ms > 0 else note_created.get(note_id, 0)), first)
        for note_id, created_ms, first in status_rows
    ]
    return delay_report(post_delays_hours=post_to_first_note_hours(post_ms, pairs), notes_first_verdict=status)
