"""The scorer's constants: one frozen ScoringConfig whose defaults are the reference core scorer's."""

from __future__ import annotations

from dataclasses import dataclass

DAY_MS = 24 * 3600 * 1000


@dataclass(frozen=True)
class ScoringConfig:
    """Every constant of the scorer; defaults are the reference core scorer's."""

    lambda_intercept: float = 0.15
    lambda_factor: float = 0.03
    # Filters before the fit (one pass: notes, raters, notes).
    min_ratings_per_note: int = 5
    min_ratings_per_rater: int = 10
    min_ratings_for_status: int = 5
    # Status thresholds.
    crh_intercept: float = 0.40
    crh_max_abs_factor: float = 0.5
    crnh_intercept: float = -0.05
    crnh_factor_multiplier: float = -0.8
    # Notes saying the post is NOT misleading never become Helpful; they become Not Helpful
    # below this intercept (reference rule NM_CRNH).
    crnh_not_misleading_intercept: float | None = -0.15
    firm_reject_intercept: float | None = 0.3
    # Ratio rule (Not Helpful on both sides).
    ratio_rule: bool = True
    ratio_max_side_mean: float = 0.4
    ratio_max_avg_side_mean: float = 0.3
    ratio_min_side_count: int = 3
    # Minority support for Helpful.
    min_minority_net_helpful: int | None = 4
    min_minority_net_helpful_ratio: float | None = 0.05
    minority_ratio_upper: int = 10
    # Refinements.
    inertia: bool = True
    inertia_intercept: float = 0.39
    incorrect_filter: bool = True
    incorrect_min_tags: int = 2
    incorrect_min_voters: int = 3
    incorrect_min_weighted: float = 2.5
    incorrect_interval_half_width: float = 0.3
    incorrect_factor_clip: float = 0.4
    # Tag-outlier filter: a non-Not-Helpful note whose rater-distance-weighted share of one
    # not-helpful tag is above that tag's 95th percentile among the preliminary Helpful notes,
    # with a weighted count of that tag above 2.5, is held back (reference TAG_OUTLIER).
    tag_filter: bool = True
    tag_filter_percentile: int = 95
    tag_min_adjusted_total: float = 2.5
    tag_distance_percentile: float = 40.0
    # Confidence bound: Not Helpful when even the highest intercept from a refit with one extra
    # Helpful rating by an extreme pseudo-rater stays below this (reference UCB_CRNH).
    crnh_ucb_intercept: float | None = -0.04
    # Low-diligence filter: a note whose low-diligence intercept is above this is held back
    # (reference LOW_DILIGENCE); applied only when NotesMeta.low_diligence_intercept is given.
    low_diligence_intercept: float = 0.263
    lock_after_days: float | None = 14.0
    reputation_filter: bool = True
    min_rater_agree_ratio: float = 0.66
    min_mean_note_score: float = 0.05
    min_crh_crnh_ratio_difference: float = 0.0
    author_crnh_multiplier: float = 5.0
    # Reference: only ratings within 48 h of note creation count (before the public data release).
    # None: no window (the app never shows other ratings first; see notes.services).
    valid_rating_window_ms: int | None = 2 * DAY_MS
    old_note_cutoff_ms: int = 1652918400000  # notes before status history existed
    old_note_max_valid_ratings: int = 5
    # Solver.
    tol: float = 1e-6
    max_iter: int = 2000
    # Over-relaxation of the alternating solve: each block moves ω times its exact step. Every
    # block problem is quadratic, so any ω in (0, 2) still lowers the loss at every step; 1.4
    # roughly halves the sweeps (bench/README.md, "Solver: over-relaxation"). 1.0 = plain ALS.
    over_relaxation: float = 1.4
    seed: int = 0


# The defaults, built once (the config is frozen): explaining each note must not build one.
DEFAULT_CONFIG = ScoringConfig()
