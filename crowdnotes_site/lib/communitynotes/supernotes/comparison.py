"""The blind comparison by raters (pure): the five statements, the 5-point scale, the order of
the two notes, and the Supernote's win rate with its 95 % Wilson score interval.

A rater sees the proposed Supernote and the best existing note of the same post as "Note A" and
"Note B" (which is which is drawn once per assignment and stored), picks the more helpful one and
rates each on the five statements of the study's human evaluation."""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

# The study's statements (key, text shown to the rater).
STATEMENTS: tuple[tuple[str, str], ...] = (
    ("sources", "Its sources are high-quality and relevant."),
    ("clear", "It is written in clear language."),
    ("key_claims", "It addresses all key claims in the post."),
    ("context", "It provides important context."),
    ("neutral", "It is not argumentative, speculative or biased."),
)
STATEMENT_KEYS = tuple(k for k, _ in STATEMENTS)
SCALE: tuple[tuple[int, str], ...] = (
    (1, "Strongly disagree"),
    (2, "Disagree"),
    (3, "Neither"),
    (4, "Agree"),
    (5, "Strongly agree"),
)
# The study's result, shown beside ours and labelled as the study's.
STUDY_WIN_RATE = 0.752
Z_95 = 1.959963984540054


def draw_supernote_first(rng: random.Random | None = None) -> bool:
    """Whether the Supernote is shown as Note A: a fair coin, drawn on the server per assignment."""
    return (rng or random.SystemRandom()).random() < 0.5


def wilson_interval(successes: float, n: int, z: float = Z_95) -> tuple[float, float]:
    """The Wilson score interval of a binomial proportion (95 % for the default z); (0, 1) when n = 0."""
    if n <= 0:
        return 0.0, 1.0
    if not 0 <= successes <= n:
        raise ValueError("successes must be between 0 and n")
    p = successes / n
    z2 = z * z
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    return max(0.0, centre - half), min(1.0, centre + half)


@dataclass(frozen=True)
class StatementMean:
    key: str
    text: str
    supernote_mean: float | None
    supernote_n: int
    other_mean: float | None
    other_n: int


@dataclass(frozen=True)
class WinRate:
    n: int
    wins: int
    rate: float | None
    low: float
    high: float
    statements: tuple[StatementMean, ...]

    @property
    def percent(self) -> float | None:
        return None if self.rate is None else 100 * self.rate

    @property
    def low_percent(self) -> float:
        return 100 * self.low

    @property
    def high_percent(self) -> float:
        return 100 * self.high


def _mean(values: list[int]) -> float | None:
    return sum(values) / len(values) if values else None


def summarize(answers: Iterable[tuple[bool, Mapping[str, int], Mapping[str, int]]]) -> WinRate:
    """Win rate + Wilson 95 % interval and per-statement means from answered comparisons, each
    (supernote preferred, the Supernote's scores, the other note's scores)."""
    n = wins = 0
    sn: dict[str, list[int]] = {k: [] for k in STATEMENT_KEYS}
    other: dict[str, list[int]] = {k: [] for k in STATEMENT_KEYS}
    for preferred, sn_scores, other_scores in answers:
        n += 1
        wins += int(preferred)
        for k in STATEMENT_KEYS:
            if k in sn_scores:
                sn[k].append(int(sn_scores[k]))
            if k in other_scores:
                other[k].append(int(other_scores[k]))
    low, high = wilson_interval(wins, n)
    statements = tuple(
        StatementMean(k, text, _mean(sn[k]), len(sn[k]), _mean(other[k]), len(other[k])) for k, text in STATEMENTS
    )
    return WinRate(n, wins, wins / n if n else None, low, high, statements)
