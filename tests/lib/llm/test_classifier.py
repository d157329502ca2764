from __future__ import annotations

import zlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from crowdnotes_site.lib.llm import classifier
from crowdnotes_site.lib.llm.classifier import LabelledNote


def hashed_bow(texts: Sequence[str]) -> np.ndarray:
    """A cheap deterministic embedding for tests: hashed bag of words, L2-normalised."""
    out = np.zeros((len(texts), 64))
    for i, text in enumerate(texts):
        for word in text.lower().split():
            out[i, zlib.crc32(word.encode()) % 64] += 1
    return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-9)


def _synthetic(n: int = 60) -> list[LabelledNote]:
    good = [
        "Peer reviewed trials show no effect, see source",
        "Official health agency data contradicts this, see source",
    ]
    bad = ["lol this is fake news idiots", "nope wrong wrong wrong totally fake"]
    rows = []
    for i in range(n):
        helpful = i % 3 != 0
        text = f"{(good if helpful else bad)[i % 2]} case {i}"
        rows.append(LabelledNote(str(i), text, helpful, "synthetic"))
    return rows


def test_it_learns_a_separable_signal_and_reports_held_out_metrics() -> None:
    clf, metrics = classifier.train(
        _synthetic(),
        embed=hashed_bow,
        embedding_model="hashed-bow",
        baselines={"always": lambda t: True},
    )
    assert metrics.n_examples == 60 and metrics.n_not_helpful == 20
    assert metrics.n_train + metrics.n_test == 60
    assert metrics.macro_f1 > 0.9 and metrics.macro_accuracy > 0.9
    assert metrics.baselines_macro_f1["always"] < 0.5  # majority rule
    probs = clf.predict_proba_helpful(
        ["Official health agency data says otherwise, see source", "fake idiots lol"], [[], []]
    )
    assert probs[0] > 0.5 > probs[1]


def test_it_cannot_learn_random_labels() -> None:
    rng = np.random.default_rng(0)
    rows = [LabelledNote(str(i), f"same words every time {i}", bool(rng.integers(2)), "noise") for i in range(80)]
    _, metrics = classifier.train(rows, embed=hashed_bow, embedding_model="hashed-bow")
    assert metrics.cv_macro_f1_mean < 0.75


def test_it_saves_and_loads_a_versioned_model(tmp_path: Path) -> None:
    clf, _ = classifier.train(_synthetic(), embed=hashed_bow, embedding_model="hashed-bow")
    classifier.save(clf, tmp_path)
    assert classifier.latest_version(tmp_path) == clf.version
    loaded = classifier.load(tmp_path, embed=hashed_bow)
    assert loaded is not None and loaded.version == clf.version
    assert loaded.metadata["metrics"]["n_examples"] == 60
    texts = ["see source trials", "fake lol"]
    urls: list[list[str]] = [["https://a.org"], []]
    assert loaded.predict_proba_helpful(texts, urls) == pytest.approx(clf.predict_proba_helpful(texts, urls))
    assert loaded.metadata["features"] == classifier.FEATURES
    assert classifier.load(tmp_path / "empty") is None


def test_it_drops_duplicate_notes_before_splitting() -> None:
    rows = [
        LabelledNote("1", "Same text", True, "a"),
        LabelledNote("2", "same   TEXT", False, "b"),
        LabelledNote("1", "Other", True, "c"),
    ]
    assert [r.note_id for r in classifier.dedupe(rows)] == ["1"]


def test_it_joins_public_note_texts_with_scorer_statuses(cn_data: Path) -> None:
    statuses = classifier.load_statuses(cn_data)
    rows = classifier.load_status_labelled_notes(cn_data)
    assert sum(r.helpful for r in rows) > 50 and sum(not r.helpful for r in rows) > 10
    for row in rows:
        if row.source == "colin-fraser+status":
            assert statuses[row.note_id] == (
                "CURRENTLY_RATED_HELPFUL" if row.helpful else "CURRENTLY_RATED_NOT_HELPFUL"
            )


def test_it_trains_on_text_without_urls_and_reads_cited_urls_as_a_feature() -> None:
    """The helpfulness stage strips URLs from the note and passes them apart: the classifier
    learns from that form, so a judged note keeps its "cites a source" signal."""
    embedded: list[str] = []

    def embed(texts: Sequence[str]) -> np.ndarray:
        embedded.extend(texts)
        return hashed_bow(texts)

    rows = [
        LabelledNote(
            str(i), f"Trials found no effect case {i}" + (f" https://nih.gov/s{i}" if i % 2 else ""), bool(i % 2), "t"
        )
        for i in range(40)
    ]
    clf, _ = classifier.train(rows, embed=embed, embedding_model="hashed-bow")
    assert embedded and not any("http" in t for t in embedded)
    text = "Trials found no effect case 99"
    cited, uncited = clf.predict_proba_helpful([text, text], [["https://nih.gov/x"], []])
    assert cited > 0.5 > uncited
