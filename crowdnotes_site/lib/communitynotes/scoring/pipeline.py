"""The scoring pipeline: `score` runs the filters, the fits (solver.py) and the status rules
(rules.py) in order, as the reference core scorer does (see bench/README.md):
1. filters (notes ≥5, raters ≥10, notes ≥5), phase-1 fit;
2. optional rater-reputation filter, then a warm-started refit on the kept raters;
3. phase 2: μ and raters fixed, each note solved alone with the note regularisation scaled
   by the ratings-per-note of step 2 (reference: λ·Σp² / (N / ratio));
4. status rules (last matching rule wins) and refinements.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from crowdnotes_site.lib.communitynotes.scoring.config import DEFAULT_CONFIG, ScoringConfig
from crowdnotes_site.lib.communitynotes.scoring.inputs import NOT_HELPFUL_TAGS, NotesMeta, Ratings, chunk_slices
from crowdnotes_site.lib.communitynotes.scoring.rules import (
    CURRENTLY_RATED_HELPFUL,
    CURRENTLY_RATED_NOT_HELPFUL,
    NoteExplanation,
    _display,
    _incorrect_flags,
    _side_stats,
    apply_rules,
    compute_statuses,
    tag_aggregates,
    tag_outlier_mask,
    tag_thresholds,
)
from crowdnotes_site.lib.communitynotes.scoring.solver import (
    _bounds_from_stats,
    _fit_subset,
    _note_stats_of,
    _phase2_from_stats,
    pseudo_raters,
)


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


def _expand(values: np.ndarray, where: np.ndarray, size: int) -> np.ndarray:
    out = np.full(size, np.nan)
    out[where] = values
    return out


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
    for sl in chunk_slices(n_all):
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
        cand_all = [
            c for c in (_old_early(ratings, created_all, t_all, cfg, sl) for sl in chunk_slices(n_all)) if len(c)
        ]
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
    for sl in chunk_slices(len(valid)):
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
