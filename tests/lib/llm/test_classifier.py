from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from crowdnotes_site.lib.llm import classifier
from crowdnotes_site.lib.llm.classifier import Example, JudgedNote

GOOD = ["Peer reviewed trials show no effect", "Official health agency data contradicts this"]
BAD = ["lol this is fake news idiots", "nope wrong wrong wrong totally fake"]


def _examples(n: int = 60) -> list[Example]:
    rows = []
    for i in range(n):
        helpful = i % 3 != 0
        summary = f"{(GOOD if helpful else BAD)[i % 2]} case {i}" + (f" https://nih.gov/{i}" if helpful else "")
        rows.append(Example(JudgedNote.from_summary(summary, lang="en"), helpful, f"post-{i // 2}", 2021 + i % 3, "en"))
    return rows


def test_it_learns_a_separable_signal_and_reports_it_beside_the_rules() -> None:
    report = classifier.evaluate(_examples(), seeds=2, min_n=10)
    overall = report["slices"][0]
    assert overall["slice"] == "all notes" and report["n"] == 60
    judge, cites, always = overall["rows"]
    assert judge["judge"] == "trained judge" and judge["n"] == 60 and judge["n_not_helpful"] == 20
    assert judge["macro_f1"] > 0.9
    assert (cites["judge"], always["judge"]) == ("cites a URL", "always helpful")
    assert always["macro_f1"] < 0.5  # the majority rule
    names = [s["slice"] for s in report["slices"]]
    assert "notes that cite a URL" in names and "language en" in names and "year 2021" in names


def test_it_cannot_learn_random_labels() -> None:
    rng = np.random.default_rng(0)
    rows = [
        Example(JudgedNote(f"same words every time {i}"), bool(rng.integers(2)), f"p{i}", 2025, "en") for i in range(80)
    ]
    report = classifier.evaluate(rows, seeds=2)
    assert report["slices"][0]["rows"][0]["macro_f1"] < 0.7


def test_a_held_out_posts_labels_never_reach_its_own_scores() -> None:
    """Folds are by post: flipping every verdict of one fold's posts leaves that fold's scores as they were."""
    rows = _examples()
    fold = classifier._post_folds(rows, 5, seed=0)
    before = classifier.held_out_scores(rows, seed=0)
    flipped = [
        Example(r.note, not r.helpful, r.post, r.year, r.lang) if fold[i] == 0 else r for i, r in enumerate(rows)
    ]
    after = classifier.held_out_scores(flipped, seed=0)
    assert np.allclose(before[fold == 0], after[fold == 0])
    assert not np.allclose(before[fold != 0], after[fold != 0])  # the flipped posts trained the other folds
    posts_by_fold = {k: {rows[i].post for i in np.flatnonzero(fold == k)} for k in range(5)}
    assert all(posts_by_fold[a].isdisjoint(posts_by_fold[b]) for a in range(5) for b in range(a + 1, 5))


def test_it_saves_and_loads_a_versioned_model(tmp_path: Path) -> None:
    model = classifier.train(_examples(), source="synthetic")
    classifier.save(model, tmp_path)
    assert classifier.latest_version(tmp_path) == model.version
    loaded = classifier.load(tmp_path)
    assert loaded is not None and loaded.version == model.version
    assert loaded.metadata["n"] == 60 and loaded.metadata["features"] == classifier.FEATURES
    notes = [JudgedNote("Trials show no effect", ("https://a.org",)), JudgedNote("fake lol idiots")]
    assert loaded.predict_proba(notes) == pytest.approx(model.predict_proba(notes))
    assert classifier.load(tmp_path / "empty") is None


def test_a_model_of_an_older_kind_is_not_loaded(tmp_path: Path) -> None:
    model = classifier.train(_examples(), source="synthetic")
    model.metadata["features"] = "text-without-urls+url-count-v2"
    classifier.save(model, tmp_path)
    assert classifier.load(tmp_path) is None


def test_it_reads_cited_urls_apart_from_the_text() -> None:
    """The helpfulness stage strips URLs from the note and passes them apart: the model reads that form."""
    note = JudgedNote.from_summary(
        "Trials found no effect https://nih.gov/s1", lang="pt", classification="NOT_MISLEADING"
    )
    assert note.text.strip() == "Trials found no effect" and note.urls == ("https://nih.gov/s1",)
    rows = [
        Example(
            JudgedNote.from_summary(f"Trials found no effect case {i}" + (f" https://nih.gov/s{i}" if i % 2 else "")),
            bool(i % 2),
            f"p{i}",
            2025,
            "",
        )
        for i in range(40)
    ]
    model = classifier.train(rows, source="synthetic")
    cited, uncited = model.predict_proba(
        [
            JudgedNote("Trials found no effect case 99", ("https://nih.gov/x",)),
            JudgedNote("Trials found no effect case 99"),
        ]
    )
    assert cited > 0.5 > uncited


def test_it_refuses_to_train_on_one_verdict_only() -> None:
    rows = [Example(JudgedNote(f"note {i}"), True, f"p{i}", 2025, "en") for i in range(10)]
    with pytest.raises(ValueError, match="at least 2 notes of each verdict"):
        classifier.train(rows, source="synthetic")
