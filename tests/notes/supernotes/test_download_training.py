"""train_phm --download: the PHM from a whole download folder (crowdnotes_site.lib.communitynotes.research.phm_training)."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
from django.core.management import CommandError, call_command

from crowdnotes_site.lib.communitynotes.data import synthetic_download as download_synth
from crowdnotes_site.lib.communitynotes.research import phm_training as dt
from crowdnotes_site.lib.communitynotes.research import run as download
from crowdnotes_site.lib.communitynotes.supernotes import phm


def test_the_command_trains_and_saves_a_model_that_states_its_sample(folder: Path, tmp_path: Path, settings) -> None:
    settings.PHM_DIR = str(tmp_path / "phm")
    out = io.StringIO()
    call_command("train_phm", "--download", str(folder), "--max-notes", "400", "--max-ratings", "3000",
                 "--epochs", "2", stdout=out)  # fmt: skip
    saved = phm.latest(tmp_path / "phm")
    assert saved is not None
    model = phm.load(saved)
    described = model.meta.extra["training_data"]
    counts = described["counts"]
    assert described["folder"] == str(folder.resolve())
    assert "400 notes" in described["sample_rule"] and "3,000" in described["sample_rule"]
    assert counts["notes_kept"] == 400 < counts["notes_with_text"]
    assert 0 < counts["ratings_kept"] <= 3000
    assert (
        counts["ratings_kept"] + counts["ratings_rater_without_factor"] + counts["ratings_over_the_cut"]
        == (counts["ratings_of_kept_notes"])
    )
    parts = (
        "ratings_of_kept_notes",
        "ratings_of_notes_not_sampled",
        "ratings_of_notes_not_in_notes_file_or_without_text",
    )
    assert counts["ratings_read"] == sum(counts[k] for k in parts)
    # phm.train's split: the held-out notes' ratings are scored, the rest trained on.
    assert model.meta.n_ratings + model.meta.holdout_ratings == counts["ratings_kept"]
    assert 0.0 <= model.meta.auc <= 1.0 and model.meta.calibration
    assert model.meta.embedder == phm.HASHING and "writer" not in " ".join(model.meta.inputs)
    assert set(described["seconds"]) >= {"embedding", "features", "training"}
    assert "sample rule: " in out.getvalue() and "held-out AUC" in out.getvalue()


def test_the_sample_is_deterministic_and_keeps_to_its_caps(folder: Path) -> None:
    rule = dt.SampleRule(max_notes=300, max_ratings=2000, seed=5)
    a, b = dt.read_sample(folder, rule), dt.read_sample(folder, rule)
    assert len(a.note_id) == 300 and a.counts.ratings_kept <= 2000
    assert np.array_equal(a.note_id, b.note_id) and np.array_equal(a.note, b.note)
    assert np.array_equal(a.label, b.label) and np.array_equal(a.rater_factor, b.rater_factor)
    # Each row group alone, or two row groups (two rater dictionaries, unified) per span: the
    # same sample as all row groups in one span.
    for span in (1, 15_000):
        other_span = dt.read_sample(folder, rule, span_rows=span)
        assert np.array_equal(other_span.note, a.note) and np.array_equal(other_span.rater_factor, a.rater_factor)
        assert np.array_equal(other_span.label, a.label) and other_span.counts == a.counts
    other = dt.read_sample(folder, dt.SampleRule(max_notes=300, max_ratings=2000, seed=6))
    assert not np.array_equal(a.note_id, other.note_id)
    # Every kept rating's label is a level of value2 and its note is a kept note.
    assert set(np.unique(a.label)) <= {0, 1, 2} and a.note.max() < 300
    # Caps above the data keep everything that has a rater factor.
    everything = dt.read_sample(folder, dt.SampleRule(max_notes=10**9, max_ratings=10**12))
    assert everything.counts.ratings_over_the_cut == 0
    assert everything.counts.notes_kept == everything.counts.notes_with_text


def test_the_cut_keeps_at_most_the_cap() -> None:
    histogram = np.array([3, 0, 4, 5, 1])
    assert dt.rating_cut(histogram, 7) == 3 and histogram[:3].sum() <= 7
    assert dt.rating_cut(histogram, 2) == 0
    assert dt.rating_cut(histogram, 100) == 5


def test_a_folder_without_research_outputs_is_a_command_error(tmp_path: Path) -> None:
    download_synth.generate(tmp_path, scale=0.0002, seed=1)
    download.run(tmp_path, only=("convert",), say=lambda _m: None)
    with pytest.raises(CommandError, match="no rater parameters"):
        call_command("train_phm", "--download", str(tmp_path))
    with pytest.raises(CommandError, match="research_download"):
        call_command("train_phm", "--download", str(tmp_path / "nothing-here"))
