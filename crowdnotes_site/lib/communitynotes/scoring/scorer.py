"""Community Notes matrix-factorization scorer (pure numpy, no ORM).

Model: r̂(u, n) = μ + i_u + i_n + f_u·f_n with one factor. The reference loss is
    mean((y - r̂)²) + λ_i·(mean(i_u²) + mean(i_n²) + μ²) + λ_f·(mean(f_u²) + mean(f_n²)).
Multiplying by the number of ratings N gives the equivalent sum-of-squares ridge form
    Σ(y - r̂)² + λ_i·N/U·Σi_u² + λ_f·N/U·Σf_u² + λ_i·N/M·Σi_n² + λ_f·N/M·Σf_n² + λ_i·N·μ²
(U raters, M notes in the training set), which we minimise by alternating exact 2x2 ridge
solves per rater and per note (vectorised with np.bincount) and a closed-form μ step.

Pipeline (mirrors the reference core scorer, see docs in bench/README.md):
1. filters (notes ≥5, raters ≥10, notes ≥5), phase-1 fit;
2. optional rater-reputation filter, then a warm-started refit on the kept raters;
3. phase 2: μ and raters fixed, each note solved alone with the note regularisation scaled
   by the ratings-per-note of step 2 (reference: λ·Σp² / (N / ratio));
4. status rules (last matching rule wins) and refinements.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, fields

import numpy as np

from crowdnotes_site.lib import status as names

NEEDS_MORE_RATINGS = 0
CURRENTLY_RATED_HELPFUL = 1
CURRENTLY_RATED_NOT_HELPFUL = 2
# Internal outcomes that are displayed as Needs More Ratings.
FIRM_REJECT = 3
NEEDS_YOUR_HELP = 4

STATUS_NAMES = {
    NEEDS_MORE_RATINGS: names.NEEDS_MORE_RATINGS,
    CURRENTLY_RATED_HELPFUL: names.CURRENTLY_RATED_HELPFUL,
    CURRENTLY_RATED_NOT_HELPFUL: names.CURRENTLY_RATED_NOT_HELPFUL,
    FIRM_REJECT: names.FIRM_REJECT,
    NEEDS_YOUR_HELP: names.NEEDS_YOUR_HELP,
}
NO_STATUS = -1

# Not-helpful tags in the public ratings layout's column order; bit k of
# Ratings.not_helpful_tags is NOT_HELPFUL_TAGS[k].
NOT_HELPFUL_TAGS = (
    "notHelpfulOther",
    "notHelpfulIncorrect",
    "notHelpfulSourcesMissingOrUnreliable",
    "notHelpfulOpinionSpeculationOrBias",
    "notHelpfulMissingKeyPoints",
    "notHelpfulOutdated",
    "notHelpfulHardToUnderstand",
    "notHelpfulArgumentativeOrBiased",
    "notHelpfulOffTopic",
    "notHelpfulSpamHarassmentOrAbuse",
    "notHelpfulIrrelevantSources",
    "notHelpfulOpinionSpeculation",
    "notHelpfulNoteNotNeeded",
)
TAG_BIT = {tag: 1 << k for k, tag in enumerate(NOT_HELPFUL_TAGS)}
# The reference does not filter on this tag.
_TAG_FILTER_SKIPPED = "notHelpfulHardToUnderstand"

# Status rules, in the order they run (the last matching rule wins); bit k of
# ScoringResult.rules is RULES[k]. Names follow the reference's active-rules column.
RULES = (
    "InitialNMR",
    "GeneralCRH",
    "GeneralCRNH",
    "UcbCRNH",
    "RatioCRNH",
    "NmCRNH",
    "GeneralCRHInertia",
    "TagOutlier",
    "IncorrectOutlier",
    "LowDiligence",
    "LargeFactor",
    "LowIntercept",
    "MinMinorityRaters",
    "RaterBalance",
    "Locked",
)
RULE_BIT = {name: 1 << k for k, name in enumerate(RULES)}

DAY_MS = 24 * 3600 * 1000
# Side means are ratios of small counts: (0.4 + 0.2) / 2 must count as 0.3, not 0.30000000000000004.
_EPS = 1e-9


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


@dataclass
class Ratings:
    """Ratings as parallel arrays; rater indices share one index space with note authors."""

    rater: np.ndarray
    note: np.ndarray
    value: np.ndarray
    created_at_ms: np.ndarray | None = None
    incorrect_tag: np.ndarray | None = None
    any_not_helpful_tag: np.ndarray | None = None
    not_helpful_tags: np.ndarray | None = None  # uint16 bit mask per rating, see NOT_HELPFUL_TAGS

    def __post_init__(self) -> None:
        # Indices as int32 (4 bytes per rating each, not 8): 2^31 raters or notes is far beyond
        # any real data, and a larger index is refused rather than wrapped.
        self.rater = _index_array(self.rater)
        self.note = _index_array(self.note)
        # float32 is kept (4 bytes per rating, not 8): 0, 0.5 and 1 are exact in it, and every
        # sum or difference over values is taken in float64 (fit_mf, _note_stats), so the
        # results are those of float64 values, bit for bit.
        value = np.asarray(self.value)
        self.value = value if value.dtype == np.float32 else value.astype(np.float64)

    def keep_rows(self, keep: np.ndarray) -> None:
        """Only the rows where `keep` is true, replaced column by column: with no other reference to
        the columns, at most one column is held twice at a time (a copy would hold them all twice)."""
        for column in fields(self):
            values = getattr(self, column.name)
            if values is not None:
                setattr(self, column.name, values[keep])


def _index_array(values: np.ndarray) -> np.ndarray:
    out = np.asarray(values)
    if out.dtype == np.int32:
        return out
    if len(out) and (int(out.max()) > np.iinfo(np.int32).max or int(out.min()) < np.iinfo(np.int32).min):
        raise ValueError("more than 2^31 raters or notes: indices must fit in int32")
    return out.astype(np.int32)


@dataclass
class NotesMeta:
    """Per-note metadata, indexed by note index."""

    n_notes: int
    not_misleading: np.ndarray | None = None
    created_at_ms: np.ndarray | None = None
    author: np.ndarray | None = None  # participant index or -1
    previous_status: np.ndarray | None = None  # status code or NO_STATUS
    last_non_nmr_status_ms: np.ndarray | None = None  # -1 when never rated non-NMR
    locked_status: np.ndarray | None = None  # status code or NO_STATUS
    # From a low-diligence model fitted elsewhere (NaN: no estimate); the scorer has none itself.
    low_diligence_intercept: np.ndarray | None = None

    def get(self, name: str, fill: float | int | bool, dtype: type) -> np.ndarray:
        value = getattr(self, name)
        if value is None:
            return np.full(self.n_notes, fill, dtype=dtype)
        return np.asarray(value, dtype=dtype)


@dataclass
class MFParams:
    mu: float
    rater_intercept: np.ndarray
    rater_factor: np.ndarray
    note_intercept: np.ndarray
    note_factor: np.ndarray
    iterations: int = 0


@dataclass
class ScoringResult:
    """NaN for raters/notes that got no parameters."""

    mu: float
    rater_intercept: np.ndarray
    rater_factor: np.ndarray
    note_intercept: np.ndarray
    note_factor: np.ndarray
    status: np.ndarray  # displayed status: NMR / CRH / CRNH
    internal_status: np.ndarray  # also FIRM_REJECT / NEEDS_YOUR_HELP
    num_ratings: np.ndarray
    rater_helpful: np.ndarray  # passed the reputation filter
    diagnostics: dict[str, float] = field(default_factory=dict)
    explanation: NoteExplanation | None = None


@dataclass
class NoteExplanation:
    """Why each note has its status: the rules that matched (bits of RULES, last one decided)
    and the quantities behind them. Arrays are indexed by note; NaN where not computed."""

    rules: np.ndarray  # uint32 bit mask over RULES
    intercept_min: np.ndarray  # lowest / highest intercept of the pseudo-rater refits
    intercept_max: np.ndarray
    neg_count: np.ndarray  # ratings from raters with a negative / non-negative factor
    pos_count: np.ndarray
    net_min_helpful: np.ndarray  # max(0, min over sides of #Helpful - #Not helpful)
    tag_outliers: np.ndarray  # uint16 bit mask over NOT_HELPFUL_TAGS that triggered TagOutlier
    incorrect: np.ndarray  # bool: the incorrect-tag filter matched


def rule_names(mask: int) -> list[str]:
    return [name for name in RULES if mask & RULE_BIT[name]]


def deciding_rule(mask: int) -> str:
    """The last rule that matched (the rules run in RULES order; the last match wins)."""
    names_ = rule_names(mask)
    return names_[-1] if names_ else RULES[0]


def tag_names(mask: int) -> list[str]:
    return [tag for tag in NOT_HELPFUL_TAGS if mask & TAG_BIT[tag]]


# ---------------------------------------------------------------- solver


def _solve_2x2(
    count: np.ndarray,
    s_x: np.ndarray,
    s_xx: np.ndarray,
    s_r: np.ndarray,
    s_rx: np.ndarray,
    reg_intercept: float,
    reg_factor: float,
) -> tuple[np.ndarray, np.ndarray]:
    """Ridge solve of min Σ(r - a - f·x)² + reg_i·a² + reg_f·f² from its sufficient stats."""
    a11 = count + reg_intercept
    a22 = s_xx + reg_factor
    det = a11 * a22 - s_x * s_x
    det = np.where(det == 0, 1.0, det)
    intercept = (s_r * a22 - s_x * s_rx) / det
    factor = (a11 * s_rx - s_x * s_r) / det
    return intercept, factor


def score_candidate(
    *,
    rater_intercept: np.ndarray,
    rater_factor: np.ndarray,
    value: np.ndarray,
    mu: float,
    ratings_per_note: float,
    config: ScoringConfig | None = None,
) -> tuple[float, float]:
    """Fit one note's (intercept, factor) with μ and the raters fixed (phase-2 loss)."""
    cfg = config or DEFAULT_CONFIG
    x = np.asarray(rater_factor, dtype=np.float64)
    r = np.asarray(value, dtype=np.float64) - mu - np.asarray(rater_intercept, dtype=np.float64)
    a, f = _solve_2x2(
        np.array([float(len(r))]),
        np.array([x.sum()]),
        np.array([(x * x).sum()]),
        np.array([r.sum()]),
        np.array([(r * x).sum()]),
        cfg.lambda_intercept * ratings_per_note,
        cfg.lambda_factor * ratings_per_note,
    )
    return float(a[0]), float(f[0])


def mf_loss(params: MFParams, rater: np.ndarray, note: np.ndarray, y: np.ndarray, cfg: ScoringConfig) -> float:
    """The reference objective (means of squared parameters) on compact indices."""
    pred = (
        params.mu
        + params.rater_intercept[rater]
        + params.note_intercept[note]
        + params.rater_factor[rater] * params.note_factor[note]
    )
    return float(
        np.mean((y - pred) ** 2)
        + cfg.lambda_intercept * (np.mean(params.rater_intercept**2) + np.mean(params.note_intercept**2) + params.mu**2)
        + cfg.lambda_factor * (np.mean(params.rater_factor**2) + np.mean(params.note_factor**2))
    )


def stable_order(idx: np.ndarray) -> np.ndarray:
    """np.argsort(idx, kind="stable") for non-negative int32 indices, as a radix sort on 16-bit
    digits (numpy sorts 16-bit keys by radix): the same order, 3-6x faster than its merge sort.
    The digits are read as uint16 views of the int32s (no 4-byte temporary per element)."""
    idx = np.ascontiguousarray(idx, dtype=np.int32)
    halves = idx.view(np.uint16)  # little-endian: low digit, high digit, per element
    lo, hi = (0, 1) if np.little_endian else (1, 0)
    order = np.argsort(halves[lo::2], kind="stable")
    if len(idx) and int(idx.max()) > 0xFFFF:
        high = halves[hi::2][order]
        order = order[np.argsort(high, kind="stable")]
    return order


# Ratings per block of the chunked segment sums: bounds the per-sweep temporaries (4 float32
# arrays of one block) instead of 4 arrays as long as the ratings.
SEGMENT_BLOCK = 1 << 20


def _blocks(starts: np.ndarray, n: int, block: int = SEGMENT_BLOCK) -> list[tuple[int, int, int, int]]:
    """(first segment, end segment, first rating, end rating) of blocks of whole segments of
    about `block` ratings (a segment longer than a block is a block of its own)."""
    if not len(starts):
        return []
    cuts = np.unique(np.searchsorted(starts, np.arange(0, n, block), side="right") - 1)
    cuts = np.r_[cuts, len(starts)]
    bounds = np.r_[starts, n]
    return [(int(a), int(b), int(bounds[a]), int(bounds[b])) for a, b in itertools.pairwise(cuts)]


def _segment_sums(
    y: np.ndarray,
    other: np.ndarray,
    factor32: np.ndarray,
    offset32: np.ndarray,
    starts: np.ndarray,
    blocks: list[tuple[int, int, int, int]],
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per segment (ratings grouped contiguously): Σx, Σx², Σr, Σr·x with x = factor[other] and
    r = y - offset[other], block by block; each segment is summed whole within its block, so the
    sums are those of one pass over all ratings (float64 accumulation of float32 terms)."""
    m = len(starts)
    s_x, s_xx, s_r, s_rx = (np.empty(m) for _ in range(4))
    seg = np.add.reduceat
    for a, b, lo, hi in blocks:
        o = other[lo:hi]
        x = factor32[o]
        r = y[lo:hi] - offset32[o]
        local = starts[a:b] - lo
        s_x[a:b] = seg(x, local, dtype=np.float64)
        s_r[a:b] = seg(r, local, dtype=np.float64)
        r *= x
        s_rx[a:b] = seg(r, local, dtype=np.float64)
        x *= x
        s_xx[a:b] = seg(x, local, dtype=np.float64)
    return s_x, s_xx, s_r, s_rx


# Ratings per chunk where the pipeline walks all ratings in pieces (bounded temporaries).
CHUNK = 1 << 19


def _chunks(n: int, size: int = CHUNK) -> Iterator[slice]:
    for lo in range(0, n, size):
        yield slice(lo, min(lo + size, n))


@dataclass
class _Grouped:
    """The ratings twice, grouped by note and by rater (each in the ratings' order within its
    group), so that per-entity sums are contiguous segment sums (np.add.reduceat) instead of
    random scatters. float32 per-rating work arrays halve memory traffic; segments are short,
    so the per-entity sums stay accurate to ~1e-7, well below the convergence tolerance."""

    n: int
    sum_y: float
    count_n: np.ndarray
    starts_n: np.ndarray
    y_n: np.ndarray
    rater_n: np.ndarray
    count_r: np.ndarray
    starts_r: np.ndarray
    y_r: np.ndarray
    note_r: np.ndarray


def _place(key: np.ndarray, nxt: np.ndarray, pairs: list[tuple[np.ndarray, np.ndarray]]) -> None:
    """Scatter one chunk of ratings to their groups' next free slots, in order (a stable
    counting sort chunk by chunk: the same order as one stable argsort of all keys)."""
    if not len(key):
        return
    o = stable_order(key)
    ks = key[o]
    first = np.r_[True, ks[1:] != ks[:-1]]
    at = np.arange(len(ks))
    rank = at - np.maximum.accumulate(np.where(first, at, 0))
    pos = nxt[ks] + rank
    for out, values in pairs:
        out[pos] = values[o]
    heads = np.flatnonzero(first)
    nxt[ks[heads]] += np.diff(np.r_[heads, len(ks)])


def _group(
    chunks: Callable[[], Iterable[tuple[np.ndarray, np.ndarray, np.ndarray]]], n_raters: int, n_notes: int
) -> _Grouped:
    """Group (rater, note, y) chunks, read twice (counts, then placement): no per-rating order
    array and no copy of the inputs is held, only the two grouped copies (16 bytes per rating)."""
    count_n = np.zeros(n_notes, dtype=np.int64)
    count_r = np.zeros(n_raters, dtype=np.int64)
    sum_y = 0.0  # exact in any order: the values are multiples of 0.5
    for r, nt, y in chunks():
        count_n += np.bincount(nt, minlength=n_notes)
        count_r += np.bincount(r, minlength=n_raters)
        sum_y += float(y.sum(dtype=np.float64))
    n = int(count_n.sum())
    starts_n = np.r_[0, np.cumsum(count_n)[:-1]].astype(np.int64)
    starts_r = np.r_[0, np.cumsum(count_r)[:-1]].astype(np.int64)
    y_n, rater_n = np.empty(n, dtype=np.float32), np.empty(n, dtype=np.int32)
    y_r, note_r = np.empty(n, dtype=np.float32), np.empty(n, dtype=np.int32)
    nxt_n, nxt_r = starts_n.copy(), starts_r.copy()
    for r, nt, y in chunks():
        _place(nt, nxt_n, [(y_n, y), (rater_n, r)])
        _place(r, nxt_r, [(y_r, y), (note_r, nt)])
    return _Grouped(n, sum_y, count_n.astype(np.float64), starts_n, y_n, rater_n, count_r.astype(np.float64),
                    starts_r, y_r, note_r)  # fmt: skip


def fit_mf(
    rater: np.ndarray,
    note: np.ndarray,
    y: np.ndarray,
    n_raters: int,
    n_notes: int,
    cfg: ScoringConfig,
    init: MFParams | None = None,
) -> MFParams:
    """Minimise the reference loss by alternating block updates.

    Each sweep solves the notes given the raters, the raters given the notes (each block move
    over-relaxed by `cfg.over_relaxation`), then μ jointly with one common shift of the note
    intercepts and one of the rater intercepts: the direction plain alternation crawls along,
    since all three add the same constant to every prediction. `rater`/`note` must be compact (every index
    in range has at least one rating).
    """
    rater, note = _index_array(rater), _index_array(note)

    def chunks() -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        for sl in _chunks(len(y)):
            yield rater[sl], note[sl], y[sl]

    return _fit_grouped(_group(chunks, n_raters, n_notes), n_raters, n_notes, cfg, init)


def _fit_grouped(g_: _Grouped, n_raters: int, n_notes: int, cfg: ScoringConfig, init: MFParams | None) -> MFParams:
    n = g_.n
    lam_i, lam_f = cfg.lambda_intercept, cfg.lambda_factor
    reg_ri, reg_rf = lam_i * n / n_raters, lam_f * n / n_raters
    reg_ni, reg_nf = lam_i * n / n_notes, lam_f * n / n_notes
    y_n, rater_n, count_n, starts_n = g_.y_n, g_.rater_n, g_.count_n, g_.starts_n
    y_r, note_r, count_r, starts_r = g_.y_r, g_.note_r, g_.count_r, g_.starts_r
    blocks_n, blocks_r = _blocks(starts_n, n), _blocks(starts_r, n)
    sum_y = g_.sum_y
    if init is None:
        rng = np.random.default_rng(cfg.seed)
        mu = sum_y / n / (1 + lam_i)
        a = np.zeros(n_raters)
        f = rng.uniform(-0.5, 0.5, n_raters)
        b = np.zeros(n_notes)
        g = rng.uniform(-0.5, 0.5, n_notes)
    else:
        mu = init.mu
        a, f = init.rater_intercept.copy(), init.rater_factor.copy()
        b, g = init.note_intercept.copy(), init.note_factor.copy()
    omega = cfg.over_relaxation
    it = 0
    while it < cfg.max_iter:
        it += 1
        # Notes given raters and μ.
        f32, a32 = f.astype(np.float32), (a + mu).astype(np.float32)
        b_new, g_new = _solve_2x2(count_n, *_segment_sums(y_n, rater_n, f32, a32, starts_n, blocks_n), reg_ni, reg_nf)
        b_new, g_new = b + omega * (b_new - b), g + omega * (g_new - g)
        # Raters given notes and μ.
        g32, b32 = g_new.astype(np.float32), (b_new + mu).astype(np.float32)
        s_x, s_xx, s_r, s_rx = _segment_sums(y_r, note_r, g32, b32, starts_r, blocks_r)
        a_new, f_new = _solve_2x2(count_r, s_x, s_xx, s_r, s_rx, reg_ri, reg_rf)
        a_new, f_new = a + omega * (a_new - a), f + omega * (f_new - f)
        # μ jointly with a common shift of all rater and all note intercepts (μ alone is one
        # direction of it). Shifting μ, every a and every b by t_μ, t_a, t_b moves every
        # prediction by their sum; at the minimum μ, the mean a and the mean b all equal
        # T = (Σ(y - a - b - f·g) / N + mean a + mean b) / (3 + λ_i), with
        # Σ f_u·g_n = Σ_u f_u·Σ_{n∈u} g_n from the sufficient statistics.
        resid_sum = float(sum_y - count_r @ a_new - count_n @ b_new - f_new @ s_x)
        mean_a, mean_b = float(a_new.mean()), float(b_new.mean())
        mu_new = (resid_sum / n + mean_a + mean_b) / (3 + lam_i)
        a_new, b_new = a_new + (mu_new - mean_a), b_new + (mu_new - mean_b)
        delta = max(
            float(np.max(np.abs(a_new - a), initial=0.0)),
            float(np.max(np.abs(f_new - f), initial=0.0)),
            float(np.max(np.abs(b_new - b), initial=0.0)),
            float(np.max(np.abs(g_new - g), initial=0.0)),
            abs(mu_new - mu),
        )
        a, f, b, g, mu = a_new, f_new, b_new, g_new, mu_new
        if delta < cfg.tol:
            break
    return MFParams(mu, a, f, b, g, iterations=it)  # its loss, when wanted: mf_loss()


def flip_for_identification(params: MFParams) -> MFParams:
    """Sign convention: most raters get a negative factor."""
    nonzero = params.rater_factor[params.rater_factor != 0]
    if len(nonzero) and (nonzero < 0).sum() / len(nonzero) < 0.5:
        params.rater_factor = -params.rater_factor
        params.note_factor = -params.note_factor
    return params


# ---------------------------------------------------------------- helpers


def _compact(idx: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Return (compact index per element, original index per compact id)."""
    present = np.zeros(size, dtype=bool)
    present[idx] = True
    originals = np.flatnonzero(present)
    remap = np.full(size, -1, dtype=np.int32)
    remap[originals] = np.arange(len(originals))
    return remap[idx], originals


def filter_ratings(rater: np.ndarray, note: np.ndarray, n_raters: int, n_notes: int, cfg: ScoringConfig) -> np.ndarray:
    """Boolean mask: notes ≥ min, then raters ≥ min, then notes ≥ min again (one pass)."""
    keep = np.ones(len(rater), dtype=bool)
    for by, size, minimum in (
        (note, n_notes, cfg.min_ratings_per_note),
        (rater, n_raters, cfg.min_ratings_per_rater),
        (note, n_notes, cfg.min_ratings_per_note),
    ):
        counts = np.bincount(by[keep], minlength=size)
        keep &= counts[by] >= minimum
    return keep


def _fit_subset(
    ratings: Ratings,
    mask: np.ndarray,
    n_raters: int,
    n_notes: int,
    cfg: ScoringConfig,
    init: tuple[MFParams, np.ndarray, np.ndarray] | None = None,
) -> tuple[MFParams, np.ndarray, np.ndarray]:
    """Fit on ratings[mask]; returns params with the raters/notes they belong to."""
    present_r = np.zeros(n_raters, dtype=bool)
    present_n = np.zeros(n_notes, dtype=bool)
    for sl in _chunks(len(mask)):
        m = mask[sl]
        present_r[ratings.rater[sl][m]] = True
        present_n[ratings.note[sl][m]] = True
    r_orig, n_orig = np.flatnonzero(present_r), np.flatnonzero(present_n)
    remap_r = np.full(n_raters, -1, dtype=np.int32)
    remap_r[r_orig] = np.arange(len(r_orig), dtype=np.int32)
    remap_n = np.full(n_notes, -1, dtype=np.int32)
    remap_n[n_orig] = np.arange(len(n_orig), dtype=np.int32)

    def chunks() -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        for sl in _chunks(len(mask)):
            m = mask[sl]
            yield remap_r[ratings.rater[sl][m]], remap_n[ratings.note[sl][m]], ratings.value[sl][m]

    start = None
    if init is not None:
        prev, prev_r, prev_n = init
        full_a, full_f = np.zeros(n_raters), np.zeros(n_raters)
        full_b, full_g = np.zeros(n_notes), np.zeros(n_notes)
        full_a[prev_r], full_f[prev_r] = prev.rater_intercept, prev.rater_factor
        full_b[prev_n], full_g[prev_n] = prev.note_intercept, prev.note_factor
        start = MFParams(prev.mu, full_a[r_orig], full_f[r_orig], full_b[n_orig], full_g[n_orig])
    params = _fit_grouped(_group(chunks, len(r_orig), len(n_orig)), len(r_orig), len(n_orig), cfg, start)
    return flip_for_identification(params), r_orig, n_orig


def _expand(values: np.ndarray, where: np.ndarray, size: int) -> np.ndarray:
    out = np.full(size, np.nan)
    out[where] = values
    return out


def _side_stats(ratings: Ratings, rater_factor: np.ndarray, n_notes: int) -> dict[str, np.ndarray]:
    """Per-note counts by rater side (factor < 0 is the negative side). The ratings are read in
    chunks; np.add.at adds in rating order, so the sums are those of one np.bincount."""
    total = np.zeros(n_notes)
    acc = {
        f"{side}_{k}": np.zeros(n_notes) for side in ("neg", "pos") for k in ("count", "sum", "helpful", "nothelpful")
    }
    for sl in _chunks(len(ratings.rater)):
        fu = rater_factor[ratings.rater[sl]]
        has = ~np.isnan(fu)
        note = ratings.note[sl][has]
        value = np.asarray(ratings.value[sl][has], dtype=np.float64)
        neg = fu[has] < 0
        np.add.at(total, note, 1.0)
        for side, sel in (("neg", neg), ("pos", ~neg)):
            n_side, v_side = note[sel], value[sel]
            np.add.at(acc[f"{side}_count"], n_side, 1.0)
            np.add.at(acc[f"{side}_sum"], n_side, v_side)
            np.add.at(acc[f"{side}_helpful"], n_side[v_side == 1.0], 1.0)
            np.add.at(acc[f"{side}_nothelpful"], n_side[v_side == 0.0], 1.0)
    out: dict[str, np.ndarray] = {"total": total}
    for side in ("neg", "pos"):
        count = acc[f"{side}_count"]
        with np.errstate(invalid="ignore", divide="ignore"):
            out[f"{side}_mean"] = acc[f"{side}_sum"] / count
        out[f"{side}_count"] = count
        out[f"{side}_net"] = acc[f"{side}_helpful"] - acc[f"{side}_nothelpful"]
    out["min_side_count"] = np.minimum(out["neg_count"], out["pos_count"])
    out["net_min_helpful"] = np.clip(np.minimum(out["neg_net"], out["pos_net"]), 0, None)
    with np.errstate(invalid="ignore", divide="ignore"):
        out["net_min_helpful_ratio"] = np.where(out["total"] > 0, out["net_min_helpful"] / out["total"], 0.0)
    return out


def _incorrect_flags(
    ratings: Ratings,
    rater_factor: np.ndarray,
    note_factor: np.ndarray,
    n_raters: int,
    n_notes: int,
    cfg: ScoringConfig,
) -> np.ndarray:
    """Notes with ≥ min "incorrect" tags from ≥ min tagging raters whose factor is close to the
    note's, weighted by how rarely those raters use the tag (reference: INCORRECT_OUTLIER).
    Two chunked passes (rater rates, then notes); sums added in rating order."""
    if ratings.incorrect_tag is None or ratings.any_not_helpful_tag is None:
        return np.zeros(n_notes, dtype=bool)
    any_nh = np.asarray(ratings.any_not_helpful_tag, dtype=bool)
    inc = np.asarray(ratings.incorrect_tag, dtype=bool)
    rater_total = np.zeros(n_raters)
    rater_incorrect = np.zeros(n_raters)
    for sl in _chunks(len(any_nh)):
        tagged = any_nh[sl]
        u = ratings.rater[sl][tagged]
        np.add.at(rater_total, u, 1.0)
        np.add.at(rater_incorrect, u[inc[sl][tagged]], 1.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        rater_rate = np.where(rater_total > 0, rater_incorrect / rater_total, 0.0)
    clip = cfg.incorrect_factor_clip
    tags = np.zeros(n_notes)
    voters = np.zeros(n_notes, dtype=np.int64)
    rate_sum = np.zeros(n_notes)
    for sl in _chunks(len(any_nh)):
        tagged = any_nh[sl]
        u, n = ratings.rater[sl][tagged], ratings.note[sl][tagged]
        fu, fn = rater_factor[u], note_factor[n]
        near = (~np.isnan(fu)) & (~np.isnan(fn))
        near &= np.abs(np.clip(np.nan_to_num(fu), -clip, clip) - np.clip(np.nan_to_num(fn), -clip, clip)) < (
            cfg.incorrect_interval_half_width
        )
        u, n = u[near], n[near]
        np.add.at(tags, n, inc[sl][tagged][near].astype(np.float64))
        voters += np.bincount(n, minlength=n_notes)
        np.add.at(rate_sum, n, rater_rate[u])
    with np.errstate(invalid="ignore", divide="ignore"):
        weighted = tags / np.log1p(rate_sum)
    return (
        (tags >= cfg.incorrect_min_tags)
        & (voters >= cfg.incorrect_min_voters)
        & (np.nan_to_num(weighted, nan=0.0) >= cfg.incorrect_min_weighted)
    )


def compute_statuses(
    *,
    note_intercept: np.ndarray,
    note_factor: np.ndarray,
    num_ratings: np.ndarray,
    meta: NotesMeta,
    sides: dict[str, np.ndarray] | None,
    cfg: ScoringConfig,
    final_round: bool = True,
    incorrect: np.ndarray | None = None,
    now_ms: int | None = None,
    intercept_max: np.ndarray | None = None,
    tag_outliers: np.ndarray | None = None,
) -> np.ndarray:
    """Apply the status rules in order; the last matching rule wins. Returns internal codes."""
    status, _rules = apply_rules(
        note_intercept=note_intercept, note_factor=note_factor, num_ratings=num_ratings, meta=meta,
        sides=sides, cfg=cfg, final_round=final_round, incorrect=incorrect, now_ms=now_ms,
        intercept_max=intercept_max, tag_outliers=tag_outliers,
    )  # fmt: skip
    return status


def apply_rules(
    *,
    note_intercept: np.ndarray,
    note_factor: np.ndarray,
    num_ratings: np.ndarray,
    meta: NotesMeta,
    sides: dict[str, np.ndarray] | None,
    cfg: ScoringConfig,
    final_round: bool = True,
    incorrect: np.ndarray | None = None,
    now_ms: int | None = None,
    intercept_max: np.ndarray | None = None,
    tag_outliers: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """The status rules in the reference's order. Returns (internal status codes, bit mask of
    the RULES that matched each note); the last matching rule decided the status."""
    n_notes = meta.n_notes
    nm = meta.get("not_misleading", False, bool)
    status = np.full(n_notes, NEEDS_MORE_RATINGS, dtype=np.int8)
    rules = np.full(n_notes, RULE_BIT["InitialNMR"], dtype=np.uint32)

    def put(hit: np.ndarray, code: int, rule: str) -> None:
        status[hit] = code
        rules[hit] |= np.uint32(RULE_BIT[rule])

    with np.errstate(invalid="ignore"):
        enough = num_ratings >= cfg.min_ratings_for_status
        i, f = note_intercept, note_factor
        put(enough & (i >= cfg.crh_intercept) & ~nm, CURRENTLY_RATED_HELPFUL, "GeneralCRH")
        put(
            enough & (i <= cfg.crnh_intercept + cfg.crnh_factor_multiplier * np.abs(f)),
            CURRENTLY_RATED_NOT_HELPFUL,
            "GeneralCRNH",
        )
        if cfg.crnh_ucb_intercept is not None and intercept_max is not None:
            put(enough & (intercept_max < cfg.crnh_ucb_intercept), CURRENTLY_RATED_NOT_HELPFUL, "UcbCRNH")
        if final_round and cfg.ratio_rule and sides is not None:
            ratio = (
                enough
                & (sides["min_side_count"] >= cfg.ratio_min_side_count)
                & (sides["neg_mean"] <= cfg.ratio_max_side_mean + _EPS)
                & (sides["pos_mean"] <= cfg.ratio_max_side_mean + _EPS)
                & ((sides["neg_mean"] + sides["pos_mean"]) / 2 <= cfg.ratio_max_avg_side_mean + _EPS)
            )
            put(ratio, CURRENTLY_RATED_NOT_HELPFUL, "RatioCRNH")
        if cfg.crnh_not_misleading_intercept is not None:
            put(enough & nm & (i < cfg.crnh_not_misleading_intercept), CURRENTLY_RATED_NOT_HELPFUL, "NmCRNH")
        if not final_round:
            return status, rules
        previous = meta.get("previous_status", NO_STATUS, np.int64)
        rejected = FIRM_REJECT if cfg.firm_reject_intercept is not None else NEEDS_MORE_RATINGS
        if cfg.inertia:
            keep = (
                (status != CURRENTLY_RATED_HELPFUL)
                & enough
                & (i >= cfg.inertia_intercept)
                & (previous == CURRENTLY_RATED_HELPFUL)
                & ~nm
            )
            put(keep, CURRENTLY_RATED_HELPFUL, "GeneralCRHInertia")
        if cfg.tag_filter and tag_outliers is not None:
            put((tag_outliers != 0) & (status != CURRENTLY_RATED_NOT_HELPFUL), rejected, "TagOutlier")
        if cfg.incorrect_filter and incorrect is not None:
            put(incorrect & (status != CURRENTLY_RATED_NOT_HELPFUL), rejected, "IncorrectOutlier")
        if meta.low_diligence_intercept is not None:
            low = np.asarray(meta.low_diligence_intercept, dtype=np.float64) > cfg.low_diligence_intercept
            put(low & (status != CURRENTLY_RATED_NOT_HELPFUL), rejected, "LowDiligence")
        put((status == CURRENTLY_RATED_HELPFUL) & (np.abs(f) > cfg.crh_max_abs_factor), rejected, "LargeFactor")
        if cfg.firm_reject_intercept is not None:
            put((status != CURRENTLY_RATED_NOT_HELPFUL) & (i < cfg.firm_reject_intercept), FIRM_REJECT, "LowIntercept")
        if sides is not None and cfg.min_minority_net_helpful is not None:
            crh = status == CURRENTLY_RATED_HELPFUL
            put(crh & (sides["net_min_helpful"] < cfg.min_minority_net_helpful), NEEDS_YOUR_HELP, "MinMinorityRaters")
            if cfg.min_minority_net_helpful_ratio is not None:
                crh = status == CURRENTLY_RATED_HELPFUL
                put(
                    crh
                    & (sides["net_min_helpful"] >= cfg.min_minority_net_helpful)
                    & (sides["net_min_helpful"] < cfg.minority_ratio_upper)
                    & (sides["net_min_helpful_ratio"] < cfg.min_minority_net_helpful_ratio),
                    NEEDS_YOUR_HELP,
                    "RaterBalance",
                )
        if cfg.lock_after_days is not None and meta.locked_status is not None and now_ms is not None:
            locked = meta.get("locked_status", NO_STATUS, np.int64)
            created = meta.get("created_at_ms", now_ms, np.int64)
            lock = (locked != NO_STATUS) & (now_ms - created > cfg.lock_after_days * DAY_MS)
            status[lock] = locked[lock]
            rules[lock] |= np.uint32(RULE_BIT["Locked"])
    return status, rules


def tag_aggregates(
    ratings: Ratings,
    rater_factor: np.ndarray,
    note_factor: np.ndarray,
    n_notes: int,
    cfg: ScoringConfig,
) -> tuple[np.ndarray, np.ndarray]:
    """Per note and not-helpful tag: the weighted tag count and its share of the note's weight.

    Each rating weighs 1 / (1 + (d / d40)^5), d = |z(rater factor) - z(note factor)| with
    factors z-normalised over the raters / notes that have them and d40 the 40th percentile of
    d over the ratings: tags from raters near the note count most (reference tag filter).
    Returns (adjusted [n_notes, n_tags], ratio [n_notes, n_tags]), zero for unrated notes.
    The ratings are read in chunks (d twice: once for its percentile, once for the weights);
    np.add.at adds in rating order, so the sums are those of one np.bincount.
    """
    n_tags = len(NOT_HELPFUL_TAGS)
    adjusted = np.zeros((n_notes, n_tags))
    ratio = np.zeros((n_notes, n_tags))
    if ratings.not_helpful_tags is None:
        return adjusted, ratio

    def z(values: np.ndarray) -> tuple[float, float]:
        v = values[~np.isnan(values)]
        return (float(v.mean()), float(v.std()) or 1.0) if len(v) else (0.0, 1.0)

    (mu_u, sd_u), (mu_n, sd_n) = z(rater_factor), z(note_factor)

    def distances(sl: slice) -> tuple[np.ndarray, np.ndarray]:
        fu, fn = rater_factor[ratings.rater[sl]], note_factor[ratings.note[sl]]
        has = ~np.isnan(fu) & ~np.isnan(fn)
        return has, np.abs((fu[has] - mu_u) / sd_u - (fn[has] - mu_n) / sd_n)

    n = len(ratings.rater)
    parts = [distances(sl)[1] for sl in _chunks(n)]
    d_all = np.concatenate(parts) if parts else np.zeros(0)
    del parts
    if not len(d_all):
        return adjusted, ratio
    scale = float(np.percentile(d_all, cfg.tag_distance_percentile, overwrite_input=True)) or 1.0
    del d_all
    total = np.zeros(n_notes)
    bits_all = np.asarray(ratings.not_helpful_tags)
    for sl in _chunks(n):
        has, d = distances(sl)
        w = 1.0 / (1.0 + (d / scale) ** 5)
        note = ratings.note[sl][has]
        bits = bits_all[sl][has]
        np.add.at(total, note, w)
        present = int(np.bitwise_or.reduce(bits)) if len(bits) else 0
        for k in range(n_tags):
            if not present & (1 << k):
                continue  # nobody used this tag here: its column gains nothing
            sel = (bits & (1 << k)) != 0
            np.add.at(adjusted[:, k], note[sel], w[sel])  # a view: adds into adjusted
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = np.where(total[:, None] > 0, adjusted / total[:, None], 0.0)
    return adjusted, ratio


def tag_thresholds(ratio: np.ndarray, helpful: np.ndarray, cfg: ScoringConfig) -> np.ndarray:
    """Per tag: the percentile of the weighted tag share among the (preliminary) Helpful notes,
    taken from 100 quantile steps as the reference does; 0 when no note is Helpful."""
    if not helpful.any():
        return np.zeros(ratio.shape[1])
    steps = np.quantile(ratio[helpful], np.arange(0, 1, 0.01), axis=0)
    return np.asarray(steps[cfg.tag_filter_percentile])


def tag_outlier_mask(adjusted: np.ndarray, ratio: np.ndarray, thresholds: np.ndarray, cfg: ScoringConfig) -> np.ndarray:
    """uint16 bit mask per note of the tags over both limits (weighted count and share)."""
    hit = (adjusted > cfg.tag_min_adjusted_total) & (ratio > thresholds[None, :])
    hit[:, NOT_HELPFUL_TAGS.index(_TAG_FILTER_SKIPPED)] = False
    weights = np.array([1 << k for k in range(len(NOT_HELPFUL_TAGS))], dtype=np.uint32)
    return (hit.astype(np.uint32) @ weights).astype(np.uint16)


def _valid_ratings_mask(ratings: Ratings, meta: NotesMeta, prelim: np.ndarray, cfg: ScoringConfig) -> np.ndarray:
    """Ratings that count for rater reputation: binary, on notes rated Helpful/Not Helpful,
    made before the note's latest non-NMR status and within the public-data delay window.
    Computed chunk by chunk (temporaries of one chunk); returns one bool per rating."""
    n_all = len(ratings.note)
    valid = np.zeros(n_all, dtype=bool)
    has_times = ratings.created_at_ms is not None and meta.created_at_ms is not None
    created_all = meta.get("created_at_ms", 0, np.int64)
    last_all = meta.get("last_non_nmr_status_ms", -1, np.int64)
    t_all = np.asarray(ratings.created_at_ms, dtype=np.int64) if has_times else None
    for sl in _chunks(n_all):
        n = ratings.note[sl]
        v = ratings.value[sl]
        p = prelim[n]
        ok = ((p == CURRENTLY_RATED_HELPFUL) | (p == CURRENTLY_RATED_NOT_HELPFUL)) & ((v == 1.0) | (v == 0.0))
        if t_all is None:
            valid[sl] = ok
            continue
        t = t_all[sl]
        note_created = created_all[n]
        last_status = last_all[n]
        if cfg.valid_rating_window_ms is None:
            early = np.ones(len(t), dtype=bool)
        else:
            early = t - note_created < cfg.valid_rating_window_ms
        before_status = (last_status < 0) | (t < last_status)
        old = note_created < cfg.old_note_cutoff_ms
        valid[sl] = ~old & early & before_status & ok
    # Old notes: the first few early ratings (status history did not exist yet). Ranked among
    # all early ratings of the note (decided and binary or not), as the reference does.
    if t_all is not None:
        cand_all = [c for c in (_old_early(ratings, created_all, t_all, cfg, sl) for sl in _chunks(n_all)) if len(c)]
        if cand_all:
            cand = np.concatenate(cand_all)
            n = ratings.note[cand]
            order = cand[np.lexsort((t_all[cand], n))]
            notes_sorted = ratings.note[order]
            starts = np.r_[0, np.flatnonzero(np.diff(notes_sorted)) + 1]
            rank = np.arange(len(order)) - np.repeat(starts, np.diff(np.r_[starts, len(order)]))
            first = order[rank < cfg.old_note_max_valid_ratings]
            n_first, v_first = ratings.note[first], ratings.value[first]
            p = prelim[n_first]
            ok = ((p == CURRENTLY_RATED_HELPFUL) | (p == CURRENTLY_RATED_NOT_HELPFUL)) & (
                (v_first == 1.0) | (v_first == 0.0)
            )
            valid[first[ok]] = True
    return valid


def _old_early(ratings: Ratings, created: np.ndarray, t: np.ndarray, cfg: ScoringConfig, sl: slice) -> np.ndarray:
    """Indices (in all ratings) of one chunk's early ratings of notes older than status history."""
    note_created = created[ratings.note[sl]]
    early = (
        np.ones(sl.stop - sl.start, dtype=bool)
        if cfg.valid_rating_window_ms is None
        else t[sl] - note_created < cfg.valid_rating_window_ms
    )
    return np.flatnonzero((note_created < cfg.old_note_cutoff_ms) & early) + sl.start


def rater_reputation(
    ratings: Ratings,
    meta: NotesMeta,
    note_intercept: np.ndarray,
    prelim: np.ndarray,
    n_raters: int,
    cfg: ScoringConfig,
) -> np.ndarray:
    """Raters whose ratings agree with outcomes often enough and whose notes score well."""
    valid = _valid_ratings_mask(ratings, meta, prelim, cfg)
    count = np.zeros(n_raters, dtype=np.int64)
    agree = np.zeros(n_raters)  # counts of whole numbers: exact in any order
    for sl in _chunks(len(valid)):
        m = valid[sl]
        u, n, v = ratings.rater[sl][m], ratings.note[sl][m], ratings.value[sl][m]
        agrees = ((prelim[n] == CURRENTLY_RATED_HELPFUL) & (v == 1.0)) | (
            (prelim[n] == CURRENTLY_RATED_NOT_HELPFUL) & (v == 0.0)
        )
        count += np.bincount(u, minlength=n_raters)
        agree += np.bincount(u[agrees], minlength=n_raters)
    del valid
    with np.errstate(invalid="ignore", divide="ignore"):
        agree_ratio = agree / count
    ok_rater = agree_ratio >= cfg.min_rater_agree_ratio  # NaN (no valid ratings) fails
    author = meta.get("author", -1, np.int64)
    scored = (author >= 0) & ~np.isnan(note_intercept)
    a = author[scored]
    notes_by = np.bincount(a, minlength=n_raters).astype(float)
    crh = np.bincount(a, (prelim[scored] == CURRENTLY_RATED_HELPFUL).astype(float), n_raters)
    crnh = np.bincount(a, (prelim[scored] == CURRENTLY_RATED_NOT_HELPFUL).astype(float), n_raters)
    with np.errstate(invalid="ignore", divide="ignore"):
        # Share of Helpful minus multiplier × share of Not Helpful, in this order of operations:
        # (1/11)·5 rounds above 5/11, so an author with 5 Helpful and 1 Not Helpful note of 11
        # lands just below 0 and is dropped, as in the reference.
        diff = crh / notes_by - (crnh / notes_by) * cfg.author_crnh_multiplier
        mean_score = np.bincount(a, note_intercept[scored], n_raters) / notes_by
    ok_author = (notes_by == 0) | (
        (diff >= cfg.min_crh_crnh_ratio_difference) & (mean_score >= cfg.min_mean_note_score)
    )
    return ok_rater & ok_author


# ---------------------------------------------------------------- pipeline


def score(
    ratings: Ratings,
    meta: NotesMeta,
    n_raters: int,
    config: ScoringConfig | None = None,
    now_ms: int | None = None,
) -> ScoringResult:
    """Run the full core scoring pipeline; see the module docstring."""
    cfg = config or DEFAULT_CONFIG
    n_notes = meta.n_notes
    num_ratings = np.bincount(ratings.note, minlength=n_notes)
    train = filter_ratings(ratings.rater, ratings.note, n_raters, n_notes, cfg)
    diagnostics: dict[str, float] = {"phase1_ratings": float(train.sum())}
    empty = np.full(n_notes, np.nan)
    if not train.any():
        status, rules = apply_rules(
            note_intercept=empty, note_factor=empty, num_ratings=num_ratings, meta=meta,
            sides=None, cfg=cfg, now_ms=now_ms,
        )  # fmt: skip
        zeros = np.zeros(n_notes)
        explanation = NoteExplanation(
            rules, empty.copy(), empty.copy(), zeros, zeros.copy(), zeros.copy(),
            np.zeros(n_notes, dtype=np.uint16), np.zeros(n_notes, dtype=bool),
        )  # fmt: skip
        return ScoringResult(
            0.0, np.full(n_raters, np.nan), np.full(n_raters, np.nan), empty, empty.copy(),
            _display(status), status, num_ratings, np.zeros(n_raters, dtype=bool), diagnostics, explanation,
        )  # fmt: skip
    fit = _fit_subset(ratings, train, n_raters, n_notes, cfg)
    params, r_orig, n_orig = fit
    diagnostics["phase1_iterations"] = params.iterations
    helpful = np.ones(n_raters, dtype=bool)
    if cfg.reputation_filter:
        rf = _expand(params.rater_factor, r_orig, n_raters)
        prelim = compute_statuses(
            note_intercept=_expand(params.note_intercept, n_orig, n_notes),
            note_factor=_expand(params.note_factor, n_orig, n_notes),
            num_ratings=num_ratings, meta=meta, sides=_side_stats(ratings, rf, n_notes),
            cfg=cfg, final_round=False,
        )  # fmt: skip
        helpful = rater_reputation(
            ratings, meta, _expand(params.note_intercept, n_orig, n_notes), prelim, n_raters, cfg
        )
        second = train & helpful[ratings.rater]
        diagnostics["phase1b_ratings"] = float(second.sum())
        if second.any():
            params, r_orig, n_orig = _fit_subset(ratings, second, n_raters, n_notes, cfg, init=fit)
            diagnostics["phase1b_iterations"] = params.iterations
        train = second
    ratings_per_note = float(train.sum()) / max(len(n_orig), 1)
    thresholds = np.zeros(len(NOT_HELPFUL_TAGS))
    if cfg.tag_filter and ratings.not_helpful_tags is not None:
        # The reference takes the tag thresholds from the prescoring fit's preliminary statuses.
        pre_i = _expand(params.note_intercept, n_orig, n_notes)
        pre_f = _expand(params.note_factor, n_orig, n_notes)
        pre_rf = _expand(params.rater_factor, r_orig, n_raters)
        prelim = compute_statuses(
            note_intercept=pre_i, note_factor=pre_f, num_ratings=num_ratings, meta=meta,
            sides=None, cfg=cfg, final_round=False,
        )  # fmt: skip
        _adj, pre_ratio = tag_aggregates(ratings, pre_rf, pre_f, n_notes, cfg)
        scored = ~np.isnan(pre_i)
        thresholds = tag_thresholds(pre_ratio[scored], (prelim == CURRENTLY_RATED_HELPFUL)[scored], cfg)
    rater_intercept = _expand(params.rater_intercept, r_orig, n_raters)
    rater_factor = _expand(params.rater_factor, r_orig, n_raters)
    rater_intercept[~helpful] = np.nan
    rater_factor[~helpful] = np.nan
    # Phase 2: raters and μ fixed; each note on all its ratings from raters with parameters.
    final = (num_ratings[ratings.note] >= cfg.min_ratings_per_note) & ~np.isnan(rater_factor[ratings.rater])
    stats = _note_stats_of(ratings, final, rater_intercept, rater_factor, params.mu, n_notes)
    note_intercept, note_factor = _phase2_from_stats(stats, ratings_per_note, cfg)
    sides = _side_stats(ratings, rater_factor, n_notes)
    incorrect = (
        _incorrect_flags(ratings, rater_factor, note_factor, n_raters, n_notes, cfg)
        if cfg.incorrect_filter
        else np.zeros(n_notes, dtype=bool)
    )
    intercept_min, intercept_max = np.full(n_notes, np.nan), np.full(n_notes, np.nan)
    if cfg.crnh_ucb_intercept is not None:
        intercept_min, intercept_max = _bounds_from_stats(
            stats, params.mu, ratings_per_note, cfg, pseudo_raters(rater_intercept, rater_factor)
        )
    del stats
    tag_outliers = np.zeros(n_notes, dtype=np.uint16)
    if cfg.tag_filter and ratings.not_helpful_tags is not None:
        adjusted, ratio = tag_aggregates(ratings, rater_factor, note_factor, n_notes, cfg)
        tag_outliers = tag_outlier_mask(adjusted, ratio, thresholds, cfg)
    status, rules = apply_rules(
        note_intercept=note_intercept, note_factor=note_factor, num_ratings=num_ratings,
        meta=meta, sides=sides, cfg=cfg, incorrect=incorrect, now_ms=now_ms,
        intercept_max=intercept_max, tag_outliers=tag_outliers,
    )  # fmt: skip
    diagnostics["final_ratings"] = float(final.sum())
    diagnostics["ratings_per_note"] = ratings_per_note
    return ScoringResult(
        mu=params.mu,
        rater_intercept=rater_intercept,
        rater_factor=rater_factor,
        note_intercept=note_intercept,
        note_factor=note_factor,
        status=_display(status),
        internal_status=status,
        num_ratings=num_ratings,
        rater_helpful=helpful & ~np.isnan(rater_factor),
        diagnostics=diagnostics,
        explanation=NoteExplanation(
            rules=rules,
            intercept_min=intercept_min,
            intercept_max=intercept_max,
            neg_count=sides["neg_count"],
            pos_count=sides["pos_count"],
            net_min_helpful=sides["net_min_helpful"],
            tag_outliers=tag_outliers,
            incorrect=incorrect,
        ),
    )


def _note_stats(
    note: np.ndarray, rater_intercept: np.ndarray, rater_factor: np.ndarray, value: np.ndarray, mu: float, n_notes: int
) -> tuple[np.ndarray, ...]:
    x = rater_factor
    r = np.asarray(value, dtype=np.float64) - mu - rater_intercept
    count = np.bincount(note, minlength=n_notes).astype(float)
    return (
        count,
        np.bincount(note, x, n_notes),
        np.bincount(note, x * x, n_notes),
        np.bincount(note, r, n_notes),
        np.bincount(note, r * x, n_notes),
    )


def _note_stats_of(
    ratings: Ratings, mask: np.ndarray, rater_intercept: np.ndarray, rater_factor: np.ndarray, mu: float, n_notes: int
) -> tuple[np.ndarray, ...]:
    """_note_stats of ratings[mask] with the raters' parameters, read chunk by chunk (np.add.at
    adds in rating order: the same sums as one np.bincount, without per-rating float64 arrays)."""
    count, s_x, s_xx, s_r, s_rx = (np.zeros(n_notes) for _ in range(5))
    for sl in _chunks(len(mask)):
        m = mask[sl]
        note, u = ratings.note[sl][m], ratings.rater[sl][m]
        x = rater_factor[u]
        r = np.asarray(ratings.value[sl][m], dtype=np.float64) - mu - rater_intercept[u]
        np.add.at(count, note, 1.0)
        np.add.at(s_x, note, x)
        np.add.at(s_xx, note, x * x)
        np.add.at(s_r, note, r)
        np.add.at(s_rx, note, r * x)
    return count, s_x, s_xx, s_r, s_rx


def _phase2_from_stats(
    stats: tuple[np.ndarray, ...], ratings_per_note: float, cfg: ScoringConfig
) -> tuple[np.ndarray, np.ndarray]:
    count, s_x, s_xx, s_r, s_rx = stats
    a, f = _solve_2x2(
        count, s_x, s_xx, s_r, s_rx, cfg.lambda_intercept * ratings_per_note, cfg.lambda_factor * ratings_per_note
    )
    a[count == 0] = np.nan
    f[count == 0] = np.nan
    return a, f


def note_phase(
    note: np.ndarray,
    rater_intercept: np.ndarray,
    rater_factor: np.ndarray,
    value: np.ndarray,
    mu: float,
    ratings_per_note: float,
    n_notes: int,
    cfg: ScoringConfig,
) -> tuple[np.ndarray, np.ndarray]:
    """Phase 2 for all notes at once: per-note ridge with raters fixed. NaN if no ratings."""
    return _phase2_from_stats(
        _note_stats(note, rater_intercept, rater_factor, value, mu, n_notes), ratings_per_note, cfg
    )


def pseudo_raters(rater_intercept: np.ndarray, rater_factor: np.ndarray) -> list[tuple[float, float]]:
    """The reference's extreme raters: the lowest rater intercept with the lowest, zero and
    highest rater factor (the raters whose Helpful rating lifts a note's intercept most)."""
    ok = ~np.isnan(rater_intercept) & ~np.isnan(rater_factor)
    if not ok.any():
        return []
    low = float(rater_intercept[ok].min())
    return [(low, float(rater_factor[ok].min())), (low, 0.0), (low, float(rater_factor[ok].max()))]


def intercept_bounds(
    note: np.ndarray,
    rater_intercept: np.ndarray,
    rater_factor: np.ndarray,
    value: np.ndarray,
    mu: float,
    ratings_per_note: float,
    n_notes: int,
    cfg: ScoringConfig,
    extremes: list[tuple[float, float]],
) -> tuple[np.ndarray, np.ndarray]:
    """Lowest and highest note intercept over the phase-2 fit and its refits with one extra
    Helpful rating from each pseudo-rater (reference: pseudo-rater confidence bounds).

    The reference refits every note once per pseudo-rater with gradient descent; with raters
    and μ fixed a note's fit is a 2×2 ridge problem, and one extra rating only adds constants to
    its sufficient statistics, so each refit is one vectorised solve: exact and O(notes).
    """
    stats = _note_stats(note, rater_intercept, rater_factor, value, mu, n_notes)
    return _bounds_from_stats(stats, mu, ratings_per_note, cfg, extremes)


def _bounds_from_stats(
    stats: tuple[np.ndarray, ...],
    mu: float,
    ratings_per_note: float,
    cfg: ScoringConfig,
    extremes: list[tuple[float, float]],
) -> tuple[np.ndarray, np.ndarray]:
    count, s_x, s_xx, s_r, s_rx = stats
    reg_i, reg_f = cfg.lambda_intercept * ratings_per_note, cfg.lambda_factor * ratings_per_note
    base, _ = _solve_2x2(count, s_x, s_xx, s_r, s_rx, reg_i, reg_f)
    low, high = base.copy(), base.copy()
    for a_p, f_p in extremes:
        r_p = 1.0 - mu - a_p
        a, _ = _solve_2x2(count + 1, s_x + f_p, s_xx + f_p * f_p, s_r + r_p, s_rx + r_p * f_p, reg_i, reg_f)
        np.minimum(low, a, out=low)
        np.maximum(high, a, out=high)
    low[count == 0] = np.nan
    high[count == 0] = np.nan
    return low, high


def _display(status: np.ndarray) -> np.ndarray:
    shown = status.copy()
    shown[(status == FIRM_REJECT) | (status == NEEDS_YOUR_HELP)] = NEEDS_MORE_RATINGS
    return shown
