"""Offline evaluation of the jury (pure): on posts with several rated notes, does the jury pick the
empirically best note (highest intercept from the real ratings, which the PHM never saw)?

Two populations: a synthetic one with a known truth (`evaluate_synthetic`) and the public sample
(`evaluate_sample`, below: the colin-fraser 2021 notes and ratings, grouped into posts by tweetId).

Synthetic population (`synthetic_population`): crowdnotes_site.lib.scoring.synthetic.generate's raters and notes (known
factors), grouped into posts of `notes_per_post` notes; each note gets a stand-in "embedding" = a
fixed random projection of its true (intercept, factor) plus noise (what a text embedding would
carry about the note, imperfectly). The ratings of the evaluation posts' notes are held out from
the PHM and from the scorer run that gives the jurors their parameters.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from crowdnotes_site.lib.scoring import communitynotes_io as cio
from crowdnotes_site.lib.scoring import scoring, scoring_tsv, synthetic
from notes.supernotes import comparison, jury, phm

EMBED_DIM = 16


@dataclass
class EvalResult:
    p_at_1: float
    random_p_at_1: float
    n_posts: int
    auc: float
    train_seconds: float
    jury_seconds: float
    calibration: list[dict[str, object]]


def _scorer_config() -> scoring.ScoringConfig:
    return scoring.ScoringConfig(valid_rating_window_ms=None, lock_after_days=None)


def evaluate_synthetic(
    *, seed: int = 0, n_ratings: int = 60_000, posts: int = 60, notes_per_post: int = 4, jury_size: int = 200,
    epochs: int = 6, noise: float = 0.3,
) -> EvalResult:  # fmt: skip
    rng = np.random.default_rng(seed)
    data = synthetic.generate(n_ratings, seed=seed)
    meta = scoring.NotesMeta(n_notes=data.n_notes)
    ratings = scoring.Ratings(data.rater, data.note, data.value)
    full = scoring.score(ratings, meta, data.n_raters, _scorer_config())
    # Evaluation posts: groups of notes that all got an empirical intercept.
    scored = np.flatnonzero(~np.isnan(full.note_intercept))
    rng.shuffle(scored)
    groups = [scored[i : i + notes_per_post] for i in range(0, len(scored) - notes_per_post + 1, notes_per_post)]
    groups = groups[:posts]
    held = np.zeros(data.n_notes, dtype=bool)
    for g in groups:
        held[g] = True
    # Jurors' parameters and μ from the ratings without the held-out notes.
    keep = ~held[data.note]
    train_fit = scoring.score(
        scoring.Ratings(data.rater[keep], data.note[keep], data.value[keep]), meta, data.n_raters, _scorer_config()
    )
    proj = rng.normal(0, 1, (2, EMBED_DIM))
    latent = np.stack([data.true_note_intercept, data.true_note_factor], axis=1)
    emb = (latent @ proj + rng.normal(0, noise, (data.n_notes, EMBED_DIM))).astype(np.float32)
    ri, rf = train_fit.rater_intercept, train_fit.rater_factor
    usable = keep & ~np.isnan(rf[data.rater])
    label = _labels(data.value)
    training = phm.TrainingData(
        emb, np.zeros_like(emb), np.zeros(data.n_notes, dtype=np.float32), data.note[usable],
        ri[data.rater[usable]], rf[data.rater[usable]], label[usable],
    )  # fmt: skip
    model = phm.train(training, embedder="synthetic-projection", trained_on=f"synthetic seed {seed}", epochs=epochs,
                      seed=seed)  # fmt: skip
    pool = np.flatnonzero(~np.isnan(rf))
    pri, prf = ri[pool], rf[pool]
    ratings_per_note = float(train_fit.diagnostics.get("ratings_per_note", 1.0))
    started = time.monotonic()
    hits = 0
    for k, g in enumerate(groups):
        pick = _jury_pick(model, emb[g], pri, prf, mu=train_fit.mu, ratings_per_note=ratings_per_note,
                          jury_size=jury_size, seed=seed + k)  # fmt: skip
        hits += int(pick == np.argmax(full.note_intercept[g]))
    return EvalResult(
        p_at_1=hits / max(len(groups), 1),
        random_p_at_1=1 / notes_per_post,
        n_posts=len(groups),
        auc=model.meta.auc,
        train_seconds=model.meta.train_seconds,
        jury_seconds=round(time.monotonic() - started, 3),
        calibration=model.meta.calibration,
    )


def _jury_pick(
    model: phm.PHM, group_emb: np.ndarray, pool_intercept: np.ndarray, pool_factor: np.ndarray, *, mu: float,
    ratings_per_note: float, jury_size: int, seed: int,
) -> int:  # fmt: skip
    """The index (within the group) of the note the simulated jury scores highest."""

    def probs_for(jurors: np.ndarray) -> np.ndarray:
        return model.probabilities(group_emb, None, pool_intercept[jurors], pool_factor[jurors])

    scores = jury.jury_scores(
        probs_for, pool_intercept, pool_factor, mu=mu, ratings_per_note=ratings_per_note, jury_size=jury_size,
        seed=seed,
    )  # fmt: skip
    return int(np.argmax(scores.intercept))


def _labels(value: np.ndarray) -> np.ndarray:
    """PHM classes from rating values: 0 helpful (1.0), 1 somewhat (0.5), 2 not helpful (0.0)."""
    return np.where(value == 1.0, 0, np.where(value == 0.5, 1, 2))


# --- The public sample ------------------------------------------------------------------------

SAMPLE_INPUTS = (
    "note text embedding and the rater's scorer intercept and factor; the public data has no post "
    "text (only tweetId), so the PHM's post input is empty"
)


@dataclass
class SamplePost:
    post: str  # tweetId
    notes: int  # notes with an empirical intercept (the jury chooses among them)
    picked_best: bool
    fold: int


@dataclass
class SampleResult:
    p_at_1: float
    p_at_1_ci95: tuple[float, float]  # Wilson score interval over the n posts
    random_p_at_1: float  # mean over posts of 1 / (its number of notes)
    n_posts: int
    auc: float  # mean over folds of the PHM's held-out AUC (helpful vs not helpful)
    auc_per_fold: list[float]
    folds: int
    embedder: str
    inputs: str
    ratings: int  # ratings the scorer used (after the reference's preprocessing)
    notes_scored: int  # notes with an empirical intercept from all ratings
    posts_with_2_rated_notes: int  # before requiring 2 notes with an intercept
    train_seconds: float
    jury_seconds: float
    posts: list[SamplePost] = field(default_factory=list)


def evaluate_sample(
    notes_path: str | Path, ratings_path: str | Path, *, embed: Callable[[Sequence[str]], np.ndarray],
    embedder: str, folds: int = 5, max_posts: int | None = None, jury_size: int = 200, epochs: int = 6,
    seed: int = 0,
) -> SampleResult:  # fmt: skip
    """P@1 of the jury on the public sample. Posts = tweetIds with ≥ 2 notes that have an intercept
    from the scorer run on all ratings (the truth: the highest one). The posts are split into
    `folds`; for each fold the scorer (jurors' parameters, μ) and the PHM are fitted WITHOUT any
    rating of that fold's posts' notes, then the jury picks a note per post of the fold."""
    data = scoring_tsv.load(notes_path, ratings_path)
    n_raters = len(data.participant_ids)
    ratings = data.ratings
    full = scoring.score(ratings, data.meta, n_raters, _scorer_config())
    index = {note_id: i for i, note_id in enumerate(data.note_ids)}
    texts = [""] * data.meta.n_notes
    by_post: dict[str, list[int]] = defaultdict(list)
    rated = np.bincount(ratings.note, minlength=data.meta.n_notes) > 0
    for row in cio.read_notes(notes_path):
        if isinstance(row, cio.Skipped) or row.note_id not in index or not row.tweet_id:
            continue
        i = index[row.note_id]
        texts[i] = row.summary
        by_post[row.tweet_id].append(i)
    posts_rated = sum(1 for notes in by_post.values() if rated[notes].sum() >= 2)
    scored = ~np.isnan(full.note_intercept)
    groups = sorted((post, np.array(sorted(i for i in notes if scored[i]))) for post, notes in by_post.items())
    groups = [(post, g) for post, g in groups if len(g) >= 2]
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(groups))
    groups = [groups[i] for i in order][: max_posts or None]
    fold_of = np.arange(len(groups)) % max(folds, 1)
    # Embed each rated note once (notes only seen in ratings were deleted: empty text).
    needed = np.flatnonzero(rated)
    emb_needed = np.asarray(embed([texts[i] for i in needed]), dtype=np.float32)
    emb = np.zeros((data.meta.n_notes, emb_needed.shape[1]), dtype=np.float32)
    emb[needed] = emb_needed
    label = _labels(ratings.value)
    posts: list[SamplePost] = []
    aucs: list[float] = []
    train_seconds = jury_seconds = 0.0
    for f in range(max(folds, 1)):
        members = [groups[k] for k in np.flatnonzero(fold_of == f)]
        if not members:
            continue
        held = np.zeros(data.meta.n_notes, dtype=bool)
        for post, _ in members:
            held[by_post[post]] = True  # every note of the post, scored or not
        keep = ~held[ratings.note]
        train_fit = scoring.score(
            scoring.Ratings(ratings.rater[keep], ratings.note[keep], ratings.value[keep]), data.meta, n_raters,
            _scorer_config(),
        )  # fmt: skip
        ri, rf = train_fit.rater_intercept, train_fit.rater_factor
        usable = keep & ~np.isnan(rf[ratings.rater])
        training = phm.TrainingData(
            emb, np.zeros_like(emb), np.zeros(data.meta.n_notes, dtype=np.float32), ratings.note[usable],
            ri[ratings.rater[usable]], rf[ratings.rater[usable]], label[usable],
        )  # fmt: skip
        model = phm.train(training, embedder=embedder, trained_on=f"public sample, fold {f} held out", epochs=epochs,
                          seed=seed + f)  # fmt: skip
        train_seconds += model.meta.train_seconds
        aucs.append(model.meta.auc)
        pool = np.flatnonzero(~np.isnan(rf))
        per_note = float(train_fit.diagnostics.get("ratings_per_note", 1.0))
        started = time.monotonic()
        for k, (post, g) in enumerate(members):
            pick = _jury_pick(model, emb[g], ri[pool], rf[pool], mu=train_fit.mu, ratings_per_note=per_note,
                              jury_size=jury_size, seed=seed + 1000 * f + k)  # fmt: skip
            posts.append(SamplePost(post, len(g), pick == int(np.argmax(full.note_intercept[g])), f))
        jury_seconds += time.monotonic() - started
    n = len(posts)
    hits = sum(p.picked_best for p in posts)
    return SampleResult(
        p_at_1=hits / n if n else float("nan"),
        p_at_1_ci95=comparison.wilson_interval(hits, n),
        random_p_at_1=float(np.mean([1 / p.notes for p in posts])) if n else float("nan"),
        n_posts=n,
        auc=round(float(np.nanmean(aucs)), 4) if aucs else float("nan"),
        auc_per_fold=aucs,
        folds=len(aucs),
        embedder=embedder,
        inputs=SAMPLE_INPUTS,
        ratings=len(ratings.value),
        notes_scored=int(scored.sum()),
        posts_with_2_rated_notes=posts_rated,
        train_seconds=round(train_seconds, 2),
        jury_seconds=round(jury_seconds, 3),
        posts=posts,
    )


@dataclass
class BenchResult:
    seconds: float
    embed_seconds: float
    candidates: int
    jurors: int


def bench(*, candidates: int = 100, jurors: int = 200, dim: int = 384, seed: int = 0) -> BenchResult:
    """PHM inference + sampling + projection for `candidates` x `jurors` (one jury draw per
    candidate, as the run does `jury.DEFAULT_DRAWS` of them: timed with those draws). The random
    untrained network has the production shape; the candidate embedding is timed apart (the
    hashing embedding; the MiniLM one is measured by the run itself)."""
    import torch

    rng = np.random.default_rng(seed)
    torch.manual_seed(seed)
    texts = [f"Candidate {i}: the study found no link; see https://example.org/{i}" for i in range(candidates)]
    t0 = time.monotonic()
    emb = phm.hashing_embed(texts, dim=dim)
    embed_seconds = time.monotonic() - t0
    model = phm.PHM(phm.PHMNet(dim), phm.PHMMeta("bench", phm.HASHING, dim, "none", 0, 0, 0, 0.0, [], 0.0, 0))
    model.net.eval()
    ri, rf = rng.normal(0, 0.1, 5000), rng.normal(0, 0.6, 5000)
    t0 = time.monotonic()
    jury.jury_scores(
        lambda j: model.probabilities(emb, emb[0], ri[j], rf[j]), ri, rf, mu=0.2, ratings_per_note=20.0,
        jury_size=jurors, seed=seed,
    )  # fmt: skip
    return BenchResult(round(time.monotonic() - t0, 4), round(embed_seconds, 4), candidates, jurors)
