"""Item 8 on the real public sample: `evaluate_jury --sample` on a small slice runs, holds each
fold's posts out of the PHM's training, and returns consistent fields."""

from __future__ import annotations

import json
from collections import defaultdict
from io import StringIO
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from django.core.management import call_command

from crowdnotes_site.lib.scoring import communitynotes_io as cio
from crowdnotes_site.lib.scoring import scoring, scoring_tsv
from notes.supernotes import evaluation, phm


def _files(cn_data: Path) -> tuple[Path, Path]:
    return cn_data / "colin-fraser" / "notes-00000.tsv", cn_data / "colin-fraser" / "ratings-00000.tsv"


def _posts_with_two_scored_notes(notes: Path, ratings: Path) -> dict[str, set[int]]:
    """Independently: tweetIds with ≥ 2 notes that get an intercept from all ratings -> all their notes."""
    data = scoring_tsv.load(notes, ratings)
    result = scoring.score(
        data.ratings, data.meta, len(data.participant_ids),
        scoring.ScoringConfig(valid_rating_window_ms=None, lock_after_days=None),
    )  # fmt: skip
    index = {nid: i for i, nid in enumerate(data.note_ids)}
    by_post: dict[str, set[int]] = defaultdict(set)
    for row in cio.read_notes(notes):
        if not isinstance(row, cio.Skipped) and row.tweet_id and row.note_id in index:
            by_post[row.tweet_id].add(index[row.note_id])
    return {post: ids for post, ids in by_post.items() if sum(not np.isnan(result.note_intercept[i]) for i in ids) >= 2}


def test_sample_evaluation_on_a_slice_is_consistent_and_holds_posts_out(
    cn_data: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    notes, ratings = _files(cn_data)
    eligible = _posts_with_two_scored_notes(notes, ratings)
    trained: list[set[int]] = []
    real_train = phm.train

    def spy(data: phm.TrainingData, **kwargs: Any) -> phm.PHM:
        trained.append(set(data.note.tolist()))
        return real_train(data, **kwargs)

    monkeypatch.setattr(phm, "train", spy)
    result = evaluation.evaluate_sample(
        notes, ratings, embed=phm.hashing_embed, embedder=phm.HASHING, folds=2, max_posts=10, jury_size=40, epochs=1,
    )  # fmt: skip
    assert len(eligible) >= 10
    assert result.n_posts == len(result.posts) == 10
    assert {p.post for p in result.posts} <= set(eligible)
    assert len({p.post for p in result.posts}) == 10
    assert 0.0 <= result.p_at_1 <= 1.0
    assert result.p_at_1 == pytest.approx(np.mean([p.picked_best for p in result.posts]))
    low, high = result.p_at_1_ci95
    assert low <= result.p_at_1 <= high
    assert result.random_p_at_1 == pytest.approx(np.mean([1 / p.notes for p in result.posts]))
    assert all(p.notes >= 2 for p in result.posts)
    assert result.posts_with_2_rated_notes >= len(eligible)
    assert result.folds == 2 and len(trained) == 2 and 0.0 <= result.auc <= 1.0
    # No rating of a held-out post's notes (scored or not) reached the PHM of its fold.
    for p in result.posts:
        assert not (eligible[p.post] & trained[p.fold])
    assert "no post text" in result.inputs


def test_all_eligible_posts_are_evaluated_without_a_limit(cn_data: Path) -> None:
    notes, ratings = _files(cn_data)
    eligible = _posts_with_two_scored_notes(notes, ratings)
    result = evaluation.evaluate_sample(
        notes, ratings, embed=phm.hashing_embed, embedder=phm.HASHING, folds=1, jury_size=20, epochs=1
    )
    assert result.n_posts == len(eligible)
    assert {p.post for p in result.posts} == set(eligible)


def test_evaluate_jury_sample_command_prints_one_json_object(cn_data: Path) -> None:
    notes, ratings = _files(cn_data)
    out = StringIO()
    call_command(
        "evaluate_jury", "--sample", "--embedder", phm.HASHING, "--notes", str(notes), "--ratings-file", str(ratings),
        "--posts", "6", "--folds", "2", "--jurors", "30", "--epochs", "1", "--json", stdout=out,
    )  # fmt: skip
    got = json.loads(out.getvalue())
    assert {"p_at_1", "random_p_at_1", "n_posts", "auc", "p_at_1_ci95", "inputs"} <= set(got)
    assert got["n_posts"] == 6 and 0 <= got["p_at_1"] <= 1 and "posts" not in got
