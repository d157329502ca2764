"""Spike detection on daily counts (pure).

A day is a spike when its count is above the mean + k standard deviations of the `window`
days before it (defaults: 28 days, k = 2.5; population standard deviation). Enough history first: a day with less than
`min_history` days of data before it, or with items on fewer than `min_active_days` of the
window's days, has no threshold and is never a spike; nor is a day whose threshold is 0 (a
silent history: any count would exceed it) or a day with fewer than `min_count` items. For each spike, the trending terms
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

from crowdnotes_site.lib.text_rules import strip_urls

WINDOW_DAYS = 28
K_SIGMA = 2.5
MIN_HISTORY = 7
MIN_ACTIVE_DAYS = 3  # days with at least one item among the window's days before a spike
MIN_COUNT = 5  # a day with fewer items is never a spike (sparse periods: 1 after a run of 0s)

# scikit-learn's ENGLISH_STOP_WORDS (BSD-3-Clause; the Glasgow Information Retrieval Group's list), copied:
# importing anything from scikit-learn loads all of it and scipy (~2 s) into the web worker that renders
# the analytics page. tests/notes/analytics/test_spikes.py checks the copy equals the library's list.
ENGLISH_STOP_WORDS = frozenset(
    (
        "a about above across after afterwards again against all almost alone along already also although always am "
        "among amongst amoungst amount an and another any anyhow anyone anything anyway anywhere are around as at back "
        "be became because become becomes becoming been before beforehand behind being below beside besides between "
        "beyond bill both bottom but by call can cannot cant co con could couldnt cry de describe detail do done down "
        "due during each eg eight either eleven else elsewhere empty enough etc even ever every everyone everything "
        "everywhere except few fifteen fifty fill find fire first five for former formerly forty found four from front "
        "full further get give go had has hasnt have he hence her here hereafter hereby herein hereupon hers herself "
        "him himself his how however hundred i ie if in inc indeed interest into is it its itself keep last latter "
        "latterly least less ltd made many may me meanwhile might mill mine more moreover most mostly move much must my "
        "myself name namely neither never nevertheless next nine no nobody none noone nor not nothing now nowhere of "
        "off often on once one only onto or other others otherwise our ours ourselves out over own part per perhaps "
        "please put rather re same see seem seemed seeming seems serious several she should show side since sincere six "
        "sixty so some somehow someone something sometime sometimes somewhere still such system take ten than that the "
        "their them themselves then thence there thereafter thereby therefore therein thereupon these they thick thin "
        "third this those though three through throughout thru thus to together too top toward towards twelve twenty "
        "two un under until up upon us very via was we well were what whatever when whence whenever where whereafter "
        "whereas whereby wherein whereupon wherever whether which while whither who whoever whole whom whose why will "
        "with within without would yet you your yours yourself yourselves"
    ).split()
)

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
    return fill_days(Counter(dates), start=start, end=end)


def fill_days(
    by_day: Mapping[dt.date, int], *, start: dt.date | None = None, end: dt.date | None = None
) -> tuple[list[dt.date], list[int]]:
    """Counts per day (days without items absent) as one count per calendar day from the first to
    the last day (gaps filled with 0)."""
    if not by_day:
        return [], []
    first, last = start or min(by_day), end or max(by_day)
    days = [first + dt.timedelta(days=i) for i in range((last - first).days + 1)]
    return days, [by_day.get(d, 0) for d in days]


def rolling(
    counts: Sequence[int],
    *,
    window: int = WINDOW_DAYS,
    k: float = K_SIGMA,
    min_history: int = MIN_HISTORY,
    min_active_days: int = MIN_ACTIVE_DAYS,
) -> tuple[list[float | None], list[float | None], list[float | None]]:
    """Per day: mean, standard deviation and threshold of the `window` days before it
    (None until `min_history` days are available and `min_active_days` of them have items)."""
    arr = np.asarray(counts, dtype=float)
    means: list[float | None] = []
    stds: list[float | None] = []
    thresholds: list[float | None] = []
    for i in range(len(arr)):
        past = arr[max(0, i - window) : i]
        if len(past) < min_history or int((past > 0).sum()) < min(min_active_days, min_history):
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
    min_active_days: int = MIN_ACTIVE_DAYS,
) -> tuple[DailySeries, list[Spike]]:
    means, stds, thresholds = rolling(
        counts, window=window, k=k, min_history=min_history, min_active_days=min_active_days
    )
    spikes = [
        Spike(i, days[i], int(counts[i]), m, s, t)
        for i, (m, s, t) in enumerate(zip(means, stds, thresholds, strict=True))
        if t is not None and m is not None and s is not None and t > 0 and counts[i] > t and counts[i] >= min_count
    ]
    return DailySeries(list(days), [int(c) for c in counts], means, thresholds), spikes


def tokens(text: str) -> set[str]:
    """The distinct content words of a text (URLs, stopwords and short words removed)."""
    words = _WORD_RE.findall(strip_urls(text).lower())
    return {w for w in words if len(w) >= 3 and w not in ENGLISH_STOP_WORDS and w not in EXTRA_STOPWORDS}


def terms_span(day: dt.date, *, window: int = WINDOW_DAYS) -> tuple[dt.date, dt.date]:
    """The first and last day whose texts the trending terms of a spike on `day` read: the
    baseline's `window` days, then day-1..day+1."""
    return day - dt.timedelta(days=1 + window), day + dt.timedelta(days=1)


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
    base_start, _ = terms_span(day, window=window)
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


def rule_text(unit: str) -> str:
    """The spike rule's history and size conditions in words, for the pages."""
    return (
        f"a day needs at least {MIN_HISTORY} days of data before it, with {unit} on at least {MIN_ACTIVE_DAYS} of "
        f"them, a threshold above 0, and at least {MIN_COUNT} {unit}, to be a spike"
    )
