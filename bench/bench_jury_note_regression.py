"""How much do a note's own inputs say about the crowd's verdict, without the jury?

A ridge regression from a note's inputs (the MiniLM embedding, the note features, or both) to its
intercept, fitted per fold on the training posts' notes only (the intercepts of the scorer refit
without the fold's posts, the writers' records from the training folds), then used to rank each
held-out post's notes. Same posts, seeds, folds and truths as `evaluate_jury_sample`, so each
row reads beside the jury's P@1 there. The ridge penalty is chosen inside the training notes by
leave-one-out error (closed form), never on held-out posts.

    DEBUG=1 HF_HUB_OFFLINE=1 flock /tmp/heavy.lock .venv/bin/python bench/bench_jury_note_regression.py \\
        [--seeds 0 1 2 3 4] [--cache-dir DIR]

Prints a markdown table: P@1 per input set and truth, mean ± SD over the seeds, and per seed."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "crowdnotes_site.settings")
ALPHAS = np.logspace(-1, 4, 11)


def ridge(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, float, float]:
    """Weights, input mean, target mean and the penalty with the lowest leave-one-out error."""
    mx, my = x.mean(axis=0), float(y.mean())
    u, s, vt = np.linalg.svd(x - mx, full_matrices=False)
    uty = u.T @ (y - my)

    def loo(alpha: float) -> float:
        shrink = s**2 / (s**2 + alpha)
        hat = (u**2) @ shrink + 1.0 / len(y)
        return float(np.mean(((y - my - u @ (shrink * uty)) / (1.0 - hat)) ** 2))

    alpha = min(ALPHAS, key=loo)
    return vt.T @ ((s / (s**2 + alpha)) * uty), mx, my, float(alpha)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--cache-dir", type=Path, default=None, help="keeps the notes' MiniLM vectors")
    args = parser.parse_args()

    import django

    django.setup()
    from django.conf import settings

    from crowdnotes_site.lib.communitynotes import scoring
    from crowdnotes_site.lib.communitynotes.research import jury_sample as se
    from crowdnotes_site.lib.communitynotes.supernotes import evaluation
    from evidence.embedding import MINILM
    from notes.supernotes.services import embedder

    data = settings.SHARED_DATA_DIR / "communitynotes"
    sample = se.load_sample(
        data / "colin-fraser" / "notes-00000.tsv", data / "colin-fraser" / "ratings-00000.tsv",
        data / "shiruken" / "scoredNotes_2023-02-18.tsv", embed=embedder(MINILM), embedder=MINILM,
        cache_dir=args.cache_dir,
    )  # fmt: skip
    ratings = sample.data.ratings
    has_text = np.array([n is not None for n in sample.notes])
    inputs = ("embedding", "features", "embedding + features")
    hits: dict[tuple[str, str], list[float]] = {(i, t): [] for i in inputs for t in sample.truth}
    alphas: list[float] = []
    for seed in args.seeds:
        order, fold_of = se.post_folds(sample, seed, args.folds)
        seed_hits: dict[tuple[str, str], list[float]] = {key: [] for key in hits}
        for f in range(args.folds):
            members = [(post, g) for post, g in order if fold_of[post] == f]
            held = se.held_notes(sample, members)
            keep = ~held[ratings.note]
            fit = scoring.score(
                scoring.Ratings(ratings.rater[keep], ratings.note[keep], ratings.value[keep]), sample.data.meta,
                len(sample.data.participant_ids), evaluation.OFFLINE_SCORING,
            )  # fmt: skip
            intercept = np.asarray(fit.note_intercept, dtype=float)
            feats = np.concatenate([sample.raw_features, se.writer_features(sample, intercept, ~held)], axis=1)
            feats = (feats - feats.mean(axis=0)) / (feats.std(axis=0) + 1e-6)
            target = ~held & has_text & ~np.isnan(intercept)
            for name, x in zip(inputs, (sample.emb, feats, np.concatenate([sample.emb, feats], axis=1)), strict=True):
                x = x.astype(float)
                w, mx, my, alpha = ridge(x[target], intercept[target])
                alphas.append(alpha)
                predicted = (x - mx) @ w + my
                for truth in sample.truth:
                    for _, g in members:
                        c = se.truth_candidates(sample, truth, g)
                        if len(c) >= 2:
                            seed_hits[(name, truth)].append(se.expected_hit(predicted[c], sample.truth[truth][c]))
        for key, values in seed_hits.items():
            hits[key].append(float(np.mean(values)))
            posts = len(values)
            if key[0] == inputs[0]:
                print(f"seed {seed}, truth {key[1]}: {posts} posts", file=sys.stderr)
    print(f"Ridge from a note's inputs to its intercept; seeds {', '.join(map(str, args.seeds))}, {args.folds} "
          f"folds by post; penalties chosen: {', '.join(f'{a:g}' for a in sorted(set(alphas)))}.\n")  # fmt: skip
    truths = list(sample.truth)
    print("| inputs | " + " | ".join(f"P@1 {t} (mean ± SD; per seed)" for t in truths) + " |")
    print("|---|" + "---|" * len(truths))
    for name in inputs:
        cells = []
        for t in truths:
            v = np.array(hits[(name, t)])
            sd = v.std(ddof=1) if len(v) > 1 else 0.0
            cells.append(f"{v.mean():.3f} ± {sd:.3f}; " + ", ".join(f"{x:.3f}" for x in v))
        print(f"| {name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
