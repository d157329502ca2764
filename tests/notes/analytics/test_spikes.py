from __future__ import annotations

import datetime as dt

import numpy as np

from crowdnotes_site.lib.communitynotes.research import spikes

D0 = dt.date(2021, 1, 1)


def _days(n: int) -> list[dt.date]:
    return [D0 + dt.timedelta(days=i) for i in range(n)]


def test_it_finds_planted_spikes_in_a_noisy_series() -> None:
    rng = np.random.default_rng(7)
    counts = [int(c) for c in rng.integers(15, 26, size=120)]  # 15..25 a day
    for day in (45, 90):
        counts[day] = 70
    series, found = spikes.detect(_days(120), counts)
    assert [s.index for s in found] == [45, 90]
    s = found[0]
    assert s.day == D0 + dt.timedelta(days=45) and s.count == 70
    window = np.asarray(counts[45 - 28 : 45], dtype=float)
    assert s.mean == window.mean() and s.threshold == window.mean() + 2.5 * window.std()
    assert series.rolling_mean[:7] == [None] * 7 and series.threshold[45] == s.threshold


def test_a_flat_noisy_series_has_no_spike() -> None:
    rng = np.random.default_rng(3)
    counts = [int(c) for c in rng.integers(40, 61, size=150)]  # 40..60 a day, no trend
    _, found = spikes.detect(_days(150), counts)
    assert found == []


def test_the_window_and_k_are_configurable() -> None:
    counts = [10, 12] * 20 + [15]
    assert spikes.detect(_days(41), counts)[1][0].index == 40  # mean 11, sd 1: threshold 13.5
    assert spikes.detect(_days(41), counts, k=5)[1] == []  # threshold 16
    assert spikes.detect(_days(41), counts, window=7, min_history=50)[1] == []


def test_daily_counts_fill_the_gaps() -> None:
    days, counts = spikes.daily_counts([D0, D0, D0 + dt.timedelta(days=3)])
    assert counts == [2, 0, 0, 1] and days[-1] == D0 + dt.timedelta(days=3)


def test_trending_terms_compare_the_spike_window_with_the_baseline() -> None:
    texts: dict[dt.date, list[str]] = {
        D0 + dt.timedelta(days=i): ["The vaccine study shows no effect", "Masks and the flu season"] for i in range(30)
    }
    spike_day = D0 + dt.timedelta(days=30)
    texts[spike_day] = [
        "Ivermectin does not treat COVID, see https://www.fda.gov/ivermectin",
        "Ivermectin trials found no benefit",
        "The vaccine study shows no effect",
    ]
    terms = spikes.trending_terms(texts, spike_day)
    assert terms[0][0] == "ivermectin" and terms[0][1] == 2
    names = [t for t, _, _ in terms]
    assert "vaccine" not in names and "the" not in names and "www" not in names and "fda" not in names


def test_a_sparse_series_has_no_spike_below_the_minimum_count() -> None:
    counts = [0] * 40 + [1] + [0] * 20 + [3]
    assert spikes.detect(_days(len(counts)), counts)[1] == []
    # Without the count and active-day minimums, day 61 (3 after a single 1) is a spike; day 40 (1 after
    # 40 zeros) never is: its threshold is 0.
    loose = spikes.detect(_days(len(counts)), counts, min_count=1, min_active_days=0)[1]
    assert [s.index for s in loose] == [61]


def test_last_days_keeps_the_spikes_in_the_shown_period() -> None:
    counts = [10, 12] * 30
    counts[20] = counts[50] = 40
    series, found = spikes.detect(_days(60), counts)
    cut, kept = spikes.last_days(series, found, 20)
    assert len(cut.days) == 20 and [s.index for s in kept] == [10] and cut.counts[10] == 40


def test_a_silent_history_never_makes_a_spike() -> None:
    # The demo's load day: 40 notes after 28 empty days. The threshold of an all-zero window is 0,
    # which any count exceeds: it must not make a spike.
    counts = [0] * 28 + [40]
    series, found = spikes.detect(_days(29), counts)
    assert found == [] and series.threshold[-1] is None
    # Items on only two of the window's days: not enough history either.
    counts = [0] * 20 + [1, 0, 0, 0, 0, 0, 1, 0] + [40]
    assert spikes.detect(_days(29), counts)[1] == []
    # A zero threshold with enough active days is impossible unless k makes it so; it is refused too.
    counts = [1, 0, 2, 0, 3, 0, 1, 0, 2, 9]
    assert [s.index for s in spikes.detect(_days(10), counts)[1]] == [9]
    assert spikes.detect(_days(10), [0] * 9 + [9], min_active_days=0)[1] == []


def test_enough_active_days_make_a_day_a_spike() -> None:
    counts = [0, 1, 0, 2, 0, 1, 0, 1, 0, 0, 12]
    _series, found = spikes.detect(_days(11), counts)
    assert [s.index for s in found] == [10] and found[0].threshold > 0


def test_the_stop_words_are_scikit_learns_list() -> None:
    # spikes.py keeps a copy so that the analytics page does not import scikit-learn (and scipy).
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    assert spikes.ENGLISH_STOP_WORDS == ENGLISH_STOP_WORDS
    assert spikes.tokens("Which of the vaccines cause autism?") == {"vaccines", "cause", "autism"}
