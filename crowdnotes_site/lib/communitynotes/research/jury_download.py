"""The jury on a whole download folder (pure: no Django): `evaluate_jury_download FOLDER`.

Reads what `manage.py research_download FOLDER` leaves: FOLDER/columnar/notes-*.parquet and
ratings-*.parquet (and the rest of the columnar form, for the scorer), and the research run's
scored notes, FOLDER/research/scored_notes.tsv.

Posts and truth. A candidate is a note of the notes file with a non-empty text and a
`coreNoteIntercept` in scored_notes.tsv; a post (tweetId) with >= 2 candidates is eligible. The
evaluated posts are the `max_posts` eligible tweetIds with the smallest
`download_training.note_hash(tweetId, posts_seed)` (all of them when fewer): the same posts for every
evaluation seed. The truth (`TRUTH_DESCRIPTION`) is that intercept: the scorer on
ALL the download's ratings, the held-out posts' ratings included (what the PHM never saw).

Folds by post (a permutation by the evaluation seed; by default one fold: every evaluated post is
held out at once, and the model is trained on the rest of the download). For a fold, nothing of
its posts reaches training:
- held out: every note of the fold's posts in the notes file (with text or not, scored or not);
- the scorer (the research run's, same config) is fitted again on the columnar ratings without the
  held-out notes' ratings: the jurors' parameters, mu, the ratings per note, and the rater
  parameters the training sample joins all come from this fit, not from helpfulness_scores.tsv;
- the PHM is trained by `download_training.train` (its sample rule, seeded by the evaluation
  seed) over the notes other than the held-out ones.
Ratings of notes that are in no notes file cannot be placed on a post; they stay in the refit (no
candidate is among them). The fold's held-out AUC: the PHM's P(Helpful) on the held-out candidates'
ratings (raters with refit parameters), Helpful against Not helpful.

Jury: `sample_evaluation.jury_for_posts` (jurors drawn from the raters with a refit factor, their
ratings drawn from the PHM, projected with mu fixed); the P@1 table, the rules and the per-post
picks are `sample_evaluation`'s. The note embedding and features of the candidates are computed
once with the training's embedder and feature groups (`download_training.GROUPS`).
"""

from __future__ import annotations

import hashlib
import itertools
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from crowdnotes_site.lib.communitynotes import scoring
from crowdnotes_site.lib.communitynotes.data import columnar
from crowdnotes_site.lib.communitynotes.research import jury_sample as se
from crowdnotes_site.lib.communitynotes.research import phm_training as dt
from crowdnotes_site.lib.communitynotes.research import run as download
from crowdnotes_site.lib.communitynotes.supernotes import features as nf
from crowdnotes_site.lib.communitynotes.supernotes import jury

TRUTH = "download"
TRUTH_DESCRIPTION = (
    "the research run's coreNoteIntercept (FOLDER/research/scored_notes.tsv): the scorer on all the download's "
    "ratings, the held-out posts' ratings included (the PHM, the jurors' parameters and mu never saw them)"
)
SCORED_NOTES = "scored_notes.tsv"
INPUTS_NOTE = (
    "A download has no post text, so the PHM's post input is empty; the note inputs are the embedding and the "
    "groups sources, text, classification (download_training.GROUPS: the writer's record and stated reasons are "
    "left out)."
)


@dataclass(frozen=True)
class PostRule:
    max_posts: int = 2_000
    seed: int = 0

    def describe(self) -> str:
        return (
            f"posts: tweetIds with >= 2 notes that have a text and a coreNoteIntercept in scored_notes.tsv; the "
            f"{self.max_posts:,} with the smallest mix64(tweetId, seed={self.seed}) (the same for every evaluation "
            "seed)"
        )


@dataclass
class DownloadPosts(se.Posts):
    """The evaluated posts of a download: notes by index are the candidates of those posts."""

    folder: Path = Path()
    rule: PostRule = PostRule()
    post_notes: dict[str, np.ndarray] = field(default_factory=dict)  # every noteId of the post (held out with it)
    emb: np.ndarray = field(default_factory=lambda: np.zeros((0, 1), np.float32))  # per candidate
    feats: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), np.float32))  # per candidate, raw
    counts: dict[str, int] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)

    truth_descriptions: ClassVar[dict[str, str]] = {TRUTH: TRUTH_DESCRIPTION}
    inputs_note: ClassVar[str] = INPUTS_NOTE

    def describe(self) -> str:
        c = self.counts
        return (
            f"download {self.folder} ({c['ratings']:,} ratings, {c['notes']:,} notes): {len(self.posts):,} posts of "
            f"{c['eligible_posts']:,} with >= 2 candidates, {len(self.note_ids):,} candidate notes"
        )


def check_research(folder: Path) -> Path:
    """The scored notes of the research run on the current columnar form, or a DownloadError that
    says which step of `research_download` to run."""
    col, research = folder / "columnar", folder / "research"
    if not any(col.glob("notes-*.parquet")) or not any(col.glob("ratings-*.parquet")):
        raise dt.DownloadError(
            f"{folder}: no columnar notes-*.parquet / ratings-*.parquet under {col}; run "
            f"`manage.py research_download {folder}` (its convert step) first"
        )
    scored = research / SCORED_NOTES
    state = download.step_state(folder, "score")
    if not scored.exists() or state == "missing":
        raise dt.DownloadError(
            f"{folder}: no scored notes ({scored} is missing); run `manage.py research_download {folder} --only score` "
            "(its score step writes them) first"
        )
    if state == "stale":
        raise dt.DownloadError(
            f"{folder}: {scored} is from an earlier columnar form (the download changed since); run "
            f"`manage.py research_download {folder} --only score` again"
        )
    dt.check_folder(folder)  # helpfulness_scores.tsv: the same step writes it
    return scored


def read_intercepts(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """noteId (sorted) and coreNoteIntercept of the scored notes that have one."""
    table = pacsv.read_csv(
        path,
        parse_options=pacsv.ParseOptions(delimiter="\t", quote_char=False),
        convert_options=pacsv.ConvertOptions(
            column_types={"noteId": pa.int64(), "coreNoteIntercept": pa.float64()},
            include_columns=["noteId", "coreNoteIntercept"],
        ),
    )
    table = table.filter(pc.is_valid(table["coreNoteIntercept"]))
    ids = np.asarray(table["noteId"].to_numpy(), dtype=np.int64)
    values = np.asarray(table["coreNoteIntercept"].to_numpy(), dtype=float)
    order = np.argsort(ids, kind="stable")
    ids, values = ids[order], values[order]
    first = np.r_[True, ids[1:] != ids[:-1]] if len(ids) else np.zeros(0, bool)
    return ids[first], values[first]


def load_posts(
    folder: str | Path, rule: PostRule, *, embed: Callable[[Sequence[str]], np.ndarray], embedder: str,
    say: Callable[[str], None] = lambda _m: None,
) -> DownloadPosts:  # fmt: skip
    """The evaluated posts, their candidates' texts, truth, embedding and features (streamed over
    the notes' row groups: ids first, texts only of the candidates)."""
    folder = Path(folder)
    scored = check_research(folder)
    notes_paths = sorted((folder / "columnar").glob("notes-*.parquet"))
    t0 = time.perf_counter()
    ids, posts_of, text_ok = [], [], []
    for b in dt._row_groups(notes_paths, ["note_id", "tweet_id", "summary"]):
        ids.append(np.asarray(b.column(0).to_numpy(), dtype=np.int64))
        posts_of.append(np.asarray(b.column(1).fill_null(0).to_numpy(), dtype=np.int64))
        text_ok.append(
            np.asarray(pc.greater(pc.utf8_length(pc.utf8_trim_whitespace(b.column(2).fill_null(""))), 0), dtype=bool)
        )
    note_id, tweet, has_text = (np.concatenate(x) if x else np.zeros(0) for x in (ids, posts_of, text_ok))
    note_id, first = np.unique(note_id.astype(np.int64), return_index=True)  # a repeated noteId: its first row
    tweet, has_text = tweet[first].astype(np.int64), has_text[first].astype(bool)
    scored_ids, scored_values = read_intercepts(scored)
    at = dt._lookup(scored_ids, note_id)
    intercept = np.where(at >= 0, scored_values[at.clip(min=0)], np.nan)
    candidate = has_text & ~np.isnan(intercept) & (tweet != 0)
    post_ids, per_post = np.unique(tweet[candidate], return_counts=True)
    eligible = post_ids[per_post >= 2]
    chosen = dt.choose_ids(eligible, rule.max_posts, rule.seed)
    in_chosen = dt._lookup(chosen, tweet) >= 0
    cand = np.flatnonzero(candidate & in_chosen)  # sorted by noteId
    cand_ids = note_id[cand]
    # The candidates' texts and classification (second pass, those rows only).
    texts: list[str | None] = [None] * len(cand)
    nm = np.zeros(len(cand), dtype=bool)
    created = np.zeros(len(cand), dtype=np.int64)
    for b in dt._row_groups(notes_paths, ["note_id", "not_misleading", "summary", "created_at_ms"]):
        idx = dt._lookup(cand_ids, np.asarray(b.column(0).to_numpy(), dtype=np.int64))
        rows = np.flatnonzero(idx >= 0)
        take = pa.array(rows)
        summaries = b.column(2).take(take).to_pylist()
        flags = np.asarray(b.column(1).take(take).to_numpy(zero_copy_only=False), dtype=bool)
        times = np.asarray(b.column(3).take(take).to_numpy(zero_copy_only=False), dtype=np.int64)
        for r, s, f, c in zip(idx[rows], summaries, flags, times, strict=True):
            if texts[r] is None:
                texts[r], nm[r], created[r] = s, f, c
    notes = [nf.NoteInput(t or "", "NOT_MISLEADING" if m else nf.MISLEADING) for t, m in zip(texts, nm, strict=True)]
    # Posts: candidates (indexes into cand_ids) and every note of the post.
    order = np.argsort(tweet[in_chosen], kind="stable")
    all_of_chosen_ids, all_of_chosen_posts = note_id[in_chosen][order], tweet[in_chosen][order]
    starts: list[int] = []
    if len(order):
        starts = np.flatnonzero(np.r_[True, all_of_chosen_posts[1:] != all_of_chosen_posts[:-1]]).tolist()
    post_notes = {
        str(all_of_chosen_posts[a]): all_of_chosen_ids[a:b] for a, b in itertools.pairwise([*starts, len(order)])
    }
    cand_post = tweet[cand]
    posts = [(str(p), np.flatnonzero(cand_post == p)) for p in chosen]
    seconds = {"notes": round(time.perf_counter() - t0, 2)}
    t = time.perf_counter()
    emb = np.asarray(embed([n.text for n in notes]), dtype=np.float32)
    seconds["embedding"] = round(time.perf_counter() - t, 2)
    t = time.perf_counter()
    feats = nf.columns(notes, nf.feature_names(dt.GROUPS)) if notes else np.zeros((0, 0), np.float32)
    seconds["features"] = round(time.perf_counter() - t, 2)
    ratings = sum(pq.ParquetFile(p).metadata.num_rows for p in sorted((folder / "columnar").glob("ratings-*.parquet")))
    counts = {
        "ratings": int(ratings),
        "notes": len(note_id),
        "notes_with_text": int(has_text.sum()),
        "notes_with_intercept": int((~np.isnan(intercept)).sum()),
        "candidate_notes": int(candidate.sum()),
        "eligible_posts": len(eligible),
        "posts": len(chosen),
        "held_out_notes": int(in_chosen.sum()),
    }
    say(f"posts: {len(chosen):,} of {len(eligible):,} eligible, {len(cand):,} candidates, "
        f"{counts['held_out_notes']:,} notes held out with them")  # fmt: skip
    return DownloadPosts(
        note_ids=[int(x) for x in cand_ids], notes=list(notes), created_ms=created,
        truth={TRUTH: intercept[cand]}, posts=posts, embedder=embedder, folder=folder.resolve(), rule=rule,
        post_notes=post_notes, emb=emb, feats=feats, counts=counts, seconds=seconds,
    )  # fmt: skip


# --- the scorer without the held-out notes -----------------------------------------------------


@dataclass
class Refit:
    """The scorer fitted without the held-out notes' ratings, and those ratings (for the AUC)."""

    raters: dt.RaterParameters  # raters with an intercept and a factor
    mu: float
    ratings_per_note: float
    held_note_id: np.ndarray  # per held-out rating (int64)
    held_intercept: np.ndarray  # its rater's refit parameters (nan: none)
    held_factor: np.ndarray
    held_value: np.ndarray  # 1.0 / 0.5 / 0.0
    ratings_fitted: int
    seconds: float


def refit(folder: Path, held_notes: np.ndarray, config: scoring.ScoringConfig | None = None) -> Refit:
    """The research run's scorer (`columnar.load`, `scoring.score`, the same default config) on the
    download's ratings without those of `held_notes` (noteIds).

    The held-out ratings are taken out first (a few hundred thousand); then `Ratings.keep_rows` drops
    them column by column, so the whole download's ratings are held once, as the research run's
    score step holds them, not twice (the full columns beside their kept copies)."""
    t0 = time.perf_counter()
    data = columnar.load(folder / "columnar")
    ids = np.asarray(data.note_ids, dtype=np.int64)
    held_index = np.zeros(len(ids), dtype=bool)
    held_index[np.flatnonzero(np.isin(ids, np.asarray(held_notes, dtype=np.int64)))] = True
    r = data.ratings
    keep = ~held_index[r.note]
    rows = np.flatnonzero(~keep)
    held_note_id, who, held_value = ids[r.note[rows]], r.rater[rows], np.asarray(r.value[rows], dtype=float)
    r.keep_rows(keep)  # the download's ratings held once (data.ratings is r), not beside a kept copy
    fit = scoring.score(r, data.meta, len(data.participant_ids), config)
    ri, rf = np.asarray(fit.rater_intercept), np.asarray(fit.rater_factor)
    with_factor = np.flatnonzero(~np.isnan(rf) & ~np.isnan(ri))
    people = data.participant_ids
    raters = (
        pa.array([people[u] for u in with_factor], pa.string()),
        ri[with_factor].astype(np.float32),
        rf[with_factor].astype(np.float32),
    )
    return Refit(
        raters, float(fit.mu), float(fit.diagnostics.get("ratings_per_note", 1.0)), held_note_id,
        ri[who].astype(np.float32), rf[who].astype(np.float32), held_value, len(r.rater),
        round(time.perf_counter() - t0, 2),
    )  # fmt: skip


# --- one seed ----------------------------------------------------------------------------------


@contextmanager
def one_torch_thread() -> Iterator[None]:
    """The jury's and the AUC's many small forward passes (C candidates x 200 jurors; one note's
    ratings) on one torch thread: passes this small lose more to the threads' coordination than
    they gain (bench/README.md, "The jury on the whole download")."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@dataclass
class Options:
    folds: int = 1
    jury_size: int = 200
    epochs: int = 4
    batch_size: int = 4096
    max_notes: int = dt.SampleRule().max_notes
    max_ratings: int = dt.SampleRule().max_ratings


class Evaluation:
    """One download's posts and every fitted thing keyed by its held-out notes (with one fold the
    scorer is fitted once for all the seeds)."""

    def __init__(
        self, posts: DownloadPosts, options: Options, *, embed: Callable[[Sequence[str]], np.ndarray],
        say: Callable[[str], None] = lambda _m: None,
    ) -> None:  # fmt: skip
        self.posts, self.options, self.embed, self.say = posts, options, embed, say
        self._refits: dict[str, Refit] = {}
        self.training: list[dict[str, Any]] = []

    def refit_for(self, held_notes: np.ndarray) -> Refit:
        key = hashlib.sha256(np.sort(held_notes).tobytes()).hexdigest()
        if key not in self._refits:
            self._refits.clear()  # one at a time: each holds the held-out ratings
            self.say(f"scorer without {len(held_notes):,} held-out notes: fitting")
            self._refits[key] = refit(self.posts.folder, held_notes)
            self.say(f"scorer refit: {self._refits[key].ratings_fitted:,} ratings in {self._refits[key].seconds:.1f} s")
        return self._refits[key]

    def run_seed(self, seed: int) -> se.SeedRun:
        p, o = self.posts, self.options
        order = np.random.default_rng(seed).permutation(len(p.posts))
        posts = [p.posts[i] for i in order]
        folds = max(o.folds, 1)
        fold_of = {post: k % folds for k, (post, _) in enumerate(posts)}
        tally = se.SeedTally()
        index = {nid: i for i, nid in enumerate(p.note_ids)}
        for f in range(folds):
            members = [(post, g) for post, g in posts if fold_of[post] == f]
            if not members:
                continue
            held = np.unique(np.concatenate([p.post_notes[post] for post, _ in members]))
            fit = self.refit_for(held)
            model = dt.train(
                p.folder, dt.SampleRule(o.max_notes, o.max_ratings, seed), embed=self.embed, embedder=p.embedder,
                epochs=o.epochs, batch_size=o.batch_size, say=self.say, exclude_notes=held, raters=fit.raters,
            )  # fmt: skip
            data = model.meta.extra["training_data"]
            data["raters"] = "the scorer fitted again without the held-out posts' notes' ratings"
            self.training.append({"seed": seed, "fold": f, "auc_training_side": model.meta.auc,
                                  "counts": data["counts"], "seconds": data["seconds"],
                                  "refit_seconds": fit.seconds})  # fmt: skip
            tally.inputs = model.meta.inputs
            tally.train_seconds += model.meta.train_seconds
            # AUC on the fold's candidates' held-out ratings (raters with refit parameters).
            at = np.array([index.get(int(n), -1) for n in fit.held_note_id], dtype=np.int64)
            fold_cands = np.zeros(len(p.note_ids), dtype=bool)
            for _, g in members:
                fold_cands[g] = True
            ok = (at >= 0) & ~np.isnan(fit.held_factor) & (fit.held_value != 0.5)
            ok[ok] = fold_cands[at[ok]]
            rows = np.flatnonzero(ok)
            with one_torch_thread():
                p_fold = se.helpful_probability(
                    model, p.emb, p.feats, at[rows], fit.held_intercept[rows], fit.held_factor[rows]
                )
            auc = tally.add_auc(p_fold, fit.held_value[rows] == 1.0)
            started = time.monotonic()
            _ids, pri, prf = fit.raters
            with one_torch_thread():
                tally.scores.update(
                    se.jury_for_posts(
                        model, members, p.emb, p.feats, pri.astype(float), prf.astype(float), mu=fit.mu,
                        ratings_per_note=fit.ratings_per_note, jury_size=o.jury_size, seed=seed, fold=f,
                    )
                )  # fmt: skip
            tally.jury_seconds += time.monotonic() - started
            self.say(f"seed {seed} fold {f}: {len(members):,} posts, held-out AUC {auc:.3f}, "
                     f"jury {time.monotonic() - started:.1f} s")  # fmt: skip
        return tally.run(seed, fold_of)


def setting(options: Options) -> se.Setting:
    """The inputs as `sample_evaluation.Setting` labels them (the table's "PHM inputs")."""
    return se.Setting(groups=tuple(dt.GROUPS), embedding=True, epochs=options.epochs, validation=0.0)


def describe(
    posts: DownloadPosts, options: Options, evaluation: Evaluation, runs: Sequence[se.SeedRun]
) -> dict[str, Any]:
    """What the summary adds for a download: the post rule, the truth, the folds, the counts."""
    return {
        "folder": str(posts.folder),
        "post_rule": posts.rule.describe(),
        "truth": TRUTH_DESCRIPTION,
        "folds": (
            "one fold: every evaluated post held out at once, the model trained on the rest of the download"
            if options.folds <= 1
            else f"{options.folds} folds by post (a permutation by the seed)"
        ),
        "held_out": "every note of a held-out post (its ratings leave the scorer refit and the training sample)",
        "sample_rule": dt.SampleRule(options.max_notes, options.max_ratings, 0)
        .describe()
        .replace("seed=0", "seed=the evaluation seed"),
        "jury_size": options.jury_size,
        "picks_above_propose_threshold": {
            "threshold": jury.PROPOSE_MIN_INTERCEPT,
            "meaning": "posts whose jury pick scores above the threshold (the pick the app would propose when no "
            "better note exists); P@1 counts the pick whatever its score, as --sample does",
            "per_seed": [
                sum(max(s.values()) > jury.PROPOSE_MIN_INTERCEPT for s in run.scores.values()) for run in runs
            ],
        },
        "counts": posts.counts,
        "seconds": posts.seconds,
        "training": evaluation.training,
    }


def table_lines(summary: dict[str, Any]) -> list[str]:
    """sample_evaluation's table, after two lines that say which posts and which truth."""
    d = summary["download"]
    return [f"Posts: {d['post_rule']}. Folds: {d['folds']}.", f"Truth: {d['truth']}.", *se.table_lines(summary)]
