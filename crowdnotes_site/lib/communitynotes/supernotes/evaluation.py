"""Offline evaluation of the jury (pure): on posts with several rated notes, does the jury pick the
empirically best note (highest intercept from the real ratings, which the PHM never saw)?

Two populations: a synthetic one with a known truth (`evaluate_synthetic`, here) and the public sample
(`crowdnotes_site.lib.communitynotes.research.jury_sample`: the colin-fraser 2021 notes and ratings, grouped into posts by
tweetId, against two truths and beside one-line rules).

Synthetic population (`synthetic_population`): crowdnotes_site.lib.communitynotes.data.synthetic.generate's raters and notes (known
factors), grouped into posts of `notes_per_post` notes; each note gets a stand-in "embedding" = a
fixed random projection of its true (intercept, factor) plus noise (what a text embedding would
carry about the note, imperfectly). The ratings of the evaluation posts' notes are held out from
the PHM and from the scorer run that gives the jurors their parameters.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from crowdnotes_site.lib.communitynotes import scoring
from crowdnotes_site.lib.communitynotes.data import synthetic
from crowdnotes_site.lib.communitynotes.supernotes import features, jury, phm

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


# The scorer of an offline evaluation: every rating counts (no 48 h window) and no status locks.
OFFLINE_SCORING = scoring.ScoringConfig(valid_rating_window_ms=None, lock_after_days=None)


def evaluate_synthetic(
    *, seed: int = 0, n_ratings: int = 60_000, posts: int = 60, notes_per_post: int = 4, jury_size: int = 200,
    epochs: int = 6, noise: float = 0.3, members: int = 1, draws: int = jury.DEFAULT_DRAWS,
) -> EvalResult:  # fmt: skip
    """P@1 on synthetic posts; `members` PHMs averaged (`phm.train_ensemble`), `draws` jury draws."""
    rng = np.random.default_rng(seed)
    data = synthetic.generate(n_ratings, seed=seed)
    meta = scoring.NotesMeta(n_notes=data.n_notes)
    ratings = scoring.Ratings(data.rater, data.note, data.value)
    full = scoring.score(ratings, meta, data.n_raters, OFFLINE_SCORING)
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
        scoring.Ratings(data.rater[keep], data.note[keep], data.value[keep]), meta, data.n_raters, OFFLINE_SCORING
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
    model = phm.train_ensemble(training, members=members, embedder="synthetic-projection",
                               trained_on=f"synthetic seed {seed}", epochs=epochs, seed=seed)  # fmt: skip
    pool = np.flatnonzero(~np.isnan(rf))
    pri, prf = ri[pool], rf[pool]
    ratings_per_note = float(train_fit.diagnostics.get("ratings_per_note", 1.0))
    started = time.monotonic()
    hits = 0
    for k, g in enumerate(groups):
        pick = _jury_pick(model, emb[g], pri, prf, mu=train_fit.mu, ratings_per_note=ratings_per_note,
                          jury_size=jury_size, draws=draws, seed=seed + k)  # fmt: skip
        hits += int(pick == np.argmax(full.note_intercept[g]))
    return EvalResult(
        p_at_1=hits / max(len(groups), 1),
        random_p_at_1=1 / notes_per_post,
        n_posts=len(groups),
        auc=model.meta.auc,  # member 0's
        train_seconds=round(sum(m.meta.train_seconds for m in model.members), 2),
        jury_seconds=round(time.monotonic() - started, 3),
        calibration=model.meta.calibration,
    )


def _jury_pick(
    model: phm.PHM | phm.PHMEnsemble, group_emb: np.ndarray, pool_intercept: np.ndarray, pool_factor: np.ndarray,
    *, mu: float, ratings_per_note: float, jury_size: int, seed: int, draws: int = jury.DEFAULT_DRAWS,
) -> int:  # fmt: skip
    """The index (within the group) of the note the simulated jury scores highest."""

    def probs_for(jurors: np.ndarray) -> np.ndarray:
        return model.probabilities(group_emb, None, pool_intercept[jurors], pool_factor[jurors])

    scores = jury.jury_scores(
        probs_for, pool_intercept, pool_factor, mu=mu, ratings_per_note=ratings_per_note, jury_size=jury_size,
        draws=draws, seed=seed,
    )  # fmt: skip
    return int(np.argmax(scores.intercept))


def _labels(value: np.ndarray) -> np.ndarray:
    """PHM classes from rating values: 0 helpful (1.0), 1 somewhat (0.5), 2 not helpful (0.0)."""
    return np.where(value == 1.0, 0, np.where(value == 0.5, 1, 2))


@dataclass
class BenchResult:
    seconds: float
    embed_seconds: float
    candidates: int
    jurors: int


def bench(
    *, candidates: int = 100, jurors: int = 200, dim: int = 384, seed: int = 0, members: int = 1,
    draws: int = jury.DEFAULT_DRAWS,
) -> BenchResult:  # fmt: skip
    """PHM inference + sampling + projection for `candidates` x `jurors` (one jury draw per
    candidate, as the run does `jury.DEFAULT_DRAWS` of them: timed with those draws). The random
    untrained network has the production shape (embedding and every note feature; `members` of them
    averaged when timing an ensemble, with `draws` jury draws); the candidate
    embedding and features are timed apart (the hashing embedding; the MiniLM one is measured by
    the run itself)."""
    import torch

    rng = np.random.default_rng(seed)
    torch.manual_seed(seed)
    texts = [f"Candidate {i}: the study found no link; see https://example.org/{i}" for i in range(candidates)]
    names = features.feature_names(list(features.GROUPS))
    t0 = time.monotonic()
    emb = phm.hashing_embed(texts, dim=dim)
    feats = features.columns([features.NoteInput(t) for t in texts], names)
    embed_seconds = time.monotonic() - t0
    meta = phm.PHMMeta("bench", phm.HASHING, dim, "none", 0, 0, 0, 0.0, [], 0.0, 0, features=names,
                       feature_mean=[0.0] * len(names), feature_std=[1.0] * len(names))  # fmt: skip
    model = phm.PHMEnsemble([phm.PHM(phm.PHMNet(dim, len(names)).eval(), meta) for _ in range(members)])
    ri, rf = rng.normal(0, 0.1, 5000), rng.normal(0, 0.6, 5000)
    t0 = time.monotonic()
    jury.jury_scores(
        lambda j: model.probabilities(emb, emb[0], ri[j], rf[j], feats), ri, rf, mu=0.2, ratings_per_note=20.0,
        jury_size=jurors, draws=draws, seed=seed,
    )  # fmt: skip
    return BenchResult(round(time.monotonic() - t0, 4), round(embed_seconds, 4), candidates, jurors)
