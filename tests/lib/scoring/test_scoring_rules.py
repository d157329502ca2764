"""The reference's remaining status rules (tag outliers, low diligence, confidence bound), each at
its boundary, the per-note record of which rules decided, and the explanation text per path."""

from __future__ import annotations

import numpy as np
import pytest

from crowdnotes_site.lib import status as names
from crowdnotes_site.lib.communitynotes import scoring as s
from crowdnotes_site.lib.communitynotes.scoring import explain as ex
from crowdnotes_site.lib.communitynotes.scoring import rules as status_rules

CFG = s.ScoringConfig()
HELPFUL_SIDES = {
    "min_side_count": np.array([5.0]),
    "neg_mean": np.array([0.9]),
    "pos_mean": np.array([0.9]),
    "net_min_helpful": np.array([10.0]),
    "net_min_helpful_ratio": np.array([0.5]),
}


def _rules(
    *,
    intercept: float = 0.5,
    factor: float = 0.0,
    num_ratings: int = 10,
    intercept_max: float | None = None,
    tag_outliers: int = 0,
    low_diligence: float | None = None,
    incorrect: bool = False,
    previous: int = s.NO_STATUS,
) -> tuple[int, list[str]]:
    meta = s.NotesMeta(
        1,
        previous_status=np.array([previous]),
        low_diligence_intercept=None if low_diligence is None else np.array([low_diligence]),
    )
    status, rules = s.apply_rules(
        note_intercept=np.array([intercept]),
        note_factor=np.array([factor]),
        num_ratings=np.array([num_ratings]),
        meta=meta,
        sides=HELPFUL_SIDES,
        cfg=CFG,
        incorrect=np.array([incorrect]),
        intercept_max=None if intercept_max is None else np.array([intercept_max]),
        tag_outliers=np.array([tag_outliers], dtype=np.uint16),
    )
    return int(status[0]), s.rule_names(int(rules[0]))


# ---------------------------------------------------------------- confidence bound (UCB CRNH)


def test_ucb_rule_needs_the_upper_bound_strictly_below_minus_0_04() -> None:
    # Intercept -0.03 with factor 0.5 is far above the diamond line (-0.45): only the bound decides.
    status, rules = _rules(intercept=-0.03, factor=0.5, intercept_max=-0.04)
    assert status == s.FIRM_REJECT and "UcbCRNH" not in rules
    status, rules = _rules(intercept=-0.03, factor=0.5, intercept_max=-0.0401)
    assert status == s.CURRENTLY_RATED_NOT_HELPFUL and rules[-1] == "UcbCRNH"
    # Fewer than 5 ratings: no Not Helpful, however low the bound (held back by the low intercept).
    status, rules = _rules(intercept=-0.5, intercept_max=-0.3, num_ratings=4)
    assert status == s.FIRM_REJECT and rules == ["InitialNMR", "LowIntercept"]


def test_intercept_bounds_equal_a_refit_with_each_pseudo_raters_helpful_rating() -> None:
    rng = np.random.default_rng(5)
    n = 40
    note = np.repeat(np.arange(4), n // 4)
    ri, rf = rng.normal(0, 0.2, n), rng.normal(0, 0.6, n)
    value = rng.choice([0.0, 0.5, 1.0], n)
    mu, rpn = 0.1, 7.0
    extremes = s.pseudo_raters(ri, rf)
    assert extremes == [(ri.min(), rf.min()), (ri.min(), 0.0), (ri.min(), rf.max())]
    low, high = s.intercept_bounds(note, ri, rf, value, mu, rpn, 4, CFG, extremes)
    for k in range(4):
        sel = note == k
        fits = [s.score_candidate(rater_intercept=ri[sel], rater_factor=rf[sel], value=value[sel], mu=mu,
                                  ratings_per_note=rpn)[0]]  # fmt: skip
        for a_p, f_p in extremes:
            refit = s.score_candidate(
                rater_intercept=np.r_[ri[sel], a_p], rater_factor=np.r_[rf[sel], f_p],
                value=np.r_[value[sel], 1.0], mu=mu, ratings_per_note=rpn,
            )  # fmt: skip
            fits.append(refit[0])
        assert high[k] == pytest.approx(max(fits), abs=1e-12)
        assert low[k] == pytest.approx(min(fits), abs=1e-12)
        assert high[k] > fits[0]  # one more Helpful rating can only lift the intercept


def test_a_note_everyone_rates_not_helpful_gets_the_ucb_rule_in_the_pipeline() -> None:
    rng = np.random.default_rng(1)
    n_raters, n_notes = 60, 30
    rater = np.repeat(np.arange(n_raters), n_notes)
    note = np.tile(np.arange(n_notes), n_raters)
    value = rng.choice([0.0, 0.5, 1.0], len(rater))
    value[note == 0] = 0.0
    result = s.score(s.Ratings(rater, note, value), s.NotesMeta(n_notes), n_raters)
    assert result.explanation is not None
    assert result.explanation.intercept_max[0] < CFG.crnh_ucb_intercept  # type: ignore[operator]
    assert result.explanation.intercept_max[0] >= result.note_intercept[0]
    assert result.status[0] == s.CURRENTLY_RATED_NOT_HELPFUL
    assert "UcbCRNH" in s.rule_names(int(result.explanation.rules[0]))


# ---------------------------------------------------------------- tag-outlier filter


def test_tag_outlier_needs_weighted_count_and_share_strictly_above_both_limits() -> None:
    k = s.NOT_HELPFUL_TAGS.index("notHelpfulIncorrect")
    adjusted = np.zeros((3, len(s.NOT_HELPFUL_TAGS)))
    ratio = np.zeros_like(adjusted)
    thresholds = np.full(len(s.NOT_HELPFUL_TAGS), 0.2)
    adjusted[:, k] = [2.5, 2.51, 2.51]
    ratio[:, k] = [0.9, 0.2, 0.2001]
    mask = s.tag_outlier_mask(adjusted, ratio, thresholds, CFG)
    assert mask.tolist() == [0, 0, s.TAG_BIT["notHelpfulIncorrect"]]
    # The reference never filters on "hard to understand".
    hard = s.NOT_HELPFUL_TAGS.index("notHelpfulHardToUnderstand")
    adjusted[:, hard], ratio[:, hard] = 9.0, 0.9
    assert s.tag_outlier_mask(adjusted, ratio, thresholds, CFG).tolist() == [0, 0, s.TAG_BIT["notHelpfulIncorrect"]]


def test_tag_weights_fall_off_past_the_40th_percentile_distance() -> None:
    # Notes 0..4 with factors spread out, raters at known factors; one tagged rating per note.
    rater_factor = np.array([-1.0, -0.2, 0.0, 0.3, 1.0])
    note_factor = np.array([-1.0, -0.5, 0.0, 0.5, 1.0])
    rater = np.array([0, 1, 2, 3, 4, 0, 4])
    note = np.array([0, 1, 2, 3, 4, 4, 0])
    tags = np.full(len(rater), s.TAG_BIT["notHelpfulOffTopic"], dtype=np.uint16)
    ratings = s.Ratings(rater, note, np.zeros(len(rater)), not_helpful_tags=tags)
    adjusted, ratio = s.tag_aggregates(ratings, rater_factor, note_factor, 5, CFG)
    zu = (rater_factor - rater_factor.mean()) / rater_factor.std()
    zn = (note_factor - note_factor.mean()) / note_factor.std()
    d = np.abs(zu[rater] - zn[note])
    d40 = np.percentile(d, 40)
    assert d40 > 0
    w = 1.0 / (1.0 + (d / d40) ** 5)
    k = s.NOT_HELPFUL_TAGS.index("notHelpfulOffTopic")
    assert adjusted[0, k] == pytest.approx(w[0] + w[6])
    assert adjusted[:, k].sum() == pytest.approx(w.sum())
    assert ratio[:, k] == pytest.approx(np.ones(5))  # every rating carries the tag
    # Raters on the far side count far less than raters next to the note.
    assert w[6] < 0.01 and w[0] > 0.8


def test_tag_thresholds_are_the_95th_quantile_step_among_helpful_notes() -> None:
    ratio = np.linspace(0, 0.99, 100)[:, None] * np.ones((1, len(s.NOT_HELPFUL_TAGS)))
    helpful = np.ones(100, dtype=bool)
    assert s.tag_thresholds(ratio, helpful, CFG)[0] == pytest.approx(0.95 * 0.99, rel=1e-6)
    assert s.tag_thresholds(ratio, np.zeros(100, dtype=bool), CFG).tolist() == [0.0] * len(s.NOT_HELPFUL_TAGS)


def test_tag_outliers_hold_back_helpful_notes_but_never_undo_not_helpful() -> None:
    status, rules = _rules(intercept=0.6, tag_outliers=s.TAG_BIT["notHelpfulIncorrect"])
    assert status == s.FIRM_REJECT and rules[-1] == "TagOutlier"
    status, rules = _rules(intercept=-0.6, tag_outliers=s.TAG_BIT["notHelpfulIncorrect"])
    assert status == s.CURRENTLY_RATED_NOT_HELPFUL and "TagOutlier" not in rules


def test_tag_filter_in_the_pipeline_holds_back_a_helpful_note_its_raters_tag() -> None:
    rng = np.random.default_rng(2)
    n_raters, n_notes = 80, 40
    rater = np.repeat(np.arange(n_raters), n_notes)
    note = np.tile(np.arange(n_notes), n_raters)
    value = rng.choice([0.0, 0.5, 1.0], len(rater), p=[0.2, 0.3, 0.5])
    value[note < 2] = 1.0  # notes 0 and 1: everyone finds them helpful
    tags = np.zeros(len(rater), dtype=np.uint16)
    tags[(note == 0) & (rater % 2 == 0)] = s.TAG_BIT["notHelpfulMissingKeyPoints"]
    plain = s.score(s.Ratings(rater, note, value), s.NotesMeta(n_notes), n_raters)
    tagged = s.score(s.Ratings(rater, note, value, not_helpful_tags=tags), s.NotesMeta(n_notes), n_raters)
    assert plain.internal_status[0] == s.CURRENTLY_RATED_HELPFUL
    assert tagged.internal_status[0] == s.FIRM_REJECT
    assert tagged.internal_status[1] == s.CURRENTLY_RATED_HELPFUL
    assert tagged.explanation is not None
    assert s.tag_names(int(tagged.explanation.tag_outliers[0])) == ["notHelpfulMissingKeyPoints"]


# ---------------------------------------------------------------- low diligence, incorrect


def test_low_diligence_holds_back_above_0_263_only() -> None:
    assert _rules(intercept=0.6, low_diligence=0.263)[0] == s.CURRENTLY_RATED_HELPFUL
    status, rules = _rules(intercept=0.6, low_diligence=0.2631)
    assert status == s.FIRM_REJECT and rules[-1] == "LowDiligence"
    assert _rules(intercept=-0.6, low_diligence=0.9)[0] == s.CURRENTLY_RATED_NOT_HELPFUL
    assert _rules(intercept=0.6, low_diligence=float("nan"))[0] == s.CURRENTLY_RATED_HELPFUL


def test_incorrect_filter_needs_two_tags_three_voters_and_weight_2_5() -> None:
    # Raters 0..4 rate note 0 with a not-helpful tag; their factors equal the note's (near).
    def flags(n_incorrect: int, n_voters: int, other_tags: int) -> bool:
        rater = list(range(n_voters))
        note = [0] * n_voters
        incorrect = [k < n_incorrect for k in range(n_voters)]
        for u in range(n_voters):  # each voter's other tagged ratings (non-incorrect) on note 1
            rater += [u] * other_tags
            note += [1] * other_tags
            incorrect += [False] * other_tags
        ratings = s.Ratings(
            np.array(rater), np.array(note), np.zeros(len(rater)),
            incorrect_tag=np.array(incorrect), any_not_helpful_tag=np.ones(len(rater), dtype=bool),
        )  # fmt: skip
        factors = np.zeros(n_voters)
        out = status_rules._incorrect_flags(ratings, factors, np.array([0.0, 5.0]), n_voters, 2, CFG)
        return bool(out[0])

    assert not flags(1, 5, 20)  # one tag
    assert not flags(2, 2, 20)  # two voters
    assert flags(2, 3, 20)
    # Weight: tags / ln(1 + Σ rater incorrect rates). Raters who always tag "incorrect" weigh less:
    # 2 / ln(1 + 2 * 1.0) = 1.82 < 2.5.
    assert not flags(2, 3, 0)


# ---------------------------------------------------------------- explanations


def _why(status: str, rules: list[str], **kw: object) -> str:
    return ex.explain(ex.NoteWhy(status=status, rules=tuple(rules), **kw))  # type: ignore[arg-type]


def test_each_status_path_has_its_own_explanation() -> None:
    h, nh, nmr = names.CURRENTLY_RATED_HELPFUL, names.CURRENTLY_RATED_NOT_HELPFUL, names.NEEDS_MORE_RATINGS
    assert _why(
        h, ["InitialNMR", "GeneralCRH"], num_ratings=12, intercept=0.43, factor=0.1, neg_count=6, pos_count=6
    ) == (
        "Currently Rated Helpful: intercept 0.43 ≥ 0.40 with raters on both sides agreeing (6 from raters on "
        "one side of the usual divide, 6 from the other; factor 0.10, within ±0.5)."
    )
    assert _why(nmr, ["InitialNMR"], num_ratings=3, neg_count=3, pos_count=0) == (
        "Needs More Ratings: 3 of 5 ratings, none yet from raters on the other side of the usual divide."
    )
    assert "none yet from raters with a scored rating history" in _why(nmr, ["InitialNMR"], num_ratings=2)
    text = _why(nh, ["InitialNMR", "GeneralCRNH"], num_ratings=9, intercept=-0.31, factor=0.2)
    assert "intercept −0.31 ≤ −0.21" in text
    text = _why(nh, ["InitialNMR", "UcbCRNH"], num_ratings=9, intercept=-0.1, factor=0.9, intercept_max=-0.07)
    assert "at most −0.07, below −0.04" in text
    assert "both sides mostly rated it not helpful" in _why(nh, ["InitialNMR", "RatioCRNH"], num_ratings=9)
    assert "not misleading" in _why(nh, ["InitialNMR", "NmCRNH"], num_ratings=9, intercept=-0.2)
    text = _why(nmr, ["InitialNMR", "GeneralCRH", "TagOutlier"], num_ratings=9, intercept=0.5,
                tag_outliers=("notHelpfulSourcesMissingOrUnreliable",))  # fmt: skip
    assert "“sources missing or unreliable”" in text and "held back" in text
    assert "“incorrect”" in _why(nmr, ["InitialNMR", "GeneralCRH", "IncorrectOutlier"], num_ratings=9, intercept=0.5)
    assert "low-diligence" in _why(nmr, ["InitialNMR", "GeneralCRH", "LowDiligence"], num_ratings=9, intercept=0.5)
    assert "mostly from one side (factor 0.70" in _why(
        nmr, ["InitialNMR", "GeneralCRH", "LargeFactor"], num_ratings=9, intercept=0.5, factor=0.7
    )
    text = _why(nmr, ["InitialNMR", "GeneralCRH", "MinMinorityRaters"], num_ratings=9, intercept=0.5,
                net_min_helpful=2)  # fmt: skip
    assert "only 2 more Helpful than Not Helpful ratings (needs 4)" in text
    text = _why(nmr, ["InitialNMR", "LowIntercept"], num_ratings=9, intercept=0.12, factor=0.0)
    assert "intercept 0.12 is between the Not Helpful line −0.05 and the 0.40 needed for Helpful" in text
    assert "already Helpful" in _why(h, ["InitialNMR", "GeneralCRHInertia"], num_ratings=9, intercept=0.395)
    assert "locked" in _why(h, ["InitialNMR", "GeneralCRH", "Locked"], num_ratings=9, intercept=0.5)


def test_explanations_from_a_scoring_run_name_the_rule_that_decided() -> None:
    status, rules = _rules(intercept=0.6, low_diligence=0.5)
    assert status == s.FIRM_REJECT
    why = ex.NoteWhy(status=names.NEEDS_MORE_RATINGS, rules=tuple(rules), num_ratings=10, intercept=0.6)
    assert s.deciding_rule(s.RULE_BIT["GeneralCRH"] | s.RULE_BIT["LowDiligence"]) == "LowDiligence"
    assert ex.explain(why).startswith("Needs More Ratings: its intercept is 0.60, but the low-diligence")
