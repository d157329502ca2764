"""The jury on the real public sample (`crowdnotes_site.lib.communitynotes.research.jury_sample`, `evaluate_jury_sample`):
folds by post with nothing of a held-out post reaching training, two truths, the one-line rules,
the per-post picks and the stored table on the Supernotes evaluation page. Small slices, the
hashing embedding: these tests are about the evaluation, not about MiniLM."""

from __future__ import annotations

import json
from dataclasses import replace
from decimal import ROUND_HALF_UP, Decimal
from io import StringIO
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from django.core.management import call_command

from crowdnotes_site.lib.communitynotes.research import jury_sample as se
from crowdnotes_site.lib.communitynotes.supernotes import phm
from notes.supernotes import selectors

FAST = se.Setting(epochs=2, validation=0.15)


def _shown(x: float) -> str:
    """A number as the page's floatformat:3 writes it (half up)."""
    return str(Decimal(repr(x)).quantize(Decimal("0.001"), rounding=ROUND_HALF_UP))


def _files(cn_data: Path) -> tuple[Path, Path, Path]:
    folder = cn_data / "colin-fraser"
    return folder / "notes-00000.tsv", folder / "ratings-00000.tsv", cn_data / "shiruken" / "scoredNotes_2023-02-18.tsv"


@pytest.fixture(scope="module")
def sample(cn_data: Path) -> se.Sample:
    notes, ratings, reference = _files(cn_data)
    return se.load_sample(notes, ratings, reference, embed=phm.hashing_embed, embedder=phm.HASHING)


def test_posts_have_two_notes_scored_by_a_truth_and_the_truths_are_joined_by_note_id(
    sample: se.Sample, cn_data: Path
) -> None:
    reference = se.read_reference(_files(cn_data)[2])
    for post, candidates in sample.posts:
        assert set(candidates) <= set(sample.by_post[post])
        counts = [int((~np.isnan(sample.truth[t][candidates])).sum()) for t in se.TRUTHS]
        assert max(counts) >= 2
        for i in candidates:
            nid = sample.note_ids[i]
            assert sample.truth["full_data"][i] == reference.get(nid, np.nan) or (
                nid not in reference and np.isnan(sample.truth["full_data"][i])
            )
    # The counts: 167 posts on the sample's own truth, 165 on the full-data truth.
    sizes = {t: sum(len(se.truth_candidates(sample, t, c)) >= 2 for _, c in sample.posts) for t in se.TRUTHS}
    assert sizes == {"sample": 167, "full_data": 165}


@pytest.mark.parametrize("members", [1, 2])
def test_shuffling_the_held_out_ratings_changes_no_pick(
    sample: se.Sample, monkeypatch: pytest.MonkeyPatch, members: int
) -> None:
    """Leakage: every fitted thing (scorer, writers' records, PHM, jury) must come from the other
    posts. Shuffle (and flip) the held-out posts' rating values before anything is fitted: the
    jury's scores, so its picks, must be exactly the same. With an ensemble, every member."""
    trained: dict[int, list[set[int]]] = {}
    real_train = phm.train

    def spy(data: phm.TrainingData, **kwargs: Any) -> phm.PHM:
        fold = int(kwargs["trained_on"].split("fold ")[1].split()[0])
        trained.setdefault(fold, []).append(set(data.note.tolist()))
        return real_train(data, **kwargs)

    monkeypatch.setattr(phm, "train", spy)
    changed: list[int] = []

    def scramble(values: np.ndarray, held: np.ndarray) -> np.ndarray:
        out = values.copy()
        rng = np.random.default_rng(7)
        out[held] = 1.0 - rng.permutation(values[held])
        changed.append(int((out != values).sum()))
        return out

    setting = replace(FAST, ensemble=members)
    kwargs: dict[str, Any] = {"seed": 3, "folds": 2, "setting": setting, "jury_size": 40, "max_posts": 12}
    plain = se.run_seed(sample, **kwargs)
    scrambled = se.run_seed(sample, held_out_values=scramble, **kwargs)
    assert min(changed) > 50  # the held-out ratings really were different
    assert scrambled.scores == plain.scores and len(plain.scores) == 12
    picks = [row["picked"] for row in se.per_post(sample, plain)]
    assert picks == [row["picked"] for row in se.per_post(sample, scrambled)]
    # And no rating of a held-out post's notes (scored or not) reached any PHM of its fold.
    assert {f: len(t) for f, t in trained.items()} == {0: 2 * members, 1: 2 * members}  # plain and scrambled
    for post, fold in plain.fold_of.items():
        for seen in trained[fold]:
            assert not set(sample.by_post[post]) & seen


def test_a_writers_record_counts_only_earlier_notes_on_training_posts(sample: se.Sample) -> None:
    author = max(set(sample.author) - {""}, key=sample.author.count)
    mine = sorted((i for i, a in enumerate(sample.author) if a == author), key=lambda i: sample.created_ms[i])
    first, last = mine[0], mine[-1]
    intercept = np.full(len(sample.notes), 0.3)
    usable = np.ones(len(sample.notes), dtype=bool)
    base = se.writer_features(sample, intercept, usable)
    assert base[first].tolist() == [0.0] * len(base[first])  # nothing written before the first note
    later = intercept.copy()
    later[last] = -5.0  # the writer's last note: no earlier note's record may see it
    assert np.array_equal(se.writer_features(sample, later, usable)[mine[:-1]], base[mine[:-1]])
    usable[mine[0]] = False  # a note of a held-out post never counts
    assert se.writer_features(sample, intercept, usable)[mine[1], 1] == 0.0


def test_rules_share_ties_and_the_summary_compares_the_jury_with_the_best_rule(sample: se.Sample) -> None:
    assert se.expected_hit(np.array([1.0, 1.0, 0.0]), np.array([0.2, 0.5, 0.1])) == 0.5
    assert se.expected_hit(np.array([0.0, 1.0]), np.array([0.2, 0.5])) == 1.0
    runs = [se.run_seed(sample, seed=s, folds=2, setting=FAST, jury_size=30, max_posts=10) for s in (0, 1)]
    summary = se.summarise(sample, runs, FAST)
    assert summary["seeds"] == [0, 1] and {t["truth"] for t in summary["truths"]} <= set(se.TRUTHS)
    for t in summary["truths"]:
        assert set(t["rules"]) == set(se.RULES)
        best = max(t["rules"][r]["p_at_1"] for r in se.RULES)
        assert t["rules"][t["best_rule"]]["p_at_1"] == best
        assert t["paired_difference"]["per_seed"] == pytest.approx([p - best for p in t["jury"]["per_seed"]], abs=1e-3)
        low, high = t["paired_difference"]["ci95"]
        assert t["paired_difference"]["distinguishable_from_zero"] == (low > 0 or high < 0)
    lines = se.table_lines(summary)
    assert any(line.startswith("| sample |") for line in lines) and "distinguishable from 0?" in "\n".join(lines)


def test_per_post_json_lists_every_held_out_post_with_its_candidates_and_pick(cn_data: Path, tmp_path: Path) -> None:
    notes, ratings, reference = _files(cn_data)
    out = StringIO()
    call_command(
        "evaluate_jury_sample", "--seed", "2", "--per-post", "--json", "--embedder", phm.HASHING,
        "--notes", str(notes), "--ratings-file", str(ratings), "--reference", str(reference), "--posts", "8",
        "--folds", "2", "--jurors", "30", "--epochs", "2", "--cache-dir", str(tmp_path), stdout=out,
    )  # fmt: skip
    got = json.loads(out.getvalue())
    assert got["seed"] == 2 and len(got["posts"]) == 8
    note_ids = {r.split("\t", 1)[0] for r in notes.read_text().splitlines()[1:]}
    for row in got["posts"]:
        assert {"post", "candidates", "picked"} <= set(row)
        assert row["picked"] in row["candidates"] and set(row["candidates"]) <= note_ids
        for truth in row["truths"].values():
            assert truth["picked"] in truth["candidates"] and set(truth["candidates"]) <= set(row["candidates"])
    assert list(tmp_path.glob("*.npy"))  # the embedding was cached for the next run


def test_the_stored_table_is_what_the_evaluation_page_shows(
    cn_data: Path,
    tmp_path: Path,
    settings: Any,
    admin_client: Any,
    client: Any,
    monkeypatch: pytest.MonkeyPatch,
    db: None,
) -> None:
    settings.JURY_EVALUATION_FILE = tmp_path / "jury.json"
    # Nothing measured here: the copy kept with the code is shown, and said to be that.
    shipped = json.loads(selectors.SHIPPED_JURY_EVALUATION.read_text())
    page = admin_client.get("/supernotes/evaluation/").content.decode()
    assert "Measured by the developers, not on this installation" in page and shipped["command"] in page
    assert _shown(shipped["summary"]["truths"][1]["jury"]["p_at_1_mean"]) in page
    monkeypatch.setattr(selectors, "SHIPPED_JURY_EVALUATION", tmp_path / "none.json")
    assert "No evaluation is stored" in admin_client.get("/supernotes/evaluation/").content.decode()
    notes, ratings, reference = _files(cn_data)
    call_command(
        "evaluate_jury_sample", "--seeds", "0", "1", "--embedder", phm.HASHING, "--notes", str(notes),
        "--ratings-file", str(ratings), "--reference", str(reference), "--posts", "10", "--folds", "2",
        "--jurors", "30", "--epochs", "2", "--cache-dir", str(tmp_path), "--store", stdout=StringIO(),
    )  # fmt: skip
    stored = json.loads(settings.JURY_EVALUATION_FILE.read_text())
    assert "--seeds 0 1" in stored["command"] and stored["command"].endswith("--store")
    page = admin_client.get("/supernotes/evaluation/").content.decode()
    assert (
        "public Community Notes data" in page and stored["command"] in page and "not on this installation" not in page
    )
    for t in stored["summary"]["truths"]:
        assert _shown(t["jury"]["p_at_1_mean"]) in page and _shown(t["random_p_at_1"]) in page
        assert _shown(t["rules"]["longest"]["p_at_1"]) in page
    assert client.get("/supernotes/evaluation/").status_code in (302, 403)  # not for anonymous visitors
