"""A tiny real folder for the jury on real posts: posts of three notes each with the reference
intercept as their truth, a few one-note posts, and 2021 ratings of every note by every rater (the
download's ratings layout), written by a test."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from crowdnotes_site.lib.communitynotes.data.real import RATINGS_FILE
from tests.support import real_folder as rf

RATINGS_HEADER = ("noteId", "raterParticipantId", "createdAtMillis", "version", "agree", "disagree", "helpful",
                  "notHelpful", "helpfulnessLevel")  # fmt: skip
TEXTS = (
    "Wrong.",
    "The claim is wrong: the official figures for 2020 show 12% growth, see https://www.bls.gov/data/{k}",
    "This is false according to the Centers for Disease Control, which published data in March 2021 showing "
    "the opposite; see https://www.cdc.gov/report/{k} and https://apnews.com/article/{k}",
)


def jury_notes(posts: int = 15, singles: int = 10, seed: int = 0) -> list[dict[str, Any]]:
    """`posts` posts of three notes (a short one, one link, two links and the longest); the truth
    (noteIntercept) mostly favours the notes with links; then `singles` posts of one note."""
    rng = np.random.default_rng(seed)
    rows = []
    for p in range(posts):
        created = rf.at(2021, 2, 1 + p % 27)
        post = rf.x_id(created, 900 + p)
        base = rng.normal(0.1, 0.05, 3) + np.array([0.0, 0.15, 0.25 if p % 4 else -0.2])
        for k in range(3):
            rows.append(rf.note(rf.at(2021, 2, 1 + p % 27, 1 + k), post, 10 * p + k, summary=TEXTS[k].format(k=p),
                                classification="MISINFORMED_OR_POTENTIALLY_MISLEADING",
                                noteIntercept=round(float(base[k]), 4)))  # fmt: skip
    for s in range(singles):
        created = rf.at(2021, 3, 1 + s)
        rows.append(rf.note(created, rf.x_id(created, 500 + s), 1000 + s, summary=TEXTS[s % 3].format(k=100 + s)))
    return rows


def ratings_rows(notes: list[dict[str, Any]], raters: int = 30, seed: int = 0) -> list[tuple[str, str, float]]:
    """(noteId, rater, value 1 or 0) of every note by every rater, Helpful more often for notes with links."""
    rng = np.random.default_rng(seed)
    factor = rng.normal(0, 1, raters)
    out = []
    for n in notes:
        links = n["summary"].count("https://")
        lean = rng.normal(0, 0.5)
        for r in range(raters):
            p = 1 / (1 + np.exp(-(-0.5 + 0.8 * links + lean * factor[r])))
            out.append((str(n["noteId"]), f"R{r:03d}", float(rng.random() < p)))
    return out


def write_ratings(folder: Path, rows: list[tuple[str, str, float]]) -> None:
    lines = ["\t".join(RATINGS_HEADER)]
    for k, (note_id, rater, value) in enumerate(rows):
        helpful = int(value == 1.0)
        lines.append("\t".join([note_id, rater, str(1612137600000 + k), "1", "", "", str(helpful), str(1 - helpful),
                                ""]))  # fmt: skip
    (folder / RATINGS_FILE).write_text("\n".join(lines) + "\n", encoding="utf-8")


def write(folder: Path, *, posts: int = 15, singles: int = 10, raters: int = 30) -> Path:
    notes = jury_notes(posts, singles)
    rf.write(folder, notes, [])
    write_ratings(folder, ratings_rows(notes, raters))
    return folder
