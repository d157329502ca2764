"""The jury on real posts (`crowdnotes_site.lib.communitynotes.research.real_jury`): nothing of a
held-out post reaches the jury that picks for it, training posts and ratings do shape it, several
best notes share a hit, and the saved model picks the same for the same post."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from crowdnotes_site.lib.communitynotes.research import real_jury as rj
from tests.support import real_jury_folder

FAST = rj.Setting(jury_size=20, draws=2, folds=5)


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> rj.RealData:
    return rj.load(real_jury_folder.write(tmp_path_factory.mktemp("real")))


def _changed(data: rj.RealData, posts: Sequence[int]) -> rj.RealData:
    """The data with the given posts' truths reversed (best <-> the rest, intercepts and statuses
    changed) and their notes' ratings flipped."""
    new_posts = list(data.posts)
    ids: set[str] = set()
    for i in posts:
        p = data.posts[i]
        notes = tuple(
            replace(n, intercept=-(n.intercept or 0.0), status="CURRENTLY_RATED_NOT_HELPFUL") for n in p.notes
        )
        new_posts[i] = replace(p, notes=notes, best=tuple(k for k in range(len(p.notes)) if k not in p.best))
        ids |= set(data.notes_by_post[p.post_id])
    r = data.ratings
    value = np.where(r.of_notes(ids), 1.0 - r.value, r.value)
    return replace(data, posts=new_posts, ratings=replace(r, value=value))


def _picks(run: rj.SeedRun) -> dict[str, Any]:
    return {post: scores.tolist() for post, scores in run.jury.items()}


@pytest.mark.parametrize("priors", [rj.PRIORS, (("ranker", 1.0),)], ids=["chosen by nested CV", "the ranker"])
def test_it_picks_the_same_for_held_out_posts_whatever_their_truths_and_ratings(
    data: rj.RealData, priors: tuple[tuple[str, float], ...]
) -> None:
    setting = replace(FAST, priors=priors)
    plain = rj.run_seed(data, seed=3, setting=setting)
    edited = rj.run_seed(data, seed=3, setting=setting, held_out_edit=_changed)
    assert len(plain.jury) == len(data.posts)
    assert _picks(edited) == _picks(plain)
    assert {k: v.tolist() for k, v in edited.prior.items()} == {k: v.tolist() for k, v in plain.prior.items()}
    # The held-out ratings are the AUC's labels, so those did change: the edit reached the data.
    assert not np.array_equal(edited.auc_y, plain.auc_y)


def test_it_changes_the_model_when_a_training_posts_truth_or_ratings_change(data: rj.RealData) -> None:
    train = list(range(len(data.posts) - 3))
    model, _ = rj.train_model(data, train, seed=1, trained_on="test")
    by_truth, _ = rj.train_model(_changed(data, train[:6]), train, seed=1, trained_on="test")
    assert by_truth.inner != model.inner
    ranker = rj.fit_prior(
        [rj.TrainPost(data.post_x[i], data.post_rule[i], data.posts[i].best) for i in train], "ranker", 1.0
    )
    changed = _changed(data, train[:6])
    other = rj.fit_prior([rj.TrainPost(changed.post_x[i], changed.post_rule[i], changed.posts[i].best) for i in train],
                         "ranker", 1.0)  # fmt: skip
    assert not np.allclose(ranker.weights, other.weights)
    # A training post's ratings move the jurors' parameters.
    by_ratings, _ = rj.train_model(replace(_changed(data, [0]), posts=data.posts), train, seed=1, trained_on="test")
    same = by_ratings.pool_intercept.shape == model.pool_intercept.shape and np.allclose(
        by_ratings.pool_intercept, model.pool_intercept
    )
    assert not same and by_ratings.mu != model.mu


def test_a_hit_is_shared_by_ties_and_counts_any_best_note() -> None:
    assert rj.hit(np.array([0.1, 0.5, 0.2]), (1,)) == 1.0
    assert rj.hit(np.array([0.5, 0.5, 0.2]), (1,)) == 0.5
    assert rj.hit(np.array([0.5, 0.5, 0.2]), (0, 1)) == 1.0
    assert rj.hit(np.array([0.1, 0.5, 0.2]), (0, 2)) == 0.0


def test_the_summary_puts_the_jury_beside_random_and_the_rules(data: rj.RealData) -> None:
    runs = [rj.run_seed(data, seed=s, setting=FAST) for s in (0, 1)]
    summary = rj.summarise(data, runs, FAST)
    row = summary["rows"][0]
    assert row["truth"] == "all" and row["n_posts"] == len(data.posts)
    assert row["random"]["p_at_1"] == pytest.approx(1 / 3, abs=1e-4)
    assert set(row["rules"]) == set(rj.js.RULES)
    best = max(row["rules"].values(), key=lambda r: r["p_at_1"])["p_at_1"]
    low, high = row["lead_over_best_rule"]["ci95"]
    assert low <= row["jury"]["p_at_1"] - best <= high or low <= row["lead_over_best_rule"]["mean"] <= high
    assert row["lead_over_best_rule"]["mean"] == pytest.approx(row["jury"]["p_at_1"] - best, abs=1e-3)
    assert summary["held_out_auc"]["n_ratings"] > 0 and 0 <= summary["held_out_auc"]["mean"] <= 1
    assert "| all | 15 |" in "\n".join(rj.table_lines(summary))


def test_the_saved_model_picks_the_same_as_the_trained_one(data: rj.RealData, tmp_path: Path) -> None:
    model, meta = rj.train_saved(data)
    rj.save(model, meta, tmp_path, "v1")
    loaded = rj.load_saved(tmp_path)
    assert loaded is not None and loaded[1]["version"] == "v1" and loaded[1]["jurors"] == len(model.pool_factor)
    notes = [rj.candidate(n) for n in data.posts[0].notes]
    assert rj.pick(loaded[0], "", notes).tolist() == rj.pick(model, "", notes).tolist()
    assert rj.load_saved(tmp_path / "none") is None
