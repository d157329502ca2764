"""Why a note has its status, in plain words (pure: no Django; NoteWhy holds plain Python values).

`explain()` turns one note's row of `scoring.NoteExplanation` (the rules that matched and the
quantities behind them) into one sentence. The deciding rule is the last one that matched
(`scoring.deciding_rule`); every number quoted is the note's own value or the threshold of the
`ScoringConfig` the scorer ran with.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np

from crowdnotes_site.lib import status as names
from crowdnotes_site.lib.communitynotes import scoring


@dataclass(frozen=True)
class NoteWhy:
    """One note's explanation inputs (plain Python values, as stored on the note)."""

    status: str  # displayed status name
    rules: tuple[str, ...]  # names from scoring.RULES that matched, in order
    num_ratings: int
    intercept: float | None = None
    factor: float | None = None
    intercept_max: float | None = None
    neg_count: int = 0
    pos_count: int = 0
    net_min_helpful: int = 0
    tag_outliers: tuple[str, ...] = ()


def why_rows(result: scoring.ScoringResult, indices: list[int] | None = None) -> list[NoteWhy]:
    """NoteWhy per note (all notes, or `indices`) from a scoring result."""
    ex = result.explanation
    assert ex is not None
    at = np.arange(len(result.status)) if indices is None else np.asarray(indices, dtype=np.int64)
    # Plain Python values in bulk (one .tolist() per column), and each distinct mask named once.
    status = [scoring.STATUS_NAMES[s] for s in result.status[at].tolist()]
    masks = ex.rules[at].tolist()
    rules = {m: tuple(scoring.rule_names(m)) for m in set(masks)}
    tag_masks = ex.tag_outliers[at].tolist()
    tags = {m: tuple(scoring.tag_names(m)) for m in set(tag_masks)}
    nan_none = [
        [None if v != v else v for v in values.tolist()]
        for values in (result.note_intercept[at], result.note_factor[at], ex.intercept_max[at])
    ]
    return [
        NoteWhy(
            status=st,
            rules=rules[m],
            num_ratings=n,
            intercept=i,
            factor=f,
            intercept_max=imax,
            neg_count=neg,
            pos_count=pos,
            net_min_helpful=net,
            tag_outliers=tags[t],
        )
        for st, m, n, i, f, imax, neg, pos, net, t in zip(
            status,
            masks,
            result.num_ratings[at].astype(np.int64).tolist(),
            *nan_none,
            ex.neg_count[at].astype(np.int64).tolist(),
            ex.pos_count[at].astype(np.int64).tolist(),
            ex.net_min_helpful[at].astype(np.int64).tolist(),
            tag_masks,
            strict=True,
        )
    ]


def _num(value: float) -> float | None:
    return None if math.isnan(value) else float(value)


def tag_words(tag: str) -> str:
    """notHelpfulSourcesMissingOrUnreliable -> "sources missing or unreliable"."""
    words = re.findall(r"[A-Z][a-z]*", tag.removeprefix("notHelpful"))
    return " ".join(w.lower() for w in words)


def _f(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}".replace("-", "−")


def _sides(why: NoteWhy) -> str:
    return f"{why.neg_count} from raters on one side of the usual divide, {why.pos_count} from the other"


def explain(why: NoteWhy, cfg: scoring.ScoringConfig | None = None) -> str:
    """One sentence: the status, the rule that decided it and its numbers."""
    cfg = cfg or scoring.DEFAULT_CONFIG
    label = names.LABELS.get(why.status, why.status)
    rule = why.rules[-1] if why.rules else "InitialNMR"
    i, f = why.intercept, why.factor
    crnh_line = None if f is None else cfg.crnh_intercept + cfg.crnh_factor_multiplier * abs(f)
    if rule == "Locked":
        return f"{label}: kept, because the note is older than {cfg.lock_after_days:g} days and its status is locked."
    if rule == "GeneralCRH":
        return (
            f"{label}: intercept {_f(i)} ≥ {cfg.crh_intercept:.2f} with raters on both sides agreeing "
            f"({_sides(why)}; factor {_f(f)}, within ±{cfg.crh_max_abs_factor:g})."
        )
    if rule == "GeneralCRHInertia":
        return (
            f"{label}: kept, because the note was already Helpful and its intercept {_f(i)} is still "
            f"≥ {cfg.inertia_intercept:.2f} ({_sides(why)})."
        )
    if rule == "GeneralCRNH":
        return (
            f"{label}: intercept {_f(i)} ≤ {_f(crnh_line)} (the Not Helpful line "
            f"{cfg.crnh_intercept:.2f} − {abs(cfg.crnh_factor_multiplier):g} × |factor {_f(f)}|)."
        )
    if rule == "UcbCRNH":
        return (
            f"{label}: even with one more Helpful rating from the most favourable possible rater, the "
            f"intercept would be at most {_f(why.intercept_max)}, below {_f(cfg.crnh_ucb_intercept)}."
        )
    if rule == "RatioCRNH":
        return (
            f"{label}: raters on both sides mostly rated it not helpful ({_sides(why)}; "
            f"each side's average rating ≤ {cfg.ratio_max_side_mean:g})."
        )
    if rule == "NmCRNH":
        return (
            f"{label}: the note says the post is not misleading and its intercept {_f(i)} is below "
            f"{_f(cfg.crnh_not_misleading_intercept)}."
        )
    held = f"{label}: its intercept is {_f(i)}, but"
    if rule == "TagOutlier":
        tags = ", ".join(f"“{tag_words(t)}”" for t in why.tag_outliers) or "a not-helpful reason"
        return (
            f"{held} raters close to the note tagged it {tags} far more often than usual for Helpful "
            f"notes (above the {cfg.tag_filter_percentile}th percentile), so it is held back."
        )
    if rule == "IncorrectOutlier":
        return f"{held} raters who usually agree with its supporters tagged it “incorrect”, so it is held back."
    if rule == "LowDiligence":
        return f"{held} the low-diligence model scores it above {cfg.low_diligence_intercept:g}, so it is held back."
    if rule == "LargeFactor":
        return (
            f"{held} its support comes mostly from one side (factor {_f(f)}, beyond "
            f"±{cfg.crh_max_abs_factor:g}), so it is not shown as Helpful."
        )
    if rule in ("MinMinorityRaters", "RaterBalance"):
        return (
            f"{label}: intercept {_f(i)} ≥ {cfg.crh_intercept:.2f}, but the less supportive side has only "
            f"{why.net_min_helpful} more Helpful than Not Helpful ratings (needs {cfg.min_minority_net_helpful}"
            f"{', and 5% of all ratings below 10' if rule == 'RaterBalance' else ''}); {_sides(why)}."
        )
    # InitialNMR / LowIntercept: nothing decided yet.
    if why.num_ratings < cfg.min_ratings_for_status or i is None:
        missing = ""
        if why.neg_count == 0 and why.pos_count == 0:
            missing = ", none yet from raters with a scored rating history"
        elif why.neg_count == 0 or why.pos_count == 0:
            missing = ", none yet from raters on the other side of the usual divide"
        return f"{label}: {why.num_ratings} of {cfg.min_ratings_for_status} ratings{missing}."
    return (
        f"{label}: intercept {_f(i)} is between the Not Helpful line {_f(crnh_line)} and the "
        f"{cfg.crh_intercept:.2f} needed for Helpful ({_sides(why)})."
    )


def explain_plain(why: NoteWhy, cfg: scoring.ScoringConfig | None = None) -> str:
    """The same reason without the model's numbers (for readers who do not see intercepts)."""
    cfg = cfg or scoring.DEFAULT_CONFIG
    label = names.LABELS.get(why.status, why.status)
    rule = why.rules[-1] if why.rules else "InitialNMR"
    if rule == "Locked":
        return f"{label}: kept, because the note is older than {cfg.lock_after_days:g} days and its status is locked."
    if rule == "GeneralCRH":
        return f"{label}: raters who usually disagree with each other both found it helpful."
    if rule == "GeneralCRHInertia":
        return f"{label}: it was already rated helpful and its support has held."
    if rule in ("GeneralCRNH", "RatioCRNH"):
        return f"{label}: raters across perspectives found it not helpful."
    if rule == "UcbCRNH":
        return f"{label}: raters found it not helpful, and one more helpful rating could not change that."
    if rule == "NmCRNH":
        return f"{label}: it says the post is not misleading, and raters did not find that helpful."
    if rule in ("TagOutlier", "IncorrectOutlier", "LowDiligence"):
        reason = {
            "TagOutlier": "raters flagged the same problem with it far more often than usual",
            "IncorrectOutlier": "raters who usually agree with its supporters flagged it as incorrect",
            "LowDiligence": "raters flagged its sources or accuracy often",
        }[rule]
        return f"{label}: held back because {reason}."
    if rule in ("LargeFactor", "MinMinorityRaters", "RaterBalance"):
        return f"{label}: its support so far comes mostly from raters on one side; it needs raters from the other side."
    if why.num_ratings < cfg.min_ratings_for_status or why.intercept is None:
        return explain(why, cfg)  # counts only, no model numbers
    return f"{label}: raters do not yet agree that it is helpful or not helpful."
