"""evaluate_jury_download: the jury on a whole download folder (crowdnotes_site.lib.communitynotes.research.jury_download).
A tiny synthetic download (scale 0.0005), the hashing embedding, few posts, jurors and epochs: these
tests are about the evaluation (posts, truth, folds, leakage, errors), not about the model's quality."""

from __future__ import annotations

import csv
import json
import shutil
from io import StringIO
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from django.core.management import CommandError, call_command

from crowdnotes_site.lib.communitynotes.data import synthetic_download as download_synth
from crowdnotes_site.lib.communitynotes.research import jury_download as de
from crowdnotes_site.lib.communitynotes.research import jury_sample as se
from crowdnotes_site.lib.communitynotes.research import phm_training as dt
from crowdnotes_site.lib.communitynotes.research import run as download
from crowdnotes_site.lib.communitynotes.supernotes import phm

SMALL = ("--max-posts", "24", "--jurors", "30", "--epochs", "1", "--max-ratings", "20000")


def _independent_posts(folder: Path, max_posts: int, seed: int) -> dict[str, set[str]]:
    """The post rule from the TSVs themselves (csv module): tweetId -> noteIds with text and an intercept."""
    csv.field_size_limit(1 << 24)
    with (folder / "research" / "scored_notes.tsv").open(newline="") as f:
        scored = {
            r["noteId"] for r in csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE) if r["coreNoteIntercept"]
        }
    by_post: dict[str, set[str]] = {}
    seen: set[str] = set()
    with (folder / "notes-00000.tsv").open(newline="", encoding="utf-8") as f:
        for r in csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE):
            if r["noteId"] in seen:
                continue
            seen.add(r["noteId"])
            if r["summary"].strip() and r["noteId"] in scored and r["tweetId"].isdigit() and int(r["tweetId"]):
                by_post.setdefault(r["tweetId"], set()).add(r["noteId"])
    eligible = sorted((p for p, n in by_post.items() if len(n) >= 2), key=int)
    ids = np.array([int(p) for p in eligible], dtype=np.int64)
    hashes = dt.note_hash(ids, seed)
    chosen = ids[np.lexsort((ids, hashes))[:max_posts]]
    return {str(p): by_post[str(p)] for p in chosen}


def test_the_command_runs_end_to_end_on_the_stated_posts_and_truth(folder: Path) -> None:
    out = StringIO()
    call_command("evaluate_jury_download", str(folder), "--seeds", "0", "1", *SMALL, "--json", stdout=out)
    summary = json.loads(out.getvalue())["summary"]
    [truth] = summary["truths"]
    assert truth["truth"] == "download" and truth["n_posts"] == 24 and summary["seeds"] == [0, 1]
    assert "held-out posts' ratings included" in truth["description"]
    assert set(truth["rules"]) == set(se.RULES) and len(truth["jury"]["per_seed"]) == 2
    assert 0.0 <= truth["jury"]["p_at_1_mean"] <= 1.0 and 0 < truth["random_p_at_1"] < 1
    d = summary["download"]
    assert d["counts"]["posts"] == 24 and d["counts"]["eligible_posts"] > 24
    assert "24 with the smallest mix64(tweetId, seed=0)" in d["post_rule"]
    assert len(d["training"]) == 2 and all(t["counts"]["ratings_kept"] <= 20_000 for t in d["training"])
    # Nothing of a held-out post in the training sample: its notes (every one, with text or not).
    assert all(t["counts"]["notes_held_out"] == d["counts"]["held_out_notes"] for t in d["training"])
    assert 0.0 <= summary["auc_mean"] <= 1.0 and summary["folds"] == 1

    # --per-post: every evaluated post, its candidates those of the independent post rule.
    expected = _independent_posts(folder, 24, 0)
    out = StringIO()
    call_command("evaluate_jury_download", str(folder), "--seed", "0", "--per-post", *SMALL, "--json", stdout=out)
    got = json.loads(out.getvalue())
    assert {row["post"] for row in got["posts"]} == set(expected)
    for row in got["posts"]:
        assert set(row["candidates"]) == expected[row["post"]]
        assert row["picked"] in row["candidates"] and row["truths"]["download"]["best"] in row["candidates"]

    # The table, with the post rule and the truth said above it.
    out = StringIO()
    call_command("evaluate_jury_download", str(folder), "--seed", "0", *SMALL, stdout=out)
    text = out.getvalue()
    assert "Truth: the research run's coreNoteIntercept" in text and "Posts: posts: tweetIds with >= 2" in text
    assert "| download | 24 |" in text and "distinguishable from 0?" in text


def _flip_held_out_ratings(folder: Path, held: np.ndarray) -> int:
    """Every held-out note's rating turned round (value2 -> 2 - value2) in the columnar files."""
    changed = 0
    for path in sorted((folder / "columnar").glob("ratings-*.parquet")):
        table = pq.read_table(path)
        hit = np.isin(table["note_id"].to_numpy(), held)
        value = table["value2"].to_numpy().copy()
        changed += int((value[hit] != 1).sum())
        value[hit] = 2 - value[hit]
        table = table.set_column(table.schema.get_field_index("value2"), "value2", pa.array(value, pa.int8()))
        pq.write_table(table, path, compression="zstd")
    return changed


def test_turning_round_the_held_out_posts_ratings_changes_no_pick(
    folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Leakage: the scorer refit, the training sample, the PHM and the jury of a fold must come from
    the other posts only. Two folds; flip every rating of fold 0's posts' notes in the folder: fold 0's
    scores are the same to the last bit (so the same picks), and fold 1's change (its model trained
    on those ratings: the flip reached the data)."""
    copy = tmp_path / "copy"
    shutil.copytree(folder, copy)
    samples: list[dt.DownloadSample] = []
    real_read = dt.read_sample

    def spy(*args: Any, **kwargs: Any) -> dt.DownloadSample:
        samples.append(real_read(*args, **kwargs))
        samples[-1].held = kwargs["exclude_notes"]  # type: ignore[attr-defined]
        return samples[-1]

    monkeypatch.setattr(dt, "read_sample", spy)
    options = de.Options(folds=2, jury_size=30, epochs=1, max_ratings=20_000)

    def run() -> tuple[de.DownloadPosts, se.SeedRun]:
        posts = de.load_posts(copy, de.PostRule(16), embed=phm.hashing_embed, embedder=phm.HASHING)
        return posts, de.Evaluation(posts, options, embed=phm.hashing_embed).run_seed(4)

    posts, plain = run()
    fold0 = [post for post, f in plain.fold_of.items() if f == 0]
    held = np.unique(np.concatenate([posts.post_notes[post] for post in fold0]))
    assert _flip_held_out_ratings(copy, held) > 50  # the held-out ratings really changed
    assert download.step_state(copy, "score") == "current"  # the truth is the research run's, kept
    posts_after, flipped = run()
    assert posts_after.note_ids == posts.note_ids and len(plain.scores) == 16 and len(fold0) == 8
    assert flipped.fold_of == plain.fold_of
    assert {p: flipped.scores[p] for p in fold0} == {p: plain.scores[p] for p in fold0}
    assert all(flipped.scores[p] != plain.scores[p] for p in plain.scores if p not in fold0)
    assert flipped.auc_per_fold[0] != plain.auc_per_fold[0]
    picks = {r["post"]: r["picked"] for r in se.per_post(posts, plain)}
    assert {p: picks[p] for p in fold0} == {
        r["post"]: r["picked"] for r in se.per_post(posts, flipped) if r["post"] in fold0
    }
    # And no held-out post's note is among the notes its fold's training sample kept.
    assert len(samples) == 4
    for s in samples:
        assert len(s.held) and not np.isin(s.note_id, s.held).any()  # type: ignore[attr-defined]
        c = s.counts
        assert c.ratings_of_held_out_notes > 0 and c.notes_held_out == len(s.held)  # type: ignore[attr-defined]
        assert c.ratings_read == (
            c.ratings_of_kept_notes + c.ratings_of_notes_not_sampled + c.ratings_of_held_out_notes
            + c.ratings_of_notes_not_in_notes_file_or_without_text
        )  # fmt: skip


def test_a_missing_or_stale_research_step_is_a_command_error_naming_it(folder: Path, tmp_path: Path) -> None:
    with pytest.raises(CommandError, match="its convert step"):
        call_command("evaluate_jury_download", str(tmp_path / "nothing-here"))
    only_converted = tmp_path / "converted"
    download_synth.generate(only_converted, scale=0.0002, seed=1)
    download.run(only_converted, only=("convert",), say=lambda _m: None)
    with pytest.raises(CommandError, match=r"research_download .*converted --only score"):
        call_command("evaluate_jury_download", str(only_converted))
    stale = tmp_path / "stale"
    shutil.copytree(folder, stale)
    record = stale / "research" / "steps" / "score.json"
    record.write_text(json.dumps({**json.loads(record.read_text()), "inputs": "an earlier download"}))
    with pytest.raises(CommandError, match="from an earlier columnar form"):
        call_command("evaluate_jury_download", str(stale))
    with pytest.raises(CommandError, match="unrecognized arguments: --ablation"):
        call_command("evaluate_jury_download", str(folder), "--ablation")
