"""The Community Notes scorer (pure numpy, no Django): `score(ratings, meta, n_raters)`.

config.py (ScoringConfig), inputs.py (Ratings, NotesMeta, the tag bits), solver.py (the
matrix-factorization fits), rules.py (the status rules and each note's explanation), pipeline.py
(`score`: filters, phases, rules); explain.py turns a result into rows a person reads. The names
below are the package's public API; a caller imports `scoring` and uses `scoring.score`, etc.
"""

from __future__ import annotations

from crowdnotes_site.lib.communitynotes.scoring.config import DAY_MS, DEFAULT_CONFIG, ScoringConfig
from crowdnotes_site.lib.communitynotes.scoring.inputs import NOT_HELPFUL_TAGS, TAG_BIT, NotesMeta, Ratings, tag_names
from crowdnotes_site.lib.communitynotes.scoring.pipeline import ScoringResult, filter_ratings, rater_reputation, score
from crowdnotes_site.lib.communitynotes.scoring.rules import (
    CURRENTLY_RATED_HELPFUL,
    CURRENTLY_RATED_NOT_HELPFUL,
    FIRM_REJECT,
    NEEDS_MORE_RATINGS,
    NEEDS_YOUR_HELP,
    NO_STATUS,
    RULE_BIT,
    RULES,
    STATUS_NAMES,
    NoteExplanation,
    apply_rules,
    compute_statuses,
    deciding_rule,
    rule_names,
    tag_aggregates,
    tag_outlier_mask,
    tag_thresholds,
)
from crowdnotes_site.lib.communitynotes.scoring.solver import (
    MFParams,
    fit_mf,
    flip_for_identification,
    intercept_bounds,
    mf_loss,
    note_phase,
    pseudo_raters,
    score_candidate,
    stable_order,
)

__all__ = [
    "CURRENTLY_RATED_HELPFUL",
    "CURRENTLY_RATED_NOT_HELPFUL",
    "DAY_MS",
    "DEFAULT_CONFIG",
    "FIRM_REJECT",
    "NEEDS_MORE_RATINGS",
    "NEEDS_YOUR_HELP",
    "NOT_HELPFUL_TAGS",
    "NO_STATUS",
    "RULES",
    "RULE_BIT",
    "STATUS_NAMES",
    "TAG_BIT",
    "MFParams",
    "NoteExplanation",
    "NotesMeta",
    "Ratings",
    "ScoringConfig",
    "ScoringResult",
    "apply_rules",
    "compute_statuses",
    "deciding_rule",
    "filter_ratings",
    "fit_mf",
    "flip_for_identification",
    "intercept_bounds",
    "mf_loss",
    "note_phase",
    "pseudo_raters",
    "rater_reputation",
    "rule_names",
    "score",
    "score_candidate",
    "stable_order",
    "tag_aggregates",
    "tag_names",
    "tag_outlier_mask",
    "tag_thresholds",
]
