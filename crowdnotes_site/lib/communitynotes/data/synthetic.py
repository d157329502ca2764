"""Synthetic Community Notes data from a known latent model (tests and benchmarks).

Two rater camps with opposite factors; notes with varied intercepts and factors. Ratings are
drawn as Helpful / Somewhat / Not helpful from the model's prediction plus noise, so the
scorer should recover intercepts and factors (up to the regularisation shrinkage).
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

import numpy as np

START_MS = 1_700_000_000_000


@dataclass
class SyntheticData:
    rater: np.ndarray
    note: np.ndarray
    value: np.ndarray
    created_at_ms: np.ndarray
    n_raters: int
    n_notes: int
    true_rater_intercept: np.ndarray
    true_rater_factor: np.ndarray
    true_note_intercept: np.ndarray
    true_note_factor: np.ndarray
    note_created_at_ms: np.ndarray
    note_author: np.ndarray
    not_misleading: np.ndarray


def generate(
    n_ratings: int,
    *,
    ratings_per_rater: int = 40,
    ratings_per_note: int = 25,
    noise: float = 0.25,
    seed: int = 0,
) -> SyntheticData:
    rng = np.random.default_rng(seed)
    n_raters = max(n_ratings // ratings_per_rater, 20)
    n_notes = max(n_ratings // ratings_per_note, 10)
    camp = np.where(rng.random(n_raters) < 0.6, -1.0, 1.0)  # majority camp negative
    rater_factor = camp * rng.uniform(0.4, 1.0, n_raters)
    rater_intercept = rng.normal(0.0, 0.1, n_raters)
    note_intercept = rng.normal(0.05, 0.3, n_notes)
    note_factor = rng.normal(0.0, 0.5, n_notes)
    # Note and rater popularity vary, as on the live system.
    note_weight = rng.pareto(2.5, n_notes) + 1.0
    rater_weight = rng.pareto(2.5, n_raters) + 1.0
    note = rng.choice(n_notes, n_ratings, p=note_weight / note_weight.sum())
    rater = rng.choice(n_raters, n_ratings, p=rater_weight / rater_weight.sum())
    pairs = np.unique(rater.astype(np.int64) * n_notes + note)
    rater, note = pairs // n_notes, pairs % n_notes
    latent = (
        0.2
        + rater_intercept[rater]
        + note_intercept[note]
        + rater_factor[rater] * note_factor[note]
        + rng.normal(0.0, noise, len(pairs))
    )
    value = np.where(latent > 0.65, 1.0, np.where(latent > 0.35, 0.5, 0.0))
    note_created = START_MS + rng.integers(0, 30 * 86_400_000, n_notes)
    created = note_created[note] + rng.integers(0, 86_400_000, len(pairs))
    order = rng.permutation(len(pairs))
    return SyntheticData(
        rater=rater[order],
        note=note[order],
        value=value[order],
        created_at_ms=created[order],
        n_raters=n_raters,
        n_notes=n_notes,
        true_rater_intercept=rater_intercept,
        true_rater_factor=rater_factor,
        true_note_intercept=note_intercept,
        true_note_factor=note_factor,
        note_created_at_ms=note_created,
        note_author=rng.integers(0, n_raters, n_notes),
        not_misleading=rng.random(n_notes) < 0.05,
    )


def participant_id(index: int) -> str:
    return f"P{index:08d}"


def note_id(index: int) -> str:
    return str(1_500_000_000_000_000_000 + index)


LEVELS = {1.0: "HELPFUL", 0.5: "SOMEWHAT_HELPFUL", 0.0: "NOT_HELPFUL"}


def write_tsv(data: SyntheticData, outdir: Path) -> tuple[Path, Path]:
    """Write notes-00000.tsv and ratings-00000.tsv in the current public layout."""
    outdir.mkdir(parents=True, exist_ok=True)
    notes_path = outdir / "notes-00000.tsv"
    ratings_path = outdir / "ratings-00000.tsv"
    with notes_path.open("w", newline="") as fh:
        w = csv.writer(fh, delimiter="\t", lineterminator="\n")
        w.writerow(
            ["noteId", "noteAuthorParticipantId", "createdAtMillis", "tweetId", "classification",
             "summary"]
        )  # fmt: skip
        for i in range(data.n_notes):
            w.writerow(
                [note_id(i), participant_id(int(data.note_author[i])),
                 int(data.note_created_at_ms[i]), str(1_600_000_000_000_000_000 + i),
                 "NOT_MISLEADING" if data.not_misleading[i] else
                 "MISINFORMED_OR_POTENTIALLY_MISLEADING",
                 f"Synthetic note {i} https://example.org/{i}"]
            )  # fmt: skip
    with ratings_path.open("w", newline="") as fh:
        fh.write("noteId\traterParticipantId\tcreatedAtMillis\tversion\thelpfulnessLevel\tnotHelpfulIncorrect\n")
        levels = np.array(["NOT_HELPFUL", "SOMEWHAT_HELPFUL", "HELPFUL"])
        idx = (data.value * 2).astype(int)
        chunk = 200_000
        for start in range(0, len(data.value), chunk):
            sl = slice(start, start + chunk)
            lines = [
                f"{1_500_000_000_000_000_000 + n}\tP{u:08d}\t{t}\t2\t{lvl}\t0\n"
                for n, u, t, lvl in zip(
                    data.note[sl].tolist(),
                    data.rater[sl].tolist(),
                    data.created_at_ms[sl].tolist(),
                    levels[idx[sl]].tolist(),
                    strict=True,
                )
            ]
            fh.writelines(lines)
    return notes_path, ratings_path
