"""The status rules: the thresholds that give each note its status (the last matching rule wins),
the quantities they read (ratings by rater side, the incorrect-tag and tag-outlier filters), and
each note's explanation (the rules that matched, the quantities behind them)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from crowdnotes_site.lib import status as names
from crowdnotes_site.lib.communitynotes.scoring.config import DAY_MS, ScoringConfig
from crowdnotes_site.lib.communitynotes.scoring.inputs import NOT_HELPFUL_TAGS, NotesMeta, Ratings, chunk_slices

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

# The reference does not filter on this tag.
_TAG_FILTER_SKIPPED = "notHelpfulHardToUnderstand"
# Side means are ratios of small counts: (0.4 + 0.2) / 2 must count as 0.3, not 0.30000000000000004.
_EPS = 1e-9


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


def _side_stats(ratings: Ratings, rater_factor: np.ndarray, n_notes: int) -> dict[str, np.ndarray]:
    """Per-note counts by rater side (factor < 0 is the negative side). The ratings are read in
    chunks; np.add.at adds in rating order, so the sums are those of one np.bincount."""
    total = np.zeros(n_notes)
    acc = {
        f"{side}_{k}": np.zeros(n_notes) for side in ("neg", "pos") for k in ("count", "sum", "helpful", "nothelpful")
    }
    for sl in chunk_slices(len(ratings.rater)):
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
    for sl in chunk_slices(len(any_nh)):
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
    for sl in chunk_slices(len(any_nh)):
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
    parts = [distances(sl)[1] for sl in chunk_slices(n)]
    d_all = np.concatenate(parts) if parts else np.zeros(0)
    del parts
    if not len(d_all):
        return adjusted, ratio
    scale = float(np.percentile(d_all, cfg.tag_distance_percentile, overwrite_input=True)) or 1.0
    del d_all
    total = np.zeros(n_notes)
    bits_all = np.asarray(ratings.not_helpful_tags)
    for sl in chunk_slices(n):
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


def _display(status: np.ndarray) -> np.ndarray:
    shown = status.copy()
    shown[(status == FIRM_REJECT) | (status == NEEDS_YOUR_HELP)] = NEEDS_MORE_RATINGS
    return shown
