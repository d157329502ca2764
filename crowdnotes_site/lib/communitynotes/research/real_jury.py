"""The Supernote jury on real posts (pure: no Django; scikit-learn imported lazily): on the real
Community Notes folder's posts with a truth (`data.real.posts_with_truth`), does the jury pick the
note the crowd rated best, on posts it never saw?

What the jury is made of, every part fitted only from the training posts of a fold:
- the note *prior*: a pairwise logistic ranker over note features (`note_features`), fitted on
  within-post preferences of the training posts (each best note against each other note), or the
  rule "a note with a link, then the longest"; which of them (and the ranker's C) is chosen by
  nested cross-validation inside the training posts (`choose_prior`), never on evaluated posts;
- the raters: the project's scorer fitted on the 2021 ratings of notes NOT in held-out posts gives
  the jurors' intercepts and factors and μ; the training notes' fitted factors teach a ridge that
  predicts a candidate's factor from its features; the prior is put on the intercept scale by a
  line fitted on training notes that have a fitted intercept;
- each juror's P(Helpful) = sigmoid(a + b·(μ + rater intercept + prior intercept + rater factor ·
  predicted factor)), a and b fitted on the training ratings (Helpful against Not Helpful): the
  scorer's own model with a link that keeps it a probability. Ratings are drawn from it and
  `jury.jury_scores` projects them onto the scorer's intercept; the pick is the highest intercept.

The truth of a held-out post (its notes' statuses and reference intercepts) and its notes' ratings
are never read while fitting: `train_model` takes only the training posts' truths, the ratings of
notes outside the held-out posts, and those notes' features; `run_seed(held_out_edit=...)` lets a
test change everything of the held-out posts and check that no pick moves.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from crowdnotes_site.lib.communitynotes import scoring
from crowdnotes_site.lib.communitynotes.data import ratings as cnr
from crowdnotes_site.lib.communitynotes.data import real
from crowdnotes_site.lib.communitynotes.research import jury_sample as js
from crowdnotes_site.lib.communitynotes.supernotes import comparison, evaluation, jury, phm
from crowdnotes_site.lib.communitynotes.supernotes import features as nf

NOT_MISLEADING = "NOT_MISLEADING"
BASE_GROUPS = ("sources", "text", "classification")
EXTRA_FEATURES = ("urls_0", "urls_1", "urls_2", "urls_3_plus", "not_misleading", "lang_pt", "has_post_text")
RULE_FEATURE = "url_then_longest_pick"
FEATURES = (*nf.feature_names(BASE_GROUPS), *EXTRA_FEATURES)
RULE = "url_then_longest"
# The priors nested CV chooses between: the rule first, so a ranker must beat it to be chosen.
PRIORS: tuple[tuple[str, float], ...] = (
    ("rule", 0.0),
    ("ranker", 0.1),
    ("ranker", 1.0),
    ("ranker_rule", 0.1),
    ("ranker_rule", 1.0),
)
PRIOR_NAMES = {
    "rule": "the rule 'a note with a link, then the longest' as the prior",
    "ranker": "pairwise logistic ranker over the note features",
    "ranker_rule": "pairwise logistic ranker over the note features and the rule's pick",
}
RULE_SCALE = 1e6
INNER_FOLDS = 4
BOOTSTRAP = 10_000
RATINGS_YEARS = "2021"
LATEST_FILE = "LATEST"
MODEL_FILE = "model.joblib"
META_FILE = "meta.json"
EVALUATION_FILE = "evaluation.json"  # in the model directory: `evaluate_jury --real --store`
BINARY = "ratings drawn Helpful or Not Helpful"


# --- notes as features --------------------------------------------------------------------------


@dataclass(frozen=True)
class Candidate:
    """A note as the jury sees it: what a caller of `jury_pick` can give (no status, no intercept)."""

    note_id: str
    summary: str
    created_at_ms: int
    classification: str
    lang: str


def candidate(note: real.RealNote) -> Candidate:
    return Candidate(note.note_id, note.summary, note.created_at_ms, note.classification, note.lang)


def note_features(notes: Sequence[Candidate], post_text: str = "") -> np.ndarray:
    """(N, F) features of one post's notes: the feature groups sources/text/classification, the
    number of links in bins, NOT_MISLEADING, Portuguese, whether the post's text is known, and
    (last column, `RULE_FEATURE`) whether the note is the rule's pick among the post's notes."""
    inputs = [nf.NoteInput(n.summary, n.classification, None) for n in notes]
    base = nf.matrix(inputs, BASE_GROUPS).astype(float)
    urls = np.array([len(nf.note_links(i)) for i in inputs], dtype=float)
    extra = np.column_stack([
        urls == 0, urls == 1, urls == 2, urls >= 3,
        [n.classification == NOT_MISLEADING for n in notes],
        [n.lang.lower().startswith("pt") for n in notes],
        np.full(len(notes), bool(post_text)),
    ]).astype(float)  # fmt: skip
    rule = rule_score(notes)
    pick = (rule == rule.max()).astype(float) if len(notes) else np.zeros(0)
    return np.column_stack([base, extra, pick])


def rule_score(notes: Sequence[Candidate]) -> np.ndarray:
    """The rule 'a note with a link, then the longest' (`jury_sample.rule_scores`'s url_then_longest)."""
    sample = js.Posts(
        note_ids=list(range(len(notes))), notes=[nf.NoteInput(n.summary, n.classification) for n in notes],
        created_ms=np.array([n.created_at_ms for n in notes], dtype=np.int64), truth={}, posts=[], embedder="none",
    )  # fmt: skip
    return js.rule_scores(sample, RULE, np.arange(len(notes)))


def hit(scores: np.ndarray, best: Sequence[int]) -> float:
    """`jury_sample.expected_hit` for several best notes (a status truth can have several Helpful
    ones): with k notes tied for the highest score, the share of them that are best."""
    top = np.flatnonzero(scores == scores.max())
    return float(np.isin(top, np.asarray(best)).sum()) / len(top)


# --- the prior ----------------------------------------------------------------------------------


@dataclass
class Prior:
    """A note prior: `score(features)` per note of one post (higher: more likely the crowd's best)."""

    kind: str
    c: float
    mean: np.ndarray
    scale: np.ndarray
    weights: np.ndarray  # over the standardised columns the kind uses

    def columns(self, x: np.ndarray) -> np.ndarray:
        return x if self.kind == "ranker_rule" else x[:, : len(FEATURES)]

    def score(self, x: np.ndarray, rule: np.ndarray) -> np.ndarray:
        if self.kind == "rule":
            # The rule's order as a prior: a link first, then the longest (log length keeps the scale small).
            return (rule >= RULE_SCALE).astype(float) + 0.1 * np.log1p(rule % RULE_SCALE)
        z = (self.columns(x) - self.mean) / self.scale
        return np.asarray(z @ self.weights, dtype=float)

    def describe(self) -> str:
        return PRIOR_NAMES[self.kind] + ("" if self.kind == "rule" else f" (C={self.c:g})")


@dataclass(frozen=True)
class TrainPost:
    """A training post: its notes' features, the rule's scores and the crowd's best notes."""

    x: np.ndarray
    rule: np.ndarray
    best: tuple[int, ...]


def fit_prior(posts: Sequence[TrainPost], kind: str, c: float) -> Prior:
    """Fit the pairwise logistic ranker on within-post preferences (best note minus each other
    note, and the reverse), standardised on the training notes; 'rule' needs no fit."""
    width = len(FEATURES) + (1 if kind == "ranker_rule" else 0)
    if kind == "rule":
        return Prior(kind, c, np.zeros(width), np.ones(width), np.zeros(width))
    x_all = np.concatenate([p.x[:, :width] for p in posts])
    mean, scale = x_all.mean(axis=0), x_all.std(axis=0)
    scale[scale == 0] = 1.0
    diffs = []
    for p in posts:
        z = (p.x[:, :width] - mean) / scale
        others = [j for j in range(len(z)) if j not in p.best]
        diffs += [z[i] - z[j] for i in p.best for j in others]
    if not diffs:
        return Prior(kind, c, mean, scale, np.zeros(width))
    d = np.array(diffs)
    from sklearn.linear_model import LogisticRegression  # deferred: only fitting needs scikit-learn

    model = LogisticRegression(C=c, fit_intercept=False, max_iter=1000)
    model.fit(np.concatenate([d, -d]), np.r_[np.ones(len(d)), np.zeros(len(d))])
    return Prior(kind, c, mean, scale, model.coef_[0].astype(float))


def prior_hits(prior: Prior, posts: Sequence[TrainPost]) -> float:
    return float(np.mean([hit(prior.score(p.x, p.rule), p.best) for p in posts])) if posts else 0.0


def choose_prior(
    posts: Sequence[TrainPost], *, seed: int, inner_folds: int = INNER_FOLDS,
    priors: Sequence[tuple[str, float]] = PRIORS,
) -> tuple[Prior, dict[str, float]]:  # fmt: skip
    """Choose among `priors` by nested CV inside `posts` (inner folds by post), then fit the chosen
    one on all of them; the inner P@1 of each, for the record."""
    order = np.random.default_rng(seed).permutation(len(posts))
    fold = np.empty(len(posts), dtype=int)
    fold[order] = np.arange(len(posts)) % inner_folds
    inner: dict[str, float] = {}
    for kind, c in priors:
        hits = []
        for f in range(inner_folds):
            train = [p for p, k in zip(posts, fold, strict=True) if k != f]
            test = [p for p, k in zip(posts, fold, strict=True) if k == f]
            if train and test:
                hits.append(prior_hits(fit_prior(train, kind, c), test) * len(test))
        inner[f"{kind}:{c:g}"] = round(sum(hits) / len(posts), 4)
    best = max(priors, key=lambda kc: inner[f"{kc[0]}:{kc[1]:g}"])  # the first of equals: the rule
    return fit_prior(posts, *best), inner


# --- the raters ---------------------------------------------------------------------------------


@dataclass
class Ratings2021:
    """The 2021 ratings as the scorer's input: note ids by index, raters by index, values."""

    note_ids: list[str]
    rater: np.ndarray
    note: np.ndarray
    value: np.ndarray
    n_raters: int

    def of_notes(self, ids: set[str]) -> np.ndarray:
        """Per rating, whether its note is one of `ids`."""
        inside = np.array([i in ids for i in self.note_ids], dtype=bool)
        return inside[self.note] if len(self.note) else np.zeros(0, dtype=bool)


def read_ratings(folder: str | Path) -> Ratings2021:
    """`ratings-2021.tsv` through the download's ratings parser (rows it skips are left out)."""
    index: dict[str, int] = {}
    raters: dict[str, int] = {}
    rows: list[tuple[int, int, float]] = []
    path = Path(folder) / real.RATINGS_FILE
    if path.exists():
        for row in cnr.read_ratings(path):
            if isinstance(row, cnr.RatingRow):
                n = index.setdefault(str(row.note_id), len(index))
                rows.append((raters.setdefault(row.rater_id, len(raters)), n, row.value))
    a = np.array(rows, dtype=float).reshape(-1, 3)
    return Ratings2021(list(index), a[:, 0].astype(np.int64), a[:, 1].astype(np.int64), a[:, 2], len(raters))


@dataclass
class Raters:
    """What the scorer fitted on the training ratings gives the jury."""

    mu: float
    ratings_per_note: float
    intercept: np.ndarray  # per rater (nan: no parameters)
    factor: np.ndarray
    note_intercept: dict[str, float]  # training notes' fitted parameters, by noteId
    note_factor: dict[str, float]


def fit_raters(r: Ratings2021, keep: np.ndarray) -> Raters:
    """The project's scorer on the kept ratings (offline: no time window, no lock)."""
    fit = scoring.score(
        scoring.Ratings(r.rater[keep], r.note[keep], r.value[keep]), scoring.NotesMeta(len(r.note_ids)), r.n_raters,
        evaluation.OFFLINE_SCORING,
    )  # fmt: skip
    ni, nfac = np.asarray(fit.note_intercept), np.asarray(fit.note_factor)
    known = np.flatnonzero(~np.isnan(ni) & ~np.isnan(nfac))
    return Raters(
        float(fit.mu), float(fit.diagnostics.get("ratings_per_note", 1.0)), np.asarray(fit.rater_intercept),
        np.asarray(fit.rater_factor), {r.note_ids[i]: float(ni[i]) for i in known},
        {r.note_ids[i]: float(nfac[i]) for i in known},
    )  # fmt: skip


# --- the jury model -----------------------------------------------------------------------------


@dataclass
class JuryModel:
    """Everything a pick needs, fitted on training data only."""

    prior: Prior
    prior_slope: float  # prior score -> note intercept (a line on training notes)
    prior_offset: float
    factor_weights: np.ndarray  # ridge: standardised features -> note factor
    factor_offset: float
    link: tuple[float, float]  # P(Helpful) = sigmoid(a + b * linear score)
    mu: float
    ratings_per_note: float
    pool_intercept: np.ndarray  # the jurors' parameters (raters with a factor)
    pool_factor: np.ndarray
    feature_mean: np.ndarray  # the factor ridge's standardisation (training notes)
    feature_scale: np.ndarray
    inner: dict[str, float] = field(default_factory=dict)  # nested CV's P@1 of each prior
    trained_on: str = ""

    def note_parameters(self, x: np.ndarray, rule: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(intercept, factor) the jury assumes for each note of one post."""
        s = self.prior.score(x, rule)
        z = (x[:, : len(FEATURES)] - self.feature_mean) / self.feature_scale
        return self.prior_offset + self.prior_slope * s, self.factor_offset + z @ self.factor_weights

    def p_helpful(self, ni: np.ndarray, nfac: np.ndarray, ri: np.ndarray, rf: np.ndarray) -> np.ndarray:
        a, b = self.link
        return 1.0 / (1.0 + np.exp(-(a + b * (self.mu + ri + ni + rf * nfac))))

    def scores(self, x: np.ndarray, rule: np.ndarray, *, jury_size: int, draws: int, seed: int) -> np.ndarray:
        """The jury's intercept for each note of one post."""
        ni, nfac = self.note_parameters(x, rule)

        def probs_for(jurors: np.ndarray) -> np.ndarray:
            p = self.p_helpful(
                ni[:, None], nfac[:, None], self.pool_intercept[jurors][None], self.pool_factor[jurors][None]
            )
            return np.stack([p, np.zeros_like(p), 1.0 - p], axis=-1)

        out = jury.jury_scores(
            probs_for, self.pool_intercept, self.pool_factor, mu=self.mu, ratings_per_note=self.ratings_per_note,
            jury_size=jury_size, draws=draws, seed=seed,
        )  # fmt: skip
        return np.asarray(out.intercept)


@dataclass(frozen=True)
class TextNote:
    """A note of the folder with text, and its post's text where known."""

    candidate: Candidate
    post_text: str


def fit_jury(
    train_posts: Sequence[TrainPost], raters: Raters, note_x: dict[str, np.ndarray], *, seed: int, trained_on: str,
    note_rule: dict[str, float], priors: Sequence[tuple[str, float]] = PRIORS,
) -> JuryModel:  # fmt: skip
    """The prior (chosen by nested CV among `priors`), its line onto the intercept and the factor
    ridge, all from training data (`note_x`: features of training notes with text, by noteId); the
    probability link is fitted after it, on the training ratings (`train_model`, `fit_link`)."""
    prior, inner = choose_prior(train_posts, seed=seed, priors=priors)
    ids = [i for i in note_x if i in raters.note_intercept]
    x = np.array([note_x[i] for i in ids]).reshape(-1, len(FEATURES) + 1)
    x_all = np.concatenate([x[:, : len(FEATURES)], *[p.x[:, : len(FEATURES)] for p in train_posts]])
    mean, scale = x_all.mean(axis=0), x_all.std(axis=0)
    scale[scale == 0] = 1.0
    ni = np.array([raters.note_intercept[i] for i in ids])
    nfac = np.array([raters.note_factor[i] for i in ids])
    # The prior of a training note, scored as a one-note post would be (the rule's pick: itself).
    s = np.array([prior.score(row[None], np.array([note_rule[i]]))[0] for i, row in zip(ids, x, strict=True)])
    slope, offset = _line(s, ni)
    z = (x[:, : len(FEATURES)] - mean) / scale
    weights, f_offset = _ridge(z, nfac)
    pool = np.flatnonzero(~np.isnan(raters.factor))
    model = JuryModel(
        prior, slope, offset, weights, f_offset, (0.0, 1.0), raters.mu, raters.ratings_per_note,
        raters.intercept[pool], raters.factor[pool], mean, scale, inner, trained_on,
    )  # fmt: skip
    return model


def _line(s: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Least-squares y ≈ offset + slope·s (slope 0, offset the mean when s does not vary)."""
    if len(s) < 2 or float(np.var(s)) == 0.0:
        return 0.0, float(np.mean(y)) if len(y) else 0.0
    slope = float(np.cov(s, y, bias=True)[0, 1] / np.var(s))
    return slope, float(np.mean(y) - slope * np.mean(s))


def _ridge(z: np.ndarray, y: np.ndarray, alpha: float = 10.0) -> tuple[np.ndarray, float]:
    if len(y) < 2:
        return np.zeros(z.shape[1]), 0.0
    from sklearn.linear_model import Ridge  # deferred: only fitting needs scikit-learn

    model = Ridge(alpha=alpha).fit(z, y)
    return model.coef_.astype(float), float(model.intercept_)


def fit_link(model: JuryModel, rating_notes: np.ndarray, ri: np.ndarray, rf: np.ndarray, x: np.ndarray,
             rule: np.ndarray, helpful: np.ndarray) -> tuple[float, float]:  # fmt: skip
    """P(Helpful) = sigmoid(a + b·(μ + ri + ni + rf·nf)) fitted on training ratings (Helpful vs Not
    Helpful), with each note's ni and nf as the jury would predict them (not its fitted ones)."""
    if len(helpful) < 2 or helpful.all() or not helpful.any():
        return 0.0, 1.0
    lin = np.empty(len(helpful))
    for k in np.unique(rating_notes):
        at = rating_notes == k
        ni, nfac = model.note_parameters(x[[k]], rule[[k]])
        lin[at] = model.mu + ri[at] + ni[0] + rf[at] * nfac[0]
    from sklearn.linear_model import LogisticRegression  # deferred: only fitting needs scikit-learn

    lr = LogisticRegression(C=1.0).fit(lin[:, None], helpful)
    return float(lr.intercept_[0]), float(lr.coef_[0, 0])


# --- one fold, one seed -------------------------------------------------------------------------


@dataclass
class RealData:
    """The folder read once: the evaluated posts, every note with text by id, the 2021 ratings."""

    posts: list[real.RealPost]
    notes_by_post: dict[str, list[str]]  # every note of the folder by post (scored or not)
    text_notes: dict[str, TextNote]  # every note with text, by noteId
    ratings: Ratings2021
    post_x: list[np.ndarray]  # per evaluated post, its candidates' features
    post_rule: list[np.ndarray]
    rated_x: dict[str, np.ndarray] = field(default_factory=dict)  # rated notes with text: features
    rated_rule: dict[str, float] = field(default_factory=dict)  # and the rule's score of each alone


def load(folder: str | Path) -> RealData:
    notes = real.read_notes(folder)
    posts = real.posts_with_truth(notes)
    by_post: dict[str, list[str]] = {}
    text_notes: dict[str, TextNote] = {}
    for n in notes:
        by_post.setdefault(n.post_id, []).append(n.note_id)
        if n.summary:
            text_notes[n.note_id] = TextNote(candidate(n), n.post_text)
    ratings = read_ratings(folder)
    post_x = [note_features([candidate(n) for n in p.notes], p.post_text) for p in posts]
    post_rule = [rule_score([candidate(n) for n in p.notes]) for p in posts]
    rated = [i for i in dict.fromkeys(ratings.note_ids) if i in text_notes]
    rated_x = {i: note_features([text_notes[i].candidate], text_notes[i].post_text)[0] for i in rated}
    rated_rule = {i: float(rule_score([text_notes[i].candidate])[0]) for i in rated}
    return RealData(posts, by_post, text_notes, ratings, post_x, post_rule, rated_x, rated_rule)


@dataclass
class Setting:
    jury_size: int = jury.DEFAULT_JURY_SIZE
    draws: int = jury.DEFAULT_DRAWS
    folds: int = 5
    priors: tuple[tuple[str, float], ...] = PRIORS  # what nested CV chooses between


def train_model(
    data: RealData, train: Sequence[int], *, seed: int, trained_on: str, priors: Sequence[tuple[str, float]] = PRIORS
) -> tuple[JuryModel, Raters]:
    """The jury fitted on the posts `train` (indexes of `data.posts`) and on the ratings of every
    note outside the other evaluated posts."""
    held_posts = {data.posts[i].post_id for i in range(len(data.posts))} - {data.posts[i].post_id for i in train}
    held_ids = {nid for p in held_posts for nid in data.notes_by_post.get(p, [])}
    r = data.ratings
    keep = ~r.of_notes(held_ids)
    raters = fit_raters(r, keep)
    train_posts = [TrainPost(data.post_x[i], data.post_rule[i], data.posts[i].best) for i in train]
    note_x = {i: x for i, x in data.rated_x.items() if i not in held_ids}
    model = fit_jury(
        train_posts, raters, note_x, seed=seed, trained_on=trained_on, note_rule=data.rated_rule, priors=priors
    )
    # The link, on the training ratings of notes with text and raters with parameters.
    index = {nid: k for k, nid in enumerate(note_x)}
    rows = np.flatnonzero(keep & (r.value != 0.5))
    rows = rows[[r.note_ids[r.note[k]] in index for k in rows]] if len(rows) else rows
    rows = rows[~np.isnan(raters.factor[r.rater[rows]])] if len(rows) else rows
    if len(rows):
        x = np.array(list(note_x.values()))
        rule = np.array([data.rated_rule[i] for i in note_x])
        local = np.array([index[r.note_ids[r.note[k]]] for k in rows])
        model.link = fit_link(model, local, raters.intercept[r.rater[rows]], raters.factor[r.rater[rows]], x, rule,
                              r.value[rows] == 1.0)  # fmt: skip
    return model, raters


def held_out_auc_inputs(
    data: RealData, model: JuryModel, raters: Raters, held: Sequence[int]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(P(Helpful), the same with every note at the training notes' mean (the raters alone), Helpful)
    for the 2021 ratings of the held-out posts' notes with text, by raters with parameters from the
    training fit (Somewhat Helpful left out)."""
    r = data.ratings
    ids = {nid for i in held for nid in data.notes_by_post.get(data.posts[i].post_id, []) if nid in data.rated_x}
    rows = np.flatnonzero(r.of_notes(ids) & (r.value != 0.5))
    rows = rows[~np.isnan(raters.factor[r.rater[rows]])] if len(rows) else rows
    p, p_raters = np.empty(len(rows)), np.empty(len(rows))
    flat = np.array([model.prior_offset]), np.array([model.factor_offset])
    for k, row in enumerate(rows):
        nid = r.note_ids[r.note[row]]
        ni, nfac = model.note_parameters(data.rated_x[nid][None], np.array([data.rated_rule[nid]]))
        ri, rf = raters.intercept[r.rater[row]], raters.factor[r.rater[row]]
        p[k] = model.p_helpful(ni, nfac, ri, rf)[0]
        p_raters[k] = model.p_helpful(*flat, ri, rf)[0]
    return p, p_raters, r.value[rows] == 1.0


@dataclass
class SeedRun:
    seed: int
    jury: dict[str, np.ndarray]  # post -> the jury's intercept per candidate
    prior: dict[str, np.ndarray]  # post -> the prior's score per candidate
    chosen: list[str]  # the prior chosen per fold
    auc_p: np.ndarray
    auc_y: np.ndarray
    auc_p_raters: np.ndarray  # the same ratings, every note at the training notes' mean
    seconds: float


def folds_of(n: int, seed: int, folds: int) -> np.ndarray:
    """Each post's fold: a seeded permutation, dealt round."""
    fold = np.empty(n, dtype=int)
    fold[np.random.default_rng(seed).permutation(n)] = np.arange(n) % max(folds, 1)
    return fold


def run_seed(data: RealData, *, seed: int, setting: Setting | None = None,
             held_out_edit: Callable[[RealData, Sequence[int]], RealData] | None = None) -> SeedRun:  # fmt: skip
    """Folds by post; per fold the jury is fitted without the fold's posts, then scores them.
    `held_out_edit(data, held)`: a copy of the data with the held-out posts' truths or ratings
    changed (the leakage test: their picks must not move)."""
    setting = setting or Setting()
    started = time.monotonic()
    fold = folds_of(len(data.posts), seed, setting.folds)
    out_jury: dict[str, np.ndarray] = {}
    out_prior: dict[str, np.ndarray] = {}
    chosen: list[str] = []
    ps, pr, ys = [], [], []
    for f in range(setting.folds):
        held = [i for i in range(len(data.posts)) if fold[i] == f]
        train = [i for i in range(len(data.posts)) if fold[i] != f]
        if not held or not train:
            continue
        fold_data = held_out_edit(data, held) if held_out_edit else data
        model, raters = train_model(
            fold_data, train, seed=seed * 100 + f, trained_on=f"fold {f} of {setting.folds}", priors=setting.priors
        )
        chosen.append(model.prior.describe())
        p, p_raters, y = held_out_auc_inputs(fold_data, model, raters, held)
        ps.append(p)
        pr.append(p_raters)
        ys.append(y)
        for k, i in enumerate(held):
            post = fold_data.posts[i]
            x, rule = fold_data.post_x[i], fold_data.post_rule[i]
            out_prior[post.post_id] = model.prior.score(x, rule)
            out_jury[post.post_id] = model.scores(
                x, rule, jury_size=setting.jury_size, draws=setting.draws, seed=seed * 100_000 + 1000 * f + k
            )
    return SeedRun(
        seed, out_jury, out_prior, chosen, np.concatenate(ps) if ps else np.zeros(0),
        np.concatenate(ys) if ys else np.zeros(0, dtype=bool), np.concatenate(pr) if pr else np.zeros(0),
        round(time.monotonic() - started, 1),
    )  # fmt: skip


# --- the table ----------------------------------------------------------------------------------


def _rule_hits(data: RealData) -> dict[str, np.ndarray]:
    out = {}
    for rule in js.RULES:
        hits = []
        for p in data.posts:
            cands = [candidate(n) for n in p.notes]
            sample = js.Posts(
                note_ids=list(range(len(cands))), notes=[nf.NoteInput(c.summary, c.classification) for c in cands],
                created_ms=np.array([c.created_at_ms for c in cands], dtype=np.int64), truth={}, posts=[],
                embedder="none",
            )  # fmt: skip
            hits.append(hit(js.rule_scores(sample, rule, np.arange(len(cands))), p.best))
        out[rule] = np.array(hits)
    return out


def _p(hits: np.ndarray) -> dict[str, Any]:
    n = len(hits)
    p = float(hits.mean()) if n else 0.0
    return {"p_at_1": round(p, 4), "n": n, "ci95": [round(v, 4) for v in comparison.wilson_interval(p * n, n)]}


def summarise(data: RealData, runs: Sequence[SeedRun], setting: Setting, *, bootstrap_seed: int = 0) -> dict[str, Any]:
    """P@1 of the jury (mean over seeds, Wilson 95 % at the mean over the posts), of the prior alone,
    of random and of each rule, over every post and by truth kind; the jury's paired lead over the
    best rule with a bootstrap 95 % interval over posts; the held-out AUC."""
    jury_hits = np.array([[hit(run.jury[p.post_id], p.best) for p in data.posts] for run in runs])
    prior_hits_ = np.array([[hit(run.prior[p.post_id], p.best) for p in data.posts] for run in runs])
    random_hits = np.array([len(p.best) / len(p.notes) for p in data.posts])
    rule_hits = _rule_hits(data)
    kinds = {"all": np.ones(len(data.posts), dtype=bool)}
    for kind in (real.TRUTH_INTERCEPT, real.TRUTH_STATUS):
        kinds[kind] = np.array([p.truth == kind for p in data.posts])
    rows = []
    rng = np.random.default_rng(bootstrap_seed)
    for kind, mask in kinds.items():
        if not mask.any():
            continue
        per_post = jury_hits[:, mask].mean(axis=0)
        rules = {r: _p(h[mask]) for r, h in rule_hits.items()}
        best_rule = max(rules, key=lambda r: rules[r]["p_at_1"])
        d = per_post - rule_hits[best_rule][mask]
        boots = d[rng.integers(0, len(d), size=(BOOTSTRAP, len(d)))].mean(axis=1)
        low, high = np.quantile(boots, [0.025, 0.975])
        rows.append({
            "truth": kind,
            "n_posts": int(mask.sum()),
            "jury": {**_p(per_post), "per_seed": [round(float(h[mask].mean()), 4) for h in jury_hits]},
            "prior_alone": {**_p(prior_hits_[:, mask].mean(axis=0)),
                            "per_seed": [round(float(h[mask].mean()), 4) for h in prior_hits_]},
            "random": _p(random_hits[mask]),
            "rules": rules,
            "best_rule": best_rule,
            "lead_over_best_rule": {"mean": round(float(d.mean()), 4), "ci95": [round(float(low), 4), round(float(high), 4)],
                                    "bootstrap": BOOTSTRAP},
        })  # fmt: skip
    aucs = [phm.auc(run.auc_p, run.auc_y) for run in runs]
    raters_only = [phm.auc(run.auc_p_raters, run.auc_y) for run in runs]
    chosen: dict[str, int] = {}
    for run in runs:
        for c in run.chosen:
            chosen[c] = chosen.get(c, 0) + 1
    return {
        "data": f"{len(data.posts)} real posts with a truth (real/notes.tsv), "
        f"{len(data.ratings.value)} ratings of 2021 notes (real/ratings-2021.tsv)",
        "seeds": [run.seed for run in runs],
        "folds": setting.folds,
        "jury_size": setting.jury_size,
        "draws": setting.draws,
        "rows": rows,
        "rules": js.RULES,
        "priors_chosen": chosen,
        "held_out_auc": {
            "per_seed": [round(a, 4) for a in aucs],
            "mean": round(float(np.nanmean(aucs)), 4) if aucs and not all(math.isnan(a) for a in aucs) else None,
            "n_ratings": len(runs[0].auc_y) if runs else 0,
            # The raters alone (every note at the training notes' mean): what the notes add is the difference.
            "raters_only_mean": round(float(np.nanmean(raters_only)), 4) if runs else None,
        },
        "learns_from": LEARNS_FROM,
        "seconds": round(sum(r.seconds for r in runs), 1),
    }


LEARNS_FROM = (
    "The note prior learns from the training posts' within-post preferences (which of a post's notes the crowd rated "
    "best: the reference scorer's intercept of 2021–2023 notes, or mature Helpful beside Not Helpful statuses, "
    "2021–2026) over the notes' text features (links, length, specificity, classification, language); the jurors are "
    "the 2021 raters of real/ratings-2021.tsv, their intercepts and factors from the project's scorer fitted on the "
    "ratings of notes outside the held-out posts."
)


def _f(x: float) -> str:
    return f"{x:.3f}"


def table_lines(summary: dict[str, Any]) -> list[str]:
    """The table (markdown): per truth kind, the jury, the prior alone, random and each rule, with
    Wilson 95 % intervals; then the jury's lead over the best rule."""
    auc_ = summary["held_out_auc"]
    lines = [
        f"Data: {summary['data']}. {summary['folds']} folds by post; seeds {', '.join(map(str, summary['seeds']))}; "
        f"jury of {summary['jury_size']} jurors, {summary['draws']} draws per note.",
        f"Held-out AUC (the jury's P(Helpful) against the held-out posts' 2021 ratings, Helpful vs Not Helpful, "
        f"n = {auc_['n_ratings']} ratings per seed): "
        + (f"{auc_['mean']:.3f}" if auc_["mean"] is not None else "none (no held-out ratings)")
        + (
            f"; the raters alone, every note at the training notes' mean: {auc_['raters_only_mean']:.3f}."
            if auc_.get("raters_only_mean") is not None
            else "."
        ),
        "Prior chosen by nested CV inside the training folds (folds × seeds): "
        + "; ".join(f"{k}: {v}" for k, v in summary["priors_chosen"].items())
        + ".",
        "",
        "| truth | posts | jury P@1 [Wilson 95 %] | prior alone | random | " + " | ".join(js.RULES) + " |",
        "|---|---|---|---|---|" + "---|" * len(js.RULES),
    ]
    for row in summary["rows"]:
        j, pr = row["jury"], row["prior_alone"]
        cells = [f"{_f(row['rules'][r]['p_at_1'])} [{_f(row['rules'][r]['ci95'][0])}–{_f(row['rules'][r]['ci95'][1])}]"
                 for r in js.RULES]  # fmt: skip
        lines.append(
            f"| {row['truth']} | {row['n_posts']} | **{_f(j['p_at_1'])}** [{_f(j['ci95'][0])}–{_f(j['ci95'][1])}] | "
            f"{_f(pr['p_at_1'])} | {_f(row['random']['p_at_1'])} | " + " | ".join(cells) + " |"
        )
    lines += [
        "",
        "| truth | best rule | jury − best rule, 95 % bootstrap CI over posts | beats it? |",
        "|---|---|---|---|",
    ]
    for row in summary["rows"]:
        d = row["lead_over_best_rule"]
        verdict = "yes" if d["ci95"][0] > 0 else ("no: worse" if d["ci95"][1] < 0 else "no: within the noise")
        lines.append(
            f"| {row['truth']} | {row['best_rule']} | {d['mean']:+.3f} [{d['ci95'][0]:+.3f}, {d['ci95'][1]:+.3f}] | {verdict} |"
        )
    return lines


# --- the saved model and picks for posts never seen ---------------------------------------------


def train_saved(data: RealData, *, seed: int = 0) -> tuple[JuryModel, dict[str, Any]]:
    """The jury trained on every post and rating of the folder (what `jury_pick` uses), and its meta."""
    model, raters = train_model(data, range(len(data.posts)), seed=seed, trained_on="the whole real folder")
    meta = {
        "trained_on": f"{len(data.posts)} real posts with a truth, {len(data.ratings.value)} ratings of "
        f"{RATINGS_YEARS} notes",
        "prior": model.prior.describe(),
        "inner_p_at_1": model.inner,
        "jurors": len(model.pool_factor),
        "link": list(model.link),
        "features": [*FEATURES, RULE_FEATURE],
        "learns_from": LEARNS_FROM,
        "training_notes_with_factor": sum(1 for i in data.rated_x if i in raters.note_factor),
    }
    return model, meta


def save(model: JuryModel, meta: dict[str, Any], directory: Path, version: str) -> Path:
    """Write <directory>/<version>/{model.joblib, meta.json} and point LATEST at it."""
    import json

    import joblib  # deferred with scikit-learn: only saving/loading a model needs joblib

    target = directory / version
    target.mkdir(parents=True, exist_ok=True)
    joblib.dump(model, target / MODEL_FILE)
    (target / META_FILE).write_text(json.dumps({"version": version, **meta}, indent=2), encoding="utf-8")
    (directory / LATEST_FILE).write_text(version + "\n", encoding="utf-8")
    return target


def load_saved(directory: Path) -> tuple[JuryModel, dict[str, Any]] | None:
    """The latest saved model and its meta, or None when none was trained."""
    import json

    pointer = directory / LATEST_FILE
    version = pointer.read_text(encoding="utf-8").strip() if pointer.exists() else ""
    if not version or not (directory / version / MODEL_FILE).exists():
        return None
    import joblib  # deferred: only a process that picks pays for it

    model = joblib.load(directory / version / MODEL_FILE)
    return model, json.loads((directory / version / META_FILE).read_text(encoding="utf-8"))


def pick(model: JuryModel, post_text: str, notes: Sequence[Candidate], *, jury_size: int = jury.DEFAULT_JURY_SIZE,
         draws: int = jury.DEFAULT_DRAWS, seed: int = 0) -> np.ndarray:  # fmt: skip
    """The jury's intercept for each of a post's notes (the pick is the highest)."""
    return model.scores(note_features(notes, post_text), rule_score(notes), jury_size=jury_size, draws=draws, seed=seed)


def train_and_save(folder: str | Path, directory: Path, *, version: str | None = None) -> tuple[Path, dict[str, Any]]:
    """Read the folder, train the jury on all of it and save it as a new version under `directory`."""
    import datetime as dt

    model, meta = train_saved(load(folder))
    version = version or dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%S")
    return save(model, meta, directory, version), meta


def load_or_train(folder: str | Path, directory: Path) -> tuple[JuryModel, dict[str, Any], bool]:
    """The saved model, or one trained now on `folder` and saved (the flag says it was trained)."""
    saved = load_saved(directory)
    if saved is not None:
        return saved[0], saved[1], False
    train_and_save(folder, directory)
    again = load_saved(directory)
    assert again is not None
    return again[0], again[1], True
