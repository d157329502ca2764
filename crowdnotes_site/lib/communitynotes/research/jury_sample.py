"""The jury on the public sample (pure: no Django): on posts with several notes, does the jury pick
the note the crowd rated best, more often than one-line rules do?

Data: the colin-fraser 2021 notes and ratings (posts = tweetIds). Two truths, each "the note with
the highest intercept among the post's notes that have one":
- `sample`: the scorer run on all the sample's ratings (it sees the held-out ratings; the jury never does);
- `full_data`: the reference scorer's `noteIntercept` on the whole public data two years later
  (shiruken/scoredNotes_2023-02-18.tsv), joined by noteId.

A post is evaluated when at least one truth has ≥ 2 of its notes; the jury scores every note of the
post that some truth scores, and under each truth picks the highest-scored note among that truth's
notes. Posts are split into folds by post; for each fold the scorer (the jurors' parameters, μ),
the writers' records and the PHM are computed WITHOUT anything of the fold's posts: none of their
ratings, none of their notes' intercepts, and a writer's record only counts the writer's notes on
other posts written before the note. The rules (longest, most links, ...) need no training.
"""

from __future__ import annotations

import csv
import hashlib
import math
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from crowdnotes_site.lib.communitynotes import scoring
from crowdnotes_site.lib.communitynotes.data import scorer_input as scoring_tsv
from crowdnotes_site.lib.communitynotes.data import tsv as cio
from crowdnotes_site.lib.communitynotes.supernotes import comparison, evaluation, jury, phm
from crowdnotes_site.lib.communitynotes.supernotes import features as nf

TRUTHS = {
    "sample": "the sample's own intercepts (our scorer on all the 2021 sample's ratings, the held-out ones included)",
    "full_data": "the reference scorer's noteIntercept on the full public data (scoredNotes_2023-02-18), by noteId",
}
RULES = {
    "longest": "the longest note (characters)",
    "most_urls": "the note with the most links",
    "url_then_longest": "a note with a link, then the longest",
    "first_written": "the note written first",
    "last_written": "the note written last",
}
ALL_GROUPS = tuple(nf.GROUPS)
EMBEDDING = "embedding"
INPUTS_NOTE = (
    "The public 2021 data has no post text (only tweetIds), so the PHM's post input is empty here; "
    "a Supernote candidate has no stated reasons and no writer, so those inputs are 'unknown' for it."
)


@dataclass
class Posts:
    """What the P@1 table needs (the rules, the truths, the per-post picks): notes by index, the
    evaluated posts with their candidate notes, one array per truth. `Sample` (the public 2021
    sample) and `download_evaluation.DownloadPosts` (a download folder) are Posts."""

    note_ids: list[int]
    notes: list[nf.NoteInput | None]  # None: a note only seen in ratings (deleted)
    created_ms: np.ndarray
    truth: dict[str, np.ndarray]  # per note, nan where the truth has no intercept
    posts: list[tuple[str, np.ndarray]]  # evaluated posts and their candidate notes (sorted)
    embedder: str

    def describe(self) -> str:
        """The table's "Data:" line."""
        return f"{len(self.posts)} posts, {sum(n is not None for n in self.notes)} notes with text"

    truth_descriptions: ClassVar[dict[str, str]] = TRUTHS
    inputs_note: ClassVar[str] = INPUTS_NOTE


@dataclass
class Sample(Posts):
    """The public sample, read and scored once (shared by every seed and setting)."""

    data: scoring_tsv.LoadedData
    full: scoring.ScoringResult  # the scorer on all ratings
    author: list[str]
    by_post: dict[str, list[int]]
    emb: np.ndarray  # per note (zeros for notes without text)
    raw_features: np.ndarray  # per note, every non-writer feature group (writer: per fold)

    def describe(self) -> str:
        return (
            "public Community Notes sample, Jan-Mar 2021 (colin-fraser): "
            f"{len(self.data.ratings.value)} ratings, {sum(n is not None for n in self.notes)} notes with text"
        )


def read_reasons(notes_path: str | Path) -> dict[int, dict[str, str]]:
    """The notes file's reason and ordinal columns by noteId (the 2021 layout; absent columns are absent)."""
    wanted = (*nf.REASON_COLUMNS, *nf.ORDINALS)
    out: dict[int, dict[str, str]] = {}
    with open(notes_path, newline="", encoding="utf-8") as f:
        for rec in csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE):
            if (rec.get("noteId") or "").isdigit():
                out[int(rec["noteId"])] = {k: rec[k] for k in wanted if rec.get(k) is not None}
    return out


def read_reference(path: str | Path) -> dict[int, float]:
    """noteId -> noteIntercept of a reference scoredNotes file (rows without an intercept left out)."""
    out: dict[int, float] = {}
    with open(path, newline="", encoding="utf-8") as f:
        for rec in csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE):
            value = (rec.get("noteIntercept") or "").strip()
            if (rec.get("noteId") or "").isdigit() and value:
                out[int(rec["noteId"])] = float(value)
    return out


def cached_embedding(
    texts: Sequence[str], embed: Callable[[Sequence[str]], np.ndarray], embedder: str, cache_dir: Path | None
) -> np.ndarray:
    """Embed once per (embedder, texts) and keep the vectors in `cache_dir` (an .npy file)."""
    key = hashlib.sha256("\x00".join([embedder, *texts]).encode()).hexdigest()[:16]
    path = cache_dir / f"{embedder}-{key}.npy" if cache_dir else None
    if path is not None and path.exists():
        return np.load(path)
    vectors = np.asarray(embed(list(texts)), dtype=np.float32)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        np.save(path, vectors)
    return vectors


def load_sample(
    notes_path: str | Path, ratings_path: str | Path, reference_path: str | Path | None, *,
    embed: Callable[[Sequence[str]], np.ndarray], embedder: str, cache_dir: Path | None = None,
) -> Sample:  # fmt: skip
    data = scoring_tsv.load(notes_path, ratings_path)
    n = data.meta.n_notes
    full = scoring.score(data.ratings, data.meta, len(data.participant_ids), evaluation.OFFLINE_SCORING)
    index = {note_id: i for i, note_id in enumerate(data.note_ids)}
    reasons = read_reasons(notes_path)
    notes: list[nf.NoteInput | None] = [None] * n
    author, created = [""] * n, np.zeros(n, dtype=np.int64)
    by_post: dict[str, list[int]] = defaultdict(list)
    for row in cio.read_notes(notes_path):
        if isinstance(row, cio.Skipped) or row.note_id not in index:
            continue
        i = index[row.note_id]
        notes[i] = nf.NoteInput(row.summary, row.classification, reasons.get(row.note_id))
        author[i], created[i] = row.author_id, row.created_at_ms
        if row.tweet_id:
            by_post[row.tweet_id].append(i)
    truth = {"sample": np.asarray(full.note_intercept, dtype=float)}
    reference = read_reference(reference_path) if reference_path else {}
    truth["full_data"] = np.array([reference.get(nid, np.nan) for nid in data.note_ids], dtype=float)
    if not reference:
        del truth["full_data"]
    has_text = np.array([nt is not None for nt in notes])
    posts = []
    for post in sorted(by_post):
        members = np.array(sorted(by_post[post]))
        scored = [members[~np.isnan(t[members]) & has_text[members]] for t in truth.values()]
        if any(len(s) >= 2 for s in scored):
            posts.append((post, np.array(sorted(set(np.concatenate(scored).tolist())))))
    with_text = np.flatnonzero(has_text)
    emb_rows = cached_embedding([notes[i].text for i in with_text], embed, embedder, cache_dir)  # type: ignore[union-attr]
    emb = np.zeros((n, emb_rows.shape[1]), dtype=np.float32)
    emb[with_text] = emb_rows
    base_groups = [g for g in ALL_GROUPS if g != "writer"]
    raw = np.zeros((n, len(nf.feature_names(base_groups))), dtype=np.float32)
    raw[with_text] = nf.matrix([notes[i] for i in with_text], base_groups)  # type: ignore[misc]
    return Sample(
        note_ids=data.note_ids, notes=notes, created_ms=created, truth=truth, posts=posts, embedder=embedder,
        data=data, full=full, author=author, by_post=dict(by_post), emb=emb, raw_features=raw,
    )  # fmt: skip


# --- rules -------------------------------------------------------------------------------------


def rule_scores(sample: Posts, rule: str, candidates: np.ndarray) -> np.ndarray:
    """A rule's score for each candidate (the highest is picked; ties are shared, see `expected_hit`)."""
    notes = [sample.notes[i] for i in candidates]
    length = np.array([len(n.text) if n else 0 for n in notes], dtype=float)
    urls = np.array([len(nf.note_links(n)) if n else 0 for n in notes], dtype=float)
    created = sample.created_ms[candidates].astype(float)
    if rule == "longest":
        return length
    if rule == "most_urls":
        return urls
    if rule == "url_then_longest":
        return (urls > 0) * 1e6 + length
    if rule == "first_written":
        return -created
    if rule == "last_written":
        return created
    raise ValueError(f"unknown rule {rule!r}")


def expected_hit(scores: np.ndarray, truth: np.ndarray) -> float:
    """1 when the highest score is the truth's best note; with k notes tied for the highest score, a
    pick among them at random is right with probability (best among them) / k."""
    top = np.flatnonzero(scores == scores.max())
    return float(np.isin(int(np.argmax(truth)), top)) / len(top)


# --- one seed ----------------------------------------------------------------------------------


@dataclass
class Setting:
    """What the PHM sees and how it is trained (the same for every fold)."""

    groups: tuple[str, ...] = ALL_GROUPS
    embedding: bool = True
    epochs: int = 20
    validation: float = 0.15  # share of the training notes for early stopping (inside the training folds)
    weight_decay: float = 1e-4
    dropout: float = 0.2
    hidden: int = phm.HIDDEN
    ensemble: int = 1  # PHMs per fold (different seeds), their probabilities averaged
    draws: int = jury.DEFAULT_DRAWS  # jury draws per candidate (each: new jurors, new ratings)

    def label(self) -> str:
        parts = ([EMBEDDING] if self.embedding else []) + list(self.groups)
        return " + ".join(parts) or "rater parameters only"

    def learner(self) -> str:
        """How the per-rater probability is made and the jury drawn, in words."""
        models = "one PHM" if self.ensemble == 1 else f"the mean of {self.ensemble} PHMs (different seeds)"
        return f"{models} per fold; {self.draws} jury draws per candidate"


@dataclass
class SeedRun:
    seed: int
    fold_of: dict[str, int]
    scores: dict[str, dict[int, float]]  # post -> note index -> the jury's intercept
    auc_per_fold: list[float]  # on the fold's held-out ratings
    auc: float  # pooled over the folds' held-out ratings
    train_seconds: float
    jury_seconds: float
    phm_inputs: list[str] = field(default_factory=list)


@dataclass
class SeedTally:
    """A seed's folds as they finish (both evaluations' fold loops): the jury's intercepts, the
    held-out AUC per fold and pooled over the folds, and the time spent."""

    scores: dict[str, dict[int, float]] = field(default_factory=dict)
    aucs: list[float] = field(default_factory=list)
    pooled_p: list[np.ndarray] = field(default_factory=list)
    pooled_y: list[np.ndarray] = field(default_factory=list)
    train_seconds: float = 0.0
    jury_seconds: float = 0.0
    inputs: list[str] = field(default_factory=list)

    def add_auc(self, p_fold: np.ndarray, y_fold: np.ndarray) -> float:
        """The fold's AUC on its held-out ratings (P(Helpful) against Helpful), kept for the pool."""
        self.aucs.append(round(phm.auc(p_fold, y_fold), 4))
        self.pooled_p.append(p_fold)
        self.pooled_y.append(y_fold)
        return self.aucs[-1]

    def run(self, seed: int, fold_of: dict[str, int]) -> SeedRun:
        all_p = np.concatenate(self.pooled_p) if self.pooled_p else np.zeros(0)
        all_y = np.concatenate(self.pooled_y) if self.pooled_y else np.zeros(0, dtype=bool)
        return SeedRun(
            seed, fold_of, self.scores, self.aucs, round(phm.auc(all_p, all_y), 4), round(self.train_seconds, 2),
            round(self.jury_seconds, 3), self.inputs,
        )  # fmt: skip


def writer_features(sample: Sample, intercept: np.ndarray, usable: np.ndarray) -> np.ndarray:
    """Per note, the writer's record: the writer's `usable` notes written strictly before it, with
    the given intercepts (nan: none)."""
    out = np.zeros((len(sample.notes), len(nf.WRITER)), dtype=np.float32)
    by_author: dict[str, list[int]] = defaultdict(list)
    for i, a in enumerate(sample.author):
        if a:
            by_author[a].append(i)
    for members in by_author.values():
        members.sort(key=lambda i: sample.created_ms[i])
        for i in members:
            earlier = [intercept[j] for j in members if usable[j] and sample.created_ms[j] < sample.created_ms[i]]
            values = nf.writer_features(nf.writer_record(earlier))
            out[i] = [values[k] for k in nf.WRITER]
    return out


def helpful_probability(
    model: phm.PHM | phm.PHMEnsemble, emb: np.ndarray, feats: np.ndarray, note: np.ndarray, rater_intercept: np.ndarray,
    rater_factor: np.ndarray,
) -> np.ndarray:  # fmt: skip
    """The PHM's P(Helpful) for each rating (`note` indexes `emb` and `feats`; the rater's
    parameters per rating), one forward pass per note."""
    out = np.empty(len(note))
    for i in np.unique(note):
        at = note == i
        out[at] = model.probabilities(emb[[i]], None, rater_intercept[at], rater_factor[at], feats[[i]])[0, :, 0]
    return out


def jury_for_posts(
    model: phm.PHM | phm.PHMEnsemble, members: Sequence[tuple[str, np.ndarray]], emb: np.ndarray, feats: np.ndarray,
    pool_intercept: np.ndarray, pool_factor: np.ndarray, *, mu: float, ratings_per_note: float, jury_size: int,
    seed: int, fold: int, draws: int = jury.DEFAULT_DRAWS,
) -> dict[str, dict[int, float]]:  # fmt: skip
    """The jury's intercept for every candidate of each (post, candidate indexes) of a held-out
    fold: jurors drawn from the pool (the raters with a factor), their ratings drawn from the PHM
    and projected onto the scorer's scale (`jury.jury_scores`); the draw's seed from (seed, fold,
    the post's place in the fold)."""
    scores: dict[str, dict[int, float]] = {}
    for k, (post, g) in enumerate(members):

        def probs_for(jurors: np.ndarray, g: np.ndarray = g) -> np.ndarray:
            return model.probabilities(emb[g], None, pool_intercept[jurors], pool_factor[jurors], feats[g])

        js = jury.jury_scores(
            probs_for, pool_intercept, pool_factor, mu=mu, ratings_per_note=ratings_per_note, jury_size=jury_size,
            draws=draws, seed=seed * 100_000 + 1000 * fold + k,
        )  # fmt: skip
        scores[post] = {int(i): float(v) for i, v in zip(g, js.intercept, strict=True)}
    return scores


def post_folds(
    sample: Posts, seed: int, folds: int, max_posts: int | None = None
) -> tuple[list[tuple[str, np.ndarray]], dict[str, int]]:
    """The evaluated posts in the seed's order and each post's fold: the same posts for every seed
    (a subset by a fixed draw when `max_posts`), the seed decides the folds."""
    chosen = sorted(np.random.default_rng(0).permutation(len(sample.posts))[: max_posts or None])
    posts = [sample.posts[i] for i in np.random.default_rng(seed).permutation(chosen)]
    return posts, {post: k % max(folds, 1) for k, (post, _) in enumerate(posts)}


def held_notes(sample: Sample, members: Sequence[tuple[str, np.ndarray]]) -> np.ndarray:
    """Per note, whether it is held out: every note of the fold's posts, scored or not."""
    held = np.zeros(len(sample.notes), dtype=bool)
    for post, _ in members:
        held[sample.by_post[post]] = True
    return held


def run_seed(
    sample: Sample, *, seed: int, folds: int = 5, setting: Setting | None = None, jury_size: int = 200,
    max_posts: int | None = None, held_out_values: Callable[[np.ndarray, np.ndarray], np.ndarray] | None = None,
) -> SeedRun:  # fmt: skip
    """Folds by post (a seeded permutation); per fold: scorer, writer records and PHM without the
    fold's posts, then the jury's intercept for every candidate of the fold's posts.

    `held_out_values(values, is_held_out)`: replaces the rating values of held-out posts before
    anything is fitted (the leakage test shuffles them; the picks must not change)."""
    setting = setting or Setting()
    ratings = sample.data.ratings
    values = ratings.value
    n_raters = len(sample.data.participant_ids)
    posts, fold_of = post_folds(sample, seed, folds, max_posts)
    base_cols = nf.feature_names([g for g in setting.groups if g != "writer"])
    all_base = nf.feature_names([g for g in ALL_GROUPS if g != "writer"])
    base = sample.raw_features[:, [all_base.index(c) for c in base_cols]]
    emb = sample.emb if setting.embedding else np.zeros((len(sample.notes), 1), dtype=np.float32)
    tally = SeedTally()
    for f in range(max(folds, 1)):
        members = [(post, g) for post, g in posts if fold_of[post] == f]
        if not members:
            continue
        held = held_notes(sample, members)
        held_rating = held[ratings.note]
        fold_values = held_out_values(values, held_rating) if held_out_values else values
        keep = ~held_rating
        label = np.where(fold_values == 1.0, 0, np.where(fold_values == 0.5, 1, 2))
        fit = scoring.score(
            scoring.Ratings(ratings.rater[keep], ratings.note[keep], fold_values[keep]), sample.data.meta, n_raters,
            evaluation.OFFLINE_SCORING,
        )  # fmt: skip
        ri, rf = fit.rater_intercept, fit.rater_factor
        cols, names = [base], list(base_cols)
        if "writer" in setting.groups:
            cols.append(writer_features(sample, np.asarray(fit.note_intercept), ~held))
            names += list(nf.WRITER)
        feats = np.concatenate(cols, axis=1)
        usable = keep & ~np.isnan(rf[ratings.rater])
        training = phm.TrainingData(
            emb, np.zeros_like(emb), np.zeros(len(emb), dtype=np.float32), ratings.note[usable],
            ri[ratings.rater[usable]], rf[ratings.rater[usable]], label[usable], feats, names,
        )  # fmt: skip
        model = phm.train_ensemble(
            training, members=setting.ensemble, embedder=sample.embedder if setting.embedding else "none",
            holdout=0.0, trained_on=f"public 2021 sample, fold {f} of {folds} held out (seed {seed})",
            epochs=setting.epochs, validation=setting.validation, weight_decay=setting.weight_decay,
            dropout=setting.dropout, hidden=setting.hidden, seed=seed * 100 + f,
        )  # fmt: skip
        tally.inputs = model.meta.inputs
        tally.train_seconds += sum(m.meta.train_seconds for m in model.members)
        # AUC on the held-out posts' ratings (raters with parameters from the training folds).
        rows = np.flatnonzero(held_rating & ~np.isnan(rf[ratings.rater]) & (label != 1))
        raters = ratings.rater[rows]
        p_fold = helpful_probability(model, emb, feats, ratings.note[rows], ri[raters], rf[raters])
        tally.add_auc(p_fold, label[rows] == 0)
        pool = np.flatnonzero(~np.isnan(rf))
        started = time.monotonic()
        tally.scores.update(
            jury_for_posts(
                model, members, emb, feats, ri[pool], rf[pool], mu=fit.mu,
                ratings_per_note=float(fit.diagnostics.get("ratings_per_note", 1.0)), jury_size=jury_size,
                seed=seed, fold=f, draws=setting.draws,
            )
        )  # fmt: skip
        tally.jury_seconds += time.monotonic() - started
    return tally.run(seed, fold_of)


# --- P@1 per truth -----------------------------------------------------------------------------


def truth_candidates(sample: Posts, truth: str, candidates: np.ndarray) -> np.ndarray:
    return candidates[~np.isnan(sample.truth[truth][candidates])]


def jury_hits(sample: Posts, run: SeedRun, truth: str) -> dict[str, float]:
    """Per evaluated post of this truth (≥ 2 notes with its intercept): 1 when the jury's top note
    among them is the truth's best."""
    out = {}
    for post, candidates in sample.posts:
        if post not in run.scores:
            continue
        c = truth_candidates(sample, truth, candidates)
        if len(c) >= 2:
            s = np.array([run.scores[post][int(i)] for i in c])
            out[post] = expected_hit(s, sample.truth[truth][c])
    return out


def rule_hits(sample: Posts, rule: str, truth: str, posts: Sequence[str]) -> dict[str, float]:
    wanted = set(posts)
    out = {}
    for post, candidates in sample.posts:
        if post in wanted:
            c = truth_candidates(sample, truth, candidates)
            out[post] = expected_hit(rule_scores(sample, rule, c), sample.truth[truth][c])
    return out


def per_post(sample: Posts, run: SeedRun) -> list[dict[str, Any]]:
    """Every held-out post: its candidates (noteIds the jury scored), the jury's pick among them,
    the jury's intercepts, and the pick under each truth (among the notes that truth scores)."""
    rows = []
    for post, candidates in sample.posts:
        if post not in run.scores:
            continue
        s = [run.scores[post][int(i)] for i in candidates]
        by_truth = {}
        for truth in sample.truth:
            c = truth_candidates(sample, truth, candidates)
            if len(c) >= 2:
                pick = c[int(np.argmax([run.scores[post][int(i)] for i in c]))]
                best = c[int(np.argmax(sample.truth[truth][c]))]
                by_truth[truth] = {"candidates": [str(sample.note_ids[i]) for i in c],
                                   "picked": str(sample.note_ids[pick]), "best": str(sample.note_ids[best])}  # fmt: skip
        rows.append({
            "post": post,
            "candidates": [str(sample.note_ids[i]) for i in candidates],
            "picked": str(sample.note_ids[candidates[int(np.argmax(s))]]),
            "jury_intercepts": [round(v, 4) for v in s],
            "fold": run.fold_of[post],
            "truths": by_truth,
        })  # fmt: skip
    return rows


def _mean_sd(xs: Sequence[float]) -> tuple[float, float]:
    a = np.asarray(xs, dtype=float)
    return float(a.mean()), float(a.std(ddof=1)) if len(a) > 1 else 0.0


def summarise(sample: Posts, runs: Sequence[SeedRun], setting: Setting) -> dict[str, Any]:
    """The table: per truth, the jury over the seeds (mean, SD, Wilson 95 % at the mean), random,
    each rule, and the paired difference jury - best rule (per seed; per post over the seeds)."""
    truths = []
    for truth, description in sample.truth_descriptions.items():
        if truth not in sample.truth:
            continue
        per_seed = [jury_hits(sample, run, truth) for run in runs]
        posts = sorted(set.intersection(*(set(h) for h in per_seed)))
        n = len(posts)
        if n == 0:
            continue
        p_seed = [float(np.mean([h[p] for p in posts])) for h in per_seed]
        mean, sd = _mean_sd(p_seed)
        hits_of = {rule: rule_hits(sample, rule, truth, posts) for rule in RULES}
        p_rule = {rule: round(float(np.mean([hits_of[rule][q] for q in posts])), 4) for rule in RULES}
        rules = {r: {"p_at_1": p, "ci95": [round(x, 4) for x in comparison.wilson_interval(p * n, n)]}
                 for r, p in p_rule.items()}  # fmt: skip
        best_rule = max(p_rule, key=lambda r: p_rule[r])
        rule_hit = hits_of[best_rule]
        diff_seed = [p - p_rule[best_rule] for p in p_seed]
        # Posts are the independent units: each post's jury hit averaged over the seeds, minus the rule's.
        d = np.array([np.mean([h[p] for h in per_seed]) - rule_hit[p] for p in posts])
        se = float(d.std(ddof=1) / math.sqrt(n)) if n > 1 else float("nan")
        low, high = float(d.mean()) - 1.96 * se, float(d.mean()) + 1.96 * se
        candidates = {post: len(truth_candidates(sample, truth, c)) for post, c in sample.posts}
        truths.append({
            "truth": truth,
            "description": description,
            "n_posts": n,
            "random_p_at_1": round(float(np.mean([1 / candidates[p] for p in posts])), 4),
            "jury": {
                "p_at_1_mean": round(mean, 4), "p_at_1_sd": round(sd, 4),
                "ci95": [round(x, 4) for x in comparison.wilson_interval(mean * n, n)],
                "per_seed": [round(p, 4) for p in p_seed],
            },
            "rules": rules,
            "best_rule": best_rule,
            "paired_difference": {
                "rule": best_rule,
                "per_seed": [round(x, 4) for x in diff_seed],
                "mean": round(float(d.mean()), 4),
                "ci95": [round(low, 4), round(high, 4)],
                "distinguishable_from_zero": bool(low > 0 or high < 0),
            },
        })  # fmt: skip
    aucs = [run.auc for run in runs]
    auc_mean, auc_sd = _mean_sd(aucs)
    return {
        "data": sample.describe(),
        "setting": setting.label(),
        "learner": setting.learner(),
        "phm_inputs": runs[0].phm_inputs if runs else [],
        "inputs_note": sample.inputs_note,
        "embedder": sample.embedder,
        "seeds": [run.seed for run in runs],
        "folds": len(runs[0].auc_per_fold) if runs else 0,
        "auc_mean": round(auc_mean, 4),
        "auc_sd": round(auc_sd, 4),
        "auc_per_seed": aucs,
        "truths": truths,
        "rules": RULES,
        "train_seconds": round(sum(r.train_seconds for r in runs), 1),
        "jury_seconds": round(sum(r.jury_seconds for r in runs), 1),
    }


# --- ablation and tables -----------------------------------------------------------------------


def ablation_settings(base: Setting) -> list[Setting]:
    """The embedding alone (the PHM's old inputs), each group added to it, all of them, all but one
    group, and the features without the embedding: what each input adds."""
    out = [replace(base, groups=(), embedding=True)]
    out += [replace(base, groups=(g,), embedding=True) for g in ALL_GROUPS]
    out.append(replace(base, groups=ALL_GROUPS, embedding=True))
    out += [replace(base, groups=tuple(x for x in ALL_GROUPS if x != g), embedding=True) for g in ALL_GROUPS]
    out.append(replace(base, groups=ALL_GROUPS, embedding=False))
    return out


def ablation_row(setting: Setting, summary: dict[str, Any]) -> dict[str, Any]:
    return {
        "setting": setting.label(),
        "learner": setting.learner(),
        "auc_mean": summary["auc_mean"],
        "auc_sd": summary["auc_sd"],
        "p_at_1": {t["truth"]: [t["jury"]["p_at_1_mean"], t["jury"]["p_at_1_sd"]] for t in summary["truths"]},
    }


def _pct(x: float) -> str:
    return f"{x:.3f}"


def table_lines(summary: dict[str, Any]) -> list[str]:
    """The one table (markdown): per truth, the jury over the seeds, random and each rule; then the
    paired difference jury - best rule."""
    seeds = len(summary["seeds"])
    lines = [
        f"Data: {summary['data']}. PHM inputs: {summary['setting']} ({summary['embedder']}); "
        f"{summary.get('learner', 'one PHM per fold')}; "
        f"{summary['folds']} folds by post; seeds {', '.join(map(str, summary['seeds']))}.",
        f"Held-out AUC (ratings of the held-out posts' notes, helpful vs not helpful): "
        f"{_pct(summary['auc_mean'])} ± {_pct(summary['auc_sd'])} (SD over {seeds} seeds).",
        "",
        "| truth | posts | random | jury P@1 (mean ± SD over seeds) [Wilson 95 %] | "
        + " | ".join(RULES) + " |",
        "|---|---|---|---|" + "---|" * len(RULES),
    ]  # fmt: skip
    for t in summary["truths"]:
        j = t["jury"]
        cells = [
            f"{_pct(t['rules'][r]['p_at_1'])} [{_pct(t['rules'][r]['ci95'][0])}–{_pct(t['rules'][r]['ci95'][1])}]"
            for r in RULES
        ]
        lines.append(
            f"| {t['truth']} | {t['n_posts']} | {_pct(t['random_p_at_1'])} | **{_pct(j['p_at_1_mean'])}** ± "
            f"{_pct(j['p_at_1_sd'])} [{_pct(j['ci95'][0])}–{_pct(j['ci95'][1])}] | " + " | ".join(cells) + " |"
        )
    lines += ["", "| truth | jury − best rule | per seed | mean, 95 % CI over posts | distinguishable from 0? |",
              "|---|---|---|---|---|"]  # fmt: skip
    for t in summary["truths"]:
        d = t["paired_difference"]
        verdict = "yes" if d["distinguishable_from_zero"] else "no: within the noise of this many posts"
        lines.append(
            f"| {t['truth']} | {d['rule']} | {', '.join(f'{x:+.3f}' for x in d['per_seed'])} | "
            f"{d['mean']:+.3f} [{d['ci95'][0]:+.3f}, {d['ci95'][1]:+.3f}] | {verdict} |"
        )
    return lines


def ablation_lines(rows: Sequence[dict[str, Any]]) -> list[str]:
    truths = list(rows[0]["p_at_1"]) if rows else []
    lines = ["| PHM inputs | held-out AUC | " + " | ".join(f"P@1 {t}" for t in truths) + " |",
             "|---|---|" + "---|" * len(truths)]  # fmt: skip
    for r in rows:
        cells = [f"{r['p_at_1'][t][0]:.3f} ± {r['p_at_1'][t][1]:.3f}" for t in truths]
        lines.append(f"| {r['setting']} | {r['auc_mean']:.3f} ± {r['auc_sd']:.3f} | " + " | ".join(cells) + " |")
    return lines
