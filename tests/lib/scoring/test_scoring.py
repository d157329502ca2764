"""The pure scorer: solver optimum, recovery, filters, status rules at their boundaries."""

from __future__ import annotations

from dataclasses import replace
from itertools import pairwise

import numpy as np
import pytest
from scipy.optimize import minimize

from crowdnotes_site.lib.communitynotes import scoring as s
from crowdnotes_site.lib.communitynotes.data import synthetic
from crowdnotes_site.lib.communitynotes.scoring import pipeline, rules, solver

CFG = s.ScoringConfig()


@pytest.fixture(scope="module")
def data() -> synthetic.SyntheticData:
    return synthetic.generate(60_000, seed=3)


@pytest.fixture(scope="module")
def result(data: synthetic.SyntheticData) -> s.ScoringResult:
    meta = s.NotesMeta(
        data.n_notes,
        not_misleading=data.not_misleading,
        created_at_ms=data.note_created_at_ms,
        author=data.note_author,
    )
    return s.score(s.Ratings(data.rater, data.note, data.value, data.created_at_ms), meta, data.n_raters)


def _gradient(p: s.MFParams, u: np.ndarray, n: np.ndarray, y: np.ndarray, cfg: s.ScoringConfig) -> np.ndarray:
    """Analytic gradient of the reference (means) loss."""
    nr, nn, N = len(p.rater_intercept), len(p.note_intercept), len(y)
    e = -(2 / N) * (y - (p.mu + p.rater_intercept[u] + p.note_intercept[n] + p.rater_factor[u] * p.note_factor[n]))
    return np.concatenate(
        [
            [e.sum() + 2 * cfg.lambda_intercept * p.mu],
            np.bincount(u, e, nr) + 2 * cfg.lambda_intercept * p.rater_intercept / nr,
            np.bincount(u, e * p.note_factor[n], nr) + 2 * cfg.lambda_factor * p.rater_factor / nr,
            np.bincount(n, e, nn) + 2 * cfg.lambda_intercept * p.note_intercept / nn,
            np.bincount(n, e * p.rater_factor[u], nn) + 2 * cfg.lambda_factor * p.note_factor / nn,
        ]
    )


def test_it_reaches_a_stationary_point_of_the_reference_loss(data: synthetic.SyntheticData) -> None:
    keep = s.filter_ratings(data.rater, data.note, data.n_raters, data.n_notes, CFG)
    u, ur = solver._compact(data.rater[keep], data.n_raters)
    n, nr = solver._compact(data.note[keep], data.n_notes)
    y = data.value[keep]
    cfg = s.ScoringConfig(tol=1e-9, max_iter=5000)
    fit = s.fit_mf(u, n, y, len(ur), len(nr), cfg)
    grad = _gradient(fit, u, n, y, cfg)
    # Starting gradients are O(1/N_params); at the optimum they vanish.
    assert np.abs(grad).max() < 1e-8
    start = s.MFParams(0.0, np.zeros(len(ur)), np.full(len(ur), 0.1), np.zeros(len(nr)), np.full(len(nr), 0.1))
    assert np.abs(_gradient(start, u, n, y, cfg)).max() > 1e-5
    assert s.mf_loss(fit, u, n, y, cfg) < s.mf_loss(start, u, n, y, cfg)


def _training_set(data: synthetic.SyntheticData) -> tuple[np.ndarray, np.ndarray, np.ndarray, int, int]:
    keep = s.filter_ratings(data.rater, data.note, data.n_raters, data.n_notes, CFG)
    u, ur = solver._compact(data.rater[keep], data.n_raters)
    n, nr = solver._compact(data.note[keep], data.n_notes)
    return u, n, data.value[keep], len(ur), len(nr)


def test_over_relaxation_reaches_plain_alternation_optimum_in_fewer_sweeps(data: synthetic.SyntheticData) -> None:
    u, n, y, n_raters, n_notes = _training_set(data)
    plain = s.fit_mf(u, n, y, n_raters, n_notes, s.ScoringConfig(over_relaxation=1.0))
    relaxed = s.fit_mf(u, n, y, n_raters, n_notes, CFG)
    assert CFG.over_relaxation > 1.0
    assert relaxed.iterations < 0.7 * plain.iterations
    for field in ("rater_intercept", "rater_factor", "note_intercept", "note_factor"):
        assert np.abs(getattr(relaxed, field) - getattr(plain, field)).max() < 1e-5
    assert relaxed.mu == pytest.approx(plain.mu, abs=1e-6)


@pytest.mark.parametrize("omega", [1.0, 1.4, 1.9])
def test_every_sweep_lowers_the_loss(data: synthetic.SyntheticData, omega: float) -> None:
    # Each block problem is quadratic, so an over-relaxed block step with ω in (0, 2) and the
    # exact common shift of μ and the intercepts can only lower the loss.
    u, n, y, n_raters, n_notes = _training_set(data)
    cfg = s.ScoringConfig(over_relaxation=omega)
    losses = [
        s.mf_loss(s.fit_mf(u, n, y, n_raters, n_notes, replace(cfg, max_iter=k)), u, n, y, cfg) for k in range(1, 13)
    ]
    assert all(later <= earlier + 1e-12 for earlier, later in pairwise(losses))
    assert losses[-1] < losses[0]


@pytest.mark.parametrize("size", [1, 300, 65_536, 65_537, 2**31 - 1])
def test_stable_order_is_numpys_stable_argsort(size: int) -> None:
    idx = np.random.default_rng(size).integers(0, size, 50_000).astype(np.int32)
    idx[:3] = [0, size - 1, size - 1]
    assert np.array_equal(s.stable_order(idx), np.argsort(idx, kind="stable"))
    assert len(s.stable_order(np.zeros(0, dtype=np.int32))) == 0


def test_it_recovers_known_parameters(data: synthetic.SyntheticData, result: s.ScoringResult) -> None:
    scored = ~np.isnan(result.note_intercept)
    assert scored.sum() > 0.8 * data.n_notes
    corr_i = np.corrcoef(result.note_intercept[scored], data.true_note_intercept[scored])[0, 1]
    corr_f = np.corrcoef(result.note_factor[scored], data.true_note_factor[scored])[0, 1]
    assert corr_i > 0.8
    assert abs(corr_f) > 0.8
    raters = ~np.isnan(result.rater_factor)
    camp_agreement = np.mean(np.sign(result.rater_factor[raters]) == np.sign(data.true_rater_factor[raters]))
    assert max(camp_agreement, 1 - camp_agreement) > 0.95


def test_it_gives_most_raters_a_negative_factor(data: synthetic.SyntheticData) -> None:
    # Make the majority camp positive in the truth: the convention must flip it back.
    flipped = synthetic.generate(30_000, seed=5)
    flipped_value = flipped.value.copy()
    meta = s.NotesMeta(flipped.n_notes)
    for truth_sign in (1.0, -1.0):
        # Re-draw the ratings with the camps' signs swapped.
        latent = (
            0.2
            + flipped.true_rater_intercept[flipped.rater]
            + flipped.true_note_intercept[flipped.note]
            + truth_sign * flipped.true_rater_factor[flipped.rater] * flipped.true_note_factor[flipped.note]
        )
        flipped_value = np.where(latent > 0.65, 1.0, np.where(latent > 0.35, 0.5, 0.0))
        res = s.score(s.Ratings(flipped.rater, flipped.note, flipped_value), meta, flipped.n_raters)
        factors = res.rater_factor[~np.isnan(res.rater_factor)]
        assert (factors < 0).mean() >= 0.5


def test_it_scores_a_candidate_at_the_phase_two_optimum() -> None:
    rng = np.random.default_rng(1)
    ri, rf = rng.normal(0, 0.1, 12), rng.choice([-0.8, 0.7], 12)
    values = rng.choice([0.0, 0.5, 1.0], 12)
    mu, ratio = 0.15, 17.0
    a, f = s.score_candidate(rater_intercept=ri, rater_factor=rf, value=values, mu=mu, ratings_per_note=ratio)

    def loss(p: np.ndarray) -> float:
        # The reference's phase-2 loss: mean squared error + λ·Σp² / (N / ratio).
        pred = mu + ri + p[0] + rf * p[1]
        n = len(values)
        return float(
            np.mean((values - pred) ** 2)
            + (CFG.lambda_intercept * p[0] ** 2 + CFG.lambda_factor * p[1] ** 2) / (n / ratio)
        )

    best = minimize(loss, np.zeros(2), method="BFGS", options={"gtol": 1e-12}).x
    assert a == pytest.approx(best[0], abs=1e-6)
    assert f == pytest.approx(best[1], abs=1e-6)


def test_it_filters_notes_raters_notes_once() -> None:
    # Note 0: 5 ratings, one of them from rater 9 who has a single rating -> note drops to 4.
    rater = np.array([0, 1, 2, 3, 9] + [0, 1, 2, 3, 4] * 2 + [0, 1, 2, 3, 4] * 8)
    note = np.r_[[0] * 5, [1] * 5, [2] * 5, np.repeat(np.arange(3, 11), 5)]
    keep = s.filter_ratings(rater, note, 10, 11, CFG)
    assert not keep[note == 0].any()
    assert not keep[rater == 9].any()
    assert keep[note == 1].all()


def _statuses(**overrides: object) -> int:
    args: dict[str, object] = {
        "intercept": 0.0,
        "factor": 0.0,
        "num_ratings": 10,
        "not_misleading": False,
        "previous": s.NO_STATUS,
        "sides": None,
        "incorrect": False,
    }
    args.update(overrides)
    sides = args["sides"] or {
        "min_side_count": np.array([5.0]),
        "neg_mean": np.array([0.9]),
        "pos_mean": np.array([0.9]),
        "net_min_helpful": np.array([10.0]),
        "net_min_helpful_ratio": np.array([0.5]),
    }
    meta = s.NotesMeta(
        1, not_misleading=np.array([args["not_misleading"]]), previous_status=np.array([args["previous"]])
    )
    status = s.compute_statuses(
        note_intercept=np.array([args["intercept"]], dtype=float),
        note_factor=np.array([args["factor"]], dtype=float),
        num_ratings=np.array([args["num_ratings"]]),
        meta=meta,
        sides=sides,  # type: ignore[arg-type]
        cfg=CFG,
        incorrect=np.array([args["incorrect"]]),
    )
    return int(status[0])


def test_it_rates_helpful_at_the_intercept_threshold() -> None:
    assert _statuses(intercept=0.40) == s.CURRENTLY_RATED_HELPFUL
    assert _statuses(intercept=0.3999) == s.NEEDS_MORE_RATINGS


def test_it_requires_five_ratings_for_any_status() -> None:
    assert _statuses(intercept=0.6, num_ratings=4) != s.CURRENTLY_RATED_HELPFUL
    assert _statuses(intercept=-0.6, num_ratings=4) != s.CURRENTLY_RATED_NOT_HELPFUL
    assert _statuses(intercept=-0.6, num_ratings=4, not_misleading=True) != s.CURRENTLY_RATED_NOT_HELPFUL
    assert _statuses(intercept=0.6, num_ratings=5) == s.CURRENTLY_RATED_HELPFUL


def test_it_rejects_helpful_notes_with_a_large_factor() -> None:
    assert _statuses(intercept=0.5, factor=0.5) == s.CURRENTLY_RATED_HELPFUL
    assert _statuses(intercept=0.5, factor=-0.5001) == s.FIRM_REJECT


def test_it_never_rates_not_misleading_notes_helpful() -> None:
    assert _statuses(intercept=0.8, not_misleading=True) == s.NEEDS_MORE_RATINGS
    # ...and they become Not Helpful below -0.15.
    assert _statuses(intercept=-0.16, not_misleading=True) == s.CURRENTLY_RATED_NOT_HELPFUL


def test_it_rates_not_helpful_on_the_diamond_boundary() -> None:
    assert _statuses(intercept=-0.05 - 0.8 * 0.25, factor=0.25) == s.CURRENTLY_RATED_NOT_HELPFUL
    assert _statuses(intercept=-0.05 - 0.8 * 0.25 + 1e-4, factor=-0.25) == s.FIRM_REJECT  # below 0.3


def test_it_firm_rejects_low_intercepts() -> None:
    assert _statuses(intercept=0.2999) == s.FIRM_REJECT
    assert _statuses(intercept=0.30) == s.NEEDS_MORE_RATINGS


def _sides(neg_mean: float, pos_mean: float, min_count: float = 3, net: float = 10, ratio: float = 0.5) -> dict:
    return {
        "min_side_count": np.array([min_count]),
        "neg_mean": np.array([neg_mean]),
        "pos_mean": np.array([pos_mean]),
        "net_min_helpful": np.array([net]),
        "net_min_helpful_ratio": np.array([ratio]),
    }


def test_it_applies_the_ratio_rule() -> None:
    assert _statuses(intercept=0.35, sides=_sides(0.35, 0.25)) == s.CURRENTLY_RATED_NOT_HELPFUL  # average 0.3
    assert _statuses(intercept=0.35, sides=_sides(0.35, 0.2501)) == s.NEEDS_MORE_RATINGS
    assert _statuses(intercept=0.35, sides=_sides(0.4, 0.1)) == s.CURRENTLY_RATED_NOT_HELPFUL
    # 2/5 and 2/10 average exactly 0.3 (floating point says 0.30000000000000004).
    assert _statuses(intercept=0.35, sides=_sides(2 / 5, 2 / 10)) == s.CURRENTLY_RATED_NOT_HELPFUL
    assert _statuses(intercept=0.35, sides=_sides(0.41, 0.1)) == s.NEEDS_MORE_RATINGS
    assert _statuses(intercept=0.35, sides=_sides(0.1, 0.1, min_count=2)) == s.NEEDS_MORE_RATINGS


def test_it_requires_minority_support_for_helpful() -> None:
    assert _statuses(intercept=0.5, sides=_sides(0.9, 0.9, net=3.0, ratio=0.5)) == s.NEEDS_YOUR_HELP
    assert _statuses(intercept=0.5, sides=_sides(0.9, 0.9, net=4.0, ratio=0.05)) == s.CURRENTLY_RATED_HELPFUL
    assert _statuses(intercept=0.5, sides=_sides(0.9, 0.9, net=4.0, ratio=0.049)) == s.NEEDS_YOUR_HELP
    assert _statuses(intercept=0.5, sides=_sides(0.9, 0.9, net=10.0, ratio=0.01)) == s.CURRENTLY_RATED_HELPFUL


def test_it_keeps_helpful_notes_down_to_the_inertia_threshold() -> None:
    assert _statuses(intercept=0.39, previous=s.CURRENTLY_RATED_HELPFUL) == s.CURRENTLY_RATED_HELPFUL
    assert _statuses(intercept=0.39, previous=s.NEEDS_MORE_RATINGS) == s.NEEDS_MORE_RATINGS
    assert _statuses(intercept=0.3899, previous=s.CURRENTLY_RATED_HELPFUL) == s.NEEDS_MORE_RATINGS


def test_it_blocks_helpful_when_raters_flag_incorrect() -> None:
    assert _statuses(intercept=0.6, incorrect=True) == s.FIRM_REJECT
    assert _statuses(intercept=-0.6, incorrect=True) == s.CURRENTLY_RATED_NOT_HELPFUL


def test_it_counts_incorrect_tags_from_nearby_raters() -> None:
    # Raters 0-3 tag note 0; raters 0 and 1 also tag 9 other ratings on note 1 without "incorrect",
    # so their "incorrect" is informative (rare for them).
    rater = np.array([0, 1, 2, 3] + [0] * 9 + [1] * 9)
    note = np.array([0, 0, 0, 0] + [1] * 18)
    incorrect = np.array([1, 1, 0, 1] + [0] * 18, dtype=bool)
    ratings = s.Ratings(rater, note, np.zeros(len(rater)), incorrect_tag=incorrect,
                        any_not_helpful_tag=np.ones(len(rater), dtype=bool))  # fmt: skip
    notes_f = np.array([0.0, 5.0])
    near = rules._incorrect_flags(ratings, np.array([0.1, 0.0, -0.1, 0.9]), notes_f, 4, 2, CFG)
    assert near[0]  # 2 incorrect tags among 3 nearby voters
    far = rules._incorrect_flags(ratings, np.array([0.1, 0.9, -0.1, 0.9]), notes_f, 4, 2, CFG)
    assert not far[0]  # only 1 incorrect tag from a rater near the note's factor
    habitual = s.Ratings(np.arange(4), np.zeros(4, dtype=int), np.zeros(4), incorrect_tag=incorrect[:4],
                         any_not_helpful_tag=np.ones(4, dtype=bool))  # fmt: skip
    # Raters who always tag "incorrect" carry less weight: 2 / log(1 + 2) < 2.5.
    assert not rules._incorrect_flags(habitual, np.array([0.1, 0.0, -0.1, 0.9]), notes_f[:1], 4, 1, CFG)[0]


def test_it_locks_statuses_after_fourteen_days() -> None:
    day = s.DAY_MS
    meta = s.NotesMeta(
        2, created_at_ms=np.array([0, 10 * day]), locked_status=np.array([s.CURRENTLY_RATED_HELPFUL] * 2)
    )
    status = s.compute_statuses(
        note_intercept=np.array([0.0, 0.0]), note_factor=np.zeros(2), num_ratings=np.array([9, 9]),
        meta=meta, sides=None, cfg=CFG, now_ms=20 * day,
    )  # fmt: skip
    assert status.tolist() == [s.CURRENTLY_RATED_HELPFUL, s.FIRM_REJECT]


def test_it_drops_raters_who_disagree_with_outcomes() -> None:
    # Note 0 Helpful, note 1 Not Helpful; rater 0 agrees with both, rater 1 with neither.
    ratings = s.Ratings(np.array([0, 0, 1, 1]), np.array([0, 1, 0, 1]), np.array([1.0, 0.0, 0.0, 1.0]))
    meta = s.NotesMeta(2, author=np.array([-1, -1]))
    prelim = np.array([s.CURRENTLY_RATED_HELPFUL, s.CURRENTLY_RATED_NOT_HELPFUL])
    helpful = s.rater_reputation(ratings, meta, np.array([0.5, -0.3]), prelim, 3, CFG)
    # Rater 2 has no valid ratings: the reference drops such raters too.
    assert helpful.tolist() == [True, False, False]


def test_it_drops_authors_of_not_helpful_notes() -> None:
    ratings = s.Ratings(np.array([0, 0]), np.array([0, 1]), np.array([1.0, 0.0]))
    prelim = np.array([s.CURRENTLY_RATED_HELPFUL, s.CURRENTLY_RATED_NOT_HELPFUL])
    meta = s.NotesMeta(2, author=np.array([0, 0]))
    helpful = s.rater_reputation(ratings, meta, np.array([0.5, -0.3]), prelim, 1, CFG)
    assert helpful.tolist() == [False]  # CRH ratio 0.5 - 5 * CRNH ratio 0.5 < 0


def _author_check(helpful_notes: int, not_helpful_notes: int, other_notes: int, intercept: float) -> bool:
    """Rater 0 agrees with every outcome and wrote notes with these preliminary statuses
    (all with the given phase-1 intercept); does rater 0 pass the reputation filter?"""
    prelim = np.array(
        [s.CURRENTLY_RATED_HELPFUL] * helpful_notes
        + [s.CURRENTLY_RATED_NOT_HELPFUL] * not_helpful_notes
        + [s.NEEDS_MORE_RATINGS] * other_notes
    )
    n = len(prelim)
    # Rater 0 rates note 0 (Helpful) helpful; rater 1 (not an author) does the same.
    ratings = s.Ratings(np.array([0, 1]), np.array([0, 0]), np.array([1.0, 1.0]))
    meta = s.NotesMeta(n, author=np.zeros(n, dtype=np.int64))
    helpful = s.rater_reputation(ratings, meta, np.full(n, intercept), prelim, 2, CFG)
    assert bool(helpful[1])  # a rater who wrote nothing is judged on ratings only
    return bool(helpful[0])


@pytest.mark.parametrize(
    ("helpful_notes", "not_helpful_notes", "other_notes", "kept"),
    [
        (5, 1, 4, True),  # 5/10 - (1/10)*5 == 0.0: at the threshold, kept
        (5, 1, 5, False),  # 5/11 - (1/11)*5 == -5.6e-17 in floating point: dropped, as the reference
        (5, 1, 6, True),  # 5/12 - (1/12)*5 == 0.0
        (6, 1, 4, True),  # 6/11 - 5/11 > 0
        (1, 0, 0, True),
    ],
)
def test_author_check_helpful_minus_five_times_not_helpful_share_at_zero(
    helpful_notes: int, not_helpful_notes: int, other_notes: int, kept: bool
) -> None:
    assert _author_check(helpful_notes, not_helpful_notes, other_notes, 0.5) is kept


@pytest.mark.parametrize(("intercept", "kept"), [(0.05, True), (np.nextafter(0.05, 0.0), False), (0.2, True)])
def test_author_check_mean_note_intercept_at_the_minimum(intercept: float, kept: bool) -> None:
    assert _author_check(1, 0, 1, intercept) is kept


def test_author_check_ignores_notes_without_a_phase_one_intercept() -> None:
    # Rater 0 wrote note 0 (Helpful, scored) and note 1 (Not Helpful, but unscored: NaN
    # intercept, as for a note with too few ratings). Only the scored note counts.
    prelim = np.array([s.CURRENTLY_RATED_HELPFUL, s.CURRENTLY_RATED_NOT_HELPFUL])
    ratings = s.Ratings(np.array([0]), np.array([0]), np.array([1.0]))
    meta = s.NotesMeta(2, author=np.array([0, 0]))
    helpful = s.rater_reputation(ratings, meta, np.array([0.5, np.nan]), prelim, 1, CFG)
    assert helpful.tolist() == [True]
    both_scored = s.rater_reputation(ratings, meta, np.array([0.5, -0.3]), prelim, 1, CFG)
    assert both_scored.tolist() == [False]


def test_it_leaves_notes_without_enough_ratings_unscored(
    data: synthetic.SyntheticData, result: s.ScoringResult
) -> None:
    # An extra note rated Helpful by four active raters: too few ratings for any status.
    active = np.flatnonzero(result.rater_helpful)[:4]
    ratings = s.Ratings(np.r_[data.rater, active], np.r_[data.note, [data.n_notes] * 4], np.r_[data.value, np.ones(4)])
    res = s.score(ratings, s.NotesMeta(data.n_notes + 1), data.n_raters)
    assert res.num_ratings[-1] == 4
    assert np.isnan(res.note_intercept[-1])
    assert res.status[-1] == s.NEEDS_MORE_RATINGS
    assert set(np.unique(result.status)) <= {0, 1, 2}
    assert (result.status == s.CURRENTLY_RATED_HELPFUL).any()
    assert (result.status == s.CURRENTLY_RATED_NOT_HELPFUL).any()


def test_it_scores_without_the_refinements(data: synthetic.SyntheticData) -> None:
    cfg = s.ScoringConfig(reputation_filter=False, inertia=False, incorrect_filter=False, lock_after_days=None)
    res = s.score(s.Ratings(data.rater, data.note, data.value), s.NotesMeta(data.n_notes), data.n_raters, cfg)
    # Without the reputation filter every rater who passed the count filter keeps parameters.
    counts = np.bincount(data.rater, minlength=data.n_raters)
    assert (~np.isnan(res.rater_factor)).sum() >= (counts >= 10).sum() * 0.9
    assert res.diagnostics["final_ratings"] > 0


def test_it_can_drop_the_valid_rating_window() -> None:
    day = s.DAY_MS
    created = 1_700_000_000_000
    ratings = s.Ratings(
        np.array([0, 1]), np.array([0, 0]), np.array([1.0, 1.0]), np.array([created + day, created + 5 * day])
    )
    meta = s.NotesMeta(1, created_at_ms=np.array([created]))
    prelim = np.array([s.CURRENTLY_RATED_HELPFUL])
    assert pipeline._valid_ratings_mask(ratings, meta, prelim, CFG).tolist() == [True, False]
    no_window = s.ScoringConfig(valid_rating_window_ms=None)
    assert pipeline._valid_ratings_mask(ratings, meta, prelim, no_window).tolist() == [True, True]
    # Ratings made after the note's latest non-NMR status never count.
    meta.last_non_nmr_status_ms = np.array([created + 2 * day])
    assert pipeline._valid_ratings_mask(ratings, meta, prelim, no_window).tolist() == [True, False]


def test_ratings_keep_indices_as_int32_and_refuse_what_does_not_fit() -> None:
    r = s.Ratings(rater=np.array([0, 5], dtype=np.int64), note=np.array([1, 2]), value=np.array([1.0, 0.0]))
    assert r.rater.dtype == np.int32 and r.note.dtype == np.int32
    assert r.rater.tolist() == [0, 5] and r.note.tolist() == [1, 2]
    with pytest.raises(ValueError, match="int32"):
        s.Ratings(rater=np.array([2**31]), note=np.array([0]), value=np.array([1.0]))
