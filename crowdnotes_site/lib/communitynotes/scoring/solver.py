"""The matrix-factorization fits (pure numpy).

Model: r̂(u, n) = μ + i_u + i_n + f_u·f_n with one factor. The reference loss is
    mean((y - r̂)²) + λ_i·(mean(i_u²) + mean(i_n²) + μ²) + λ_f·(mean(f_u²) + mean(f_n²)).
Multiplying by the number of ratings N gives the equivalent sum-of-squares ridge form
    Σ(y - r̂)² + λ_i·N/U·Σi_u² + λ_f·N/U·Σf_u² + λ_i·N/M·Σi_n² + λ_f·N/M·Σf_n² + λ_i·N·μ²
(U raters, M notes in the training set), which we minimise by alternating exact 2x2 ridge
solves per rater and per note (vectorised with np.bincount) and a closed-form μ step.

Phase 1 fits raters and notes together (`fit_mf`, on a subset of the ratings: `_fit_subset`);
phase 2 keeps μ and the raters fixed and solves each note alone (`note_phase`, `score_candidate`),
with the pseudo-raters' refits for the confidence bounds (`intercept_bounds`).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import numpy as np

from crowdnotes_site.lib.communitynotes.scoring.config import DEFAULT_CONFIG, ScoringConfig
from crowdnotes_site.lib.communitynotes.scoring.inputs import Ratings, chunk_slices, index_array


@dataclass
class MFParams:
    mu: float
    rater_intercept: np.ndarray
    rater_factor: np.ndarray
    note_intercept: np.ndarray
    note_factor: np.ndarray
    iterations: int = 0


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
    rater, note = index_array(rater), index_array(note)

    def chunks() -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        for sl in chunk_slices(len(y)):
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


def _compact(idx: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Return (compact index per element, original index per compact id)."""
    present = np.zeros(size, dtype=bool)
    present[idx] = True
    originals = np.flatnonzero(present)
    remap = np.full(size, -1, dtype=np.int32)
    remap[originals] = np.arange(len(originals))
    return remap[idx], originals


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
    for sl in chunk_slices(len(mask)):
        m = mask[sl]
        present_r[ratings.rater[sl][m]] = True
        present_n[ratings.note[sl][m]] = True
    r_orig, n_orig = np.flatnonzero(present_r), np.flatnonzero(present_n)
    remap_r = np.full(n_raters, -1, dtype=np.int32)
    remap_r[r_orig] = np.arange(len(r_orig), dtype=np.int32)
    remap_n = np.full(n_notes, -1, dtype=np.int32)
    remap_n[n_orig] = np.arange(len(n_orig), dtype=np.int32)

    def chunks() -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        for sl in chunk_slices(len(mask)):
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
    for sl in chunk_slices(len(mask)):
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
