"""The simulated jury (pure numpy): sample jurors, draw each juror's rating from the PHM's
probabilities (sampling, not argmax: argmax turns every 55 % "Helpful" into a certain Helpful and
inflates the score), and project each candidate onto the scorer's scale with μ and the jurors'
parameters fixed (`crowdnotes_site.lib.communitynotes.scoring.solver.score_candidate`, the phase-2 ridge solve). The uncertainty of a
candidate's score is the spread over repeated jury draws."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from crowdnotes_site.lib.communitynotes import scoring

# Column order of the PHM output and the rating value each column stands for.
LEVEL_VALUES = np.array([1.0, 0.5, 0.0])  # helpful, somewhat, not helpful
DEFAULT_JURY_SIZE = 200
DEFAULT_DRAWS = 8
PROPOSE_MIN_INTERCEPT = 0.40


def sample_jurors(
    rater_factor: np.ndarray, size: int, rng: np.random.Generator, *, stratified: bool = False
) -> np.ndarray:
    """Indexes of `size` jurors (with replacement when the pool is smaller). Stratified: half from
    each side of the factor axis (both sides present whenever the pool has both)."""
    n = len(rater_factor)
    if n == 0:
        raise ValueError("no raters with scorer parameters to draw a jury from")
    if stratified:
        left = np.flatnonzero(rater_factor < 0)
        right = np.flatnonzero(rater_factor >= 0)
        if len(left) and len(right):
            k = size // 2
            return np.concatenate(
                [rng.choice(left, k, replace=k > len(left)), rng.choice(right, size - k, replace=size - k > len(right))]
            )
    return rng.choice(n, size, replace=size > n)


def sample_ratings(probs: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One rating value per (…, 3) probability row, drawn from the categorical distribution."""
    cum = np.cumsum(probs, axis=-1)
    u = rng.random(probs.shape[:-1])[..., None] * cum[..., -1:]
    idx = np.minimum((u > cum).sum(axis=-1), 2)
    return LEVEL_VALUES[idx]


def argmax_ratings(probs: np.ndarray) -> np.ndarray:
    """The most likely rating per row (what the jury must NOT use; kept for the comparison)."""
    return LEVEL_VALUES[np.argmax(probs, axis=-1)]


def project(
    values: np.ndarray,
    rater_intercept: np.ndarray,
    rater_factor: np.ndarray,
    mu: float,
    ratings_per_note: float,
    config: scoring.ScoringConfig | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """(intercept, factor) of each candidate row of `values` (C, J), jurors' parameters (J,) or (C, J)."""
    c = values.shape[0]
    ri = np.broadcast_to(rater_intercept, values.shape)
    rf = np.broadcast_to(rater_factor, values.shape)
    out_i, out_f = np.empty(c), np.empty(c)
    for k in range(c):
        out_i[k], out_f[k] = scoring.score_candidate(
            rater_intercept=ri[k], rater_factor=rf[k], value=values[k], mu=mu,
            ratings_per_note=ratings_per_note, config=config,
        )  # fmt: skip
    return out_i, out_f


@dataclass
class JuryScores:
    intercept: np.ndarray  # mean over draws, per candidate
    factor: np.ndarray
    intercept_sd: np.ndarray  # spread over draws
    jurors: np.ndarray  # the first draw's juror indexes


def jury_scores(
    probs_for: Callable[[np.ndarray], np.ndarray],
    rater_intercept: np.ndarray,
    rater_factor: np.ndarray,
    *,
    mu: float,
    ratings_per_note: float,
    jury_size: int = DEFAULT_JURY_SIZE,
    draws: int = DEFAULT_DRAWS,
    stratified: bool = False,
    seed: int = 0,
) -> JuryScores:
    """Score every candidate: `probs_for(juror_indexes)` returns the PHM's (C, J, 3) probabilities
    for those jurors. Each draw samples a new jury and new ratings."""
    rng = np.random.default_rng(seed)
    ints, facs = [], []
    first: np.ndarray | None = None
    for _ in range(draws):
        jurors = sample_jurors(rater_factor, jury_size, rng, stratified=stratified)
        first = jurors if first is None else first
        values = sample_ratings(probs_for(jurors), rng)
        i, f = project(values, rater_intercept[jurors], rater_factor[jurors], mu, ratings_per_note)
        ints.append(i)
        facs.append(f)
    a, b = np.array(ints), np.array(facs)
    assert first is not None
    return JuryScores(
        a.mean(axis=0), b.mean(axis=0), a.std(axis=0, ddof=1) if draws > 1 else np.zeros(a.shape[1]), first
    )


def estimate_mu(
    value: np.ndarray,
    rater_intercept: np.ndarray,
    rater_factor: np.ndarray,
    note_intercept: np.ndarray,
    note_factor: np.ndarray,
) -> float:
    """The scorer's global intercept μ given the stored rater and note parameters (the closed-form μ
    step without its tiny regularisation), for ratings whose rater and note both have parameters."""
    resid = value - rater_intercept - note_intercept - rater_factor * note_factor
    ok = ~np.isnan(resid)
    return float(resid[ok].mean()) if ok.any() else 0.0


@dataclass(frozen=True)
class Selection:
    index: int | None  # the proposed candidate, or None
    best_index: int | None  # the highest-intercept candidate
    reason: str


def near_tie(a: float, a_sd: float, b: float, b_sd: float) -> bool:
    """Two jury scores tie when they differ by less than the larger of their spreads over draws:
    the order between them is jury-sampling noise, not a win."""
    return abs(a - b) < max(a_sd, b_sd)


def describe_best(indexes: Sequence[int], intercepts: Sequence[float], sds: Sequence[float]) -> str:
    """How the best candidate stands against the runner-up on the selecting draws: a win, or a tie
    stated with both scores and their spread."""
    order = sorted(range(len(intercepts)), key=lambda k: -intercepts[k])
    first = order[0]
    top = f"{intercepts[first]:.3f} ± {sds[first]:.3f}"
    if len(order) < 2:
        return f"Candidate {indexes[first]} scored best on the selecting draws ({top})"
    second = order[1]
    runner = f"{intercepts[second]:.3f} ± {sds[second]:.3f}"
    if near_tie(intercepts[first], sds[first], intercepts[second], sds[second]):
        return (
            f"Candidates {indexes[first]} and {indexes[second]} tie on the selecting draws ({top} and {runner}: "
            f"a difference of {intercepts[first] - intercepts[second]:.3f}, within the jury's spread); "
            f"candidate {indexes[first]} was taken on"
        )
    return f"Candidate {indexes[first]} scored best on the selecting draws ({top}; next candidate {runner})"


def select(
    intercepts: Sequence[float],
    best_existing: float | None,
    *,
    threshold: float = PROPOSE_MIN_INTERCEPT,
    sd: float = 0.0,
) -> Selection:
    """Pick the highest-intercept candidate; propose it only above `threshold` and above the best
    existing note's intercept (when the post has a scored note) by more than the candidate's
    spread over jury draws `sd` (a closer score is a tie, not a win)."""
    if len(intercepts) == 0:
        return Selection(None, None, "No candidate passed the filters.")
    best = int(np.nanargmax(np.asarray(intercepts, dtype=float)))
    top = float(intercepts[best])
    if not top > threshold:
        return Selection(None, best, f"Best jury intercept {top:.3f} is not above {threshold:.2f}.")
    if best_existing is not None and not top > best_existing:
        return Selection(
            None, best, f"Best jury intercept {top:.3f} does not beat the best existing note ({best_existing:.3f})."
        )
    if best_existing is not None and near_tie(top, sd, best_existing, 0.0):
        return Selection(
            None, best, f"Best jury intercept {top:.3f} ± {sd:.3f} ties the best existing note ({best_existing:.3f}): "
            f"the difference {top - best_existing:.3f} is within the jury's spread, so it is not a win and nothing "
            "is proposed.",
        )  # fmt: skip
    against = "no existing note is scored" if best_existing is None else f"best existing note {best_existing:.3f}"
    return Selection(best, best, f"Jury intercept {top:.3f} > {threshold:.2f} and {against}.")
