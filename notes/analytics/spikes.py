"""Spike detection on daily counts (pure).

A day is a spike when its count is above the mean + k standard deviations of the `window`
days before it (defaults: 28 days, k = 2.5; population standard deviation). Days with less
than `min_history` days before them, or fewer than `min_count` items, are never spikes. For each spike, the trending terms
compare the texts of a 3-day window centred on it with the baseline period (the window days
before that), stopwords removed.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

from crowdnotes_site.lib.text_rules import strip_urls

WINDOW_DAYS = 28
K_SIGMA = 2.5
MIN_HISTORY = 7
MIN_COUNT = 5  # a day with fewer items is never a spike (sparse periods: 1 after a run of 0s)

_WORD_RE = re.compile(r"[a-z][a-z0-9'’-]*[a-z0-9]")
EXTRA_STOPWORDS = frozenset(
    {"amp", "quot", "tweet", "tweets", "post", "note", "claim", "claims", "just", "like", "https", "http", "www", "com"}
)


@dataclass(frozen=True)
class Spike:
    index: int
    day: dt.date
    count: int
    mean: float
    std: float
    threshold: float
    terms: tuple[tuple[str, int, float], ...] = ()  # (term, documents in the 3-day window, ratio to baseline)


@dataclass(frozen=True)
class DailySeries:
    days: list[dt.date]
    counts: list[int]
    rolling_mean: list[float | None]
    threshold: list[float | None]


def daily_counts(
    dates: Iterable[dt.date], *, start: dt.date | None = None, end: dt.date | None = None
) -> tuple[list[dt.date], list[int]]:
    """One count per calendar day from the first to the last date (gaps filled with 0)."""
    counter = Counter(dates)
    if not counter:
        return [], []
    first, last = start or min(counter), end or max(counter)
    days = [first + dt.timedelta(days=i) for i in range((last - first).days + 1)]
    return days, [counter.get(d, 0) for d in days]


def rolling(
    counts: Sequence[int], *, window: int = WINDOW_DAYS, k: float = K_SIGMA, min_history: int = MIN_HISTORY
) -> tuple[list[float | None], list[float | None], list[float | None]]:
    """Per day: mean, standard deviation and threshold of the `window` days before it
    (None until `min_history` days are available)."""
    arr = np.asarray(counts, dtype=float)
    means: list[float | None] = []
    stds: list[float | None] = []
    thresholds: list[float | None] = []
    for i in range(len(arr)):
        past = arr[max(0, i - window) : i]
        if len(past) < min_history:
            means.append(None)
            stds.append(None)
            thresholds.append(None)
            continue
        m, s = float(past.mean()), float(past.std())
        means.append(m)
        stds.append(s)
        thresholds.append(m + k * s)
    return means, stds, thresholds


def detect(
    days: Sequence[dt.date],
    counts: Sequence[int],
    *,
    window: int = WINDOW_DAYS,
    k: float = K_SIGMA,
    min_history: int = MIN_HISTORY,
    min_count: int = MIN_COUNT,
) -> tuple[DailySeries, list[Spike]]:
    means, stds, thresholds = rolling(counts, window=window, k=k, min_history=min_history)
    spikes = [
        Spike(i, days[i], int(counts[i]), m, s, t)
        for i, (m, s, t) in enumerate(zip(means, stds, thresholds, strict=True))
        if t is not None and m is not None and s is not None and counts[i] > t and counts[i] >= min_count
    ]
    return DailySeries(list(days), [int(c) for c in counts], means, thresholds), spikes


def tokens(text: str) -> set[str]:
    """The distinct content words of a text (URLs, stopwords and short words removed)."""
    words = _WORD_RE.findall(strip_urls(text).lower())
    return {w for w in words if len(w) >= 3 and w not in ENGLISH_STOP_WORDS and w not in EXTRA_STOPWORDS}


def trending_terms(
    texts_by_day: Mapping[dt.date, Sequence[str]],
    day: dt.date,
    *,
    window: int = WINDOW_DAYS,
    top: int = 8,
    min_docs: int = 2,
) -> tuple[tuple[str, int, float], ...]:
    """Terms of the texts of day-1..day+1 most over-represented against the `window` days
    before day-1: ratio of document shares with add-one smoothing; at least `min_docs` texts."""
    centre = [t for d in (day - dt.timedelta(days=1), day, day + dt.timedelta(days=1)) for t in texts_by_day.get(d, ())]
    base_start = day - dt.timedelta(days=1 + window)
    baseline = [t for i in range(window) for t in texts_by_day.get(base_start + dt.timedelta(days=i), ())]
    c_win = Counter(w for t in centre for w in tokens(t))
    c_base = Counter(w for t in baseline for w in tokens(t))
    n_win, n_base = max(len(centre), 1), max(len(baseline), 1)
    scored = []
    for term, n in c_win.items():
        if n < min_docs:
            continue
        ratio = ((n + 1) / (n_win + 2)) / ((c_base.get(term, 0) + 1) / (n_base + 2))
        if ratio > 1:
            scored.append((term, n, ratio))
    scored.sort(key=lambda x: (-x[2] * math.log1p(x[1]), x[0]))
    return tuple((t, n, round(r, 2)) for t, n, r in scored[:top])


def spikes_with_terms(
    days: Sequence[dt.date],
    counts: Sequence[int],
    texts_by_day: Mapping[dt.date, Sequence[str]],
    *,
    window: int = WINDOW_DAYS,
    k: float = K_SIGMA,
    min_history: int = MIN_HISTORY,
    min_count: int = MIN_COUNT,
) -> tuple[DailySeries, list[Spike]]:
    series, spikes = detect(days, counts, window=window, k=k, min_history=min_history, min_count=min_count)
    out = [
        Spike(s.index, s.day, s.count, s.mean, s.std, s.threshold, trending_terms(texts_by_day, s.day, window=window))
        for s in spikes
    ]
    return series, out


def last_days(series: DailySeries, found: list[Spike], n: int) -> tuple[DailySeries, list[Spike]]:
    """The last `n` days of a detected series (detection used the whole history), with the
    spikes in them re-indexed."""
    start = max(0, len(series.days) - n)
    cut = DailySeries(series.days[start:], series.counts[start:], series.rolling_mean[start:], series.threshold[start:])
    kept = [
        Spike(s.index - start, s.day, s.count, s.mean, s.std, s.threshold, s.terms) for s in found if s.index >= start
    ]
    return cut, kept
