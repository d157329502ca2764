"""The commands of the jury on real posts: `jury_pick` (picks for posts never seen, from the jury
trained on the real folder alone; refusals name the line), `train_jury_real`, and `evaluate_jury
--real` with its table on the Supernotes evaluation page."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from crowdnotes_site.lib.communitynotes.research import real_jury as rj
from tests.support import real_jury_folder


@pytest.fixture
def real_dir(tmp_path: Path, settings: Any) -> Path:
    settings.COMMUNITYNOTES_REAL_DIR = real_jury_folder.write(tmp_path / "real", posts=10, singles=5, raters=25)
    settings.JURY_REAL_DIR = tmp_path / "jury-real"
    return settings.JURY_REAL_DIR


def _note(note_id: str, summary: str, **extra: Any) -> dict[str, Any]:
    return {"noteId": note_id, "summary": summary, "createdAtMillis": 1700000000000, "classification":
            "MISINFORMED_OR_POTENTIALLY_MISLEADING", "lang": "en", **extra}  # fmt: skip


POSTS: list[dict[str, Any]] = [
    {"post": "p-1", "post_text": "A claim about growth", "notes": [
        _note("n-a", "Wrong."),
        _note("n-b", "The official figures show 12% growth in 2020, see https://www.bls.gov/data/1"),
    ]},
    {"post": "p-2", "post_text": None, "notes": [
        _note("x", "False: see https://www.cdc.gov/report/2 and https://apnews.com/article/2 for the data"),
        _note("y", "No."),
        _note("z", "This is satire."),
    ]},
]  # fmt: skip


def _write(tmp_path: Path, lines: list[str]) -> Path:
    path = tmp_path / "posts.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _pick(path: Path) -> tuple[list[dict[str, Any]], str]:
    out, err = StringIO(), StringIO()
    call_command("jury_pick", "--posts", str(path), "--json", stdout=out, stderr=err)
    return [json.loads(line) for line in out.getvalue().splitlines()], err.getvalue()


def test_it_trains_when_no_model_is_saved_then_picks_one_note_per_post(real_dir: Path, tmp_path: Path) -> None:
    path = _write(tmp_path, [json.dumps(p) for p in POSTS])
    rows, err = _pick(path)
    assert "training it" in err and (real_dir / rj.LATEST_FILE).exists()
    assert [r["post"] for r in rows] == ["p-1", "p-2"]
    for row, post in zip(rows, POSTS, strict=True):
        ids = [n["noteId"] for n in post["notes"]]
        assert list(row["scores"]) == ids
        assert row["picked"] == max(ids, key=lambda i: row["scores"][i])
    # The saved model is reused, and picks the same.
    again, err = _pick(path)
    assert again == rows and err == ""


def test_train_jury_real_saves_a_version_that_jury_pick_uses(real_dir: Path, tmp_path: Path) -> None:
    out = StringIO()
    call_command("train_jury_real", stdout=out)
    assert "Saved" in out.getvalue() and rj.load_saved(real_dir) is not None
    _, err = _pick(_write(tmp_path, [json.dumps(POSTS[0])]))
    assert err == ""


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{not json", "line 2: not JSON"),
        (json.dumps({**POSTS[0], "notes": [_note("only", "One note.")]}), "line 2: a post needs two or more notes"),
        (
            json.dumps({**POSTS[0], "notes": [_note("a", "  "), _note("b", "Text.")]}),
            "line 2: note 1 has an empty summary",
        ),
        (json.dumps({"post": "p", "notes": POSTS[0]["notes"]}), "line 2: missing keys post_text"),
        (
            json.dumps({**POSTS[0], "notes": [{"noteId": "a", "summary": "x"}, _note("b", "Text.")]}),
            "line 2: note 1 is missing keys createdAtMillis, classification, lang",
        ),
    ],
    ids=["not JSON", "one note", "empty summary", "missing post key", "missing note keys"],
)
def test_it_refuses_a_bad_line_naming_it_before_any_output(
    real_dir: Path, tmp_path: Path, line: str, message: str
) -> None:
    path = _write(tmp_path, [json.dumps(POSTS[0]), line])
    out = StringIO()
    with pytest.raises(CommandError, match=message):
        call_command("jury_pick", "--posts", str(path), "--json", stdout=out)
    assert out.getvalue() == "" and not real_dir.exists()


def test_evaluate_jury_without_real_names_the_other_evaluations() -> None:
    with pytest.raises(CommandError) as caught:
        call_command("evaluate_jury", stdout=StringIO())
    for name in ("--real", "evaluate_jury_synthetic", "evaluate_jury_sample", "evaluate_jury_download"):
        assert name in str(caught.value)


def test_the_stored_real_table_is_what_the_evaluation_page_shows(real_dir: Path, admin_client: Any, db: None) -> None:
    page = admin_client.get("/supernotes/evaluation/").content.decode()
    assert "No evaluation on real posts is stored" in page and "evaluate_jury --real --seeds 5 --store" in page
    out = StringIO()
    call_command("evaluate_jury", "--real", "--seeds", "1", "--jurors", "20", "--draws", "2", "--json", "--store",
                 stdout=out)  # fmt: skip
    summary = json.loads(out.getvalue())
    stored = json.loads((real_dir / rj.EVALUATION_FILE).read_text())
    assert stored["rows"] == summary["rows"] and stored["command"].startswith(
        "manage.py evaluate_jury --real --seeds 1"
    )
    page = admin_client.get("/supernotes/evaluation/").content.decode()
    assert "No evaluation on real posts is stored" not in page and stored["command"] in page
    row = stored["rows"][0]
    assert f"{row['jury']['p_at_1']:.3f}" in page and f"{row['rules']['url_then_longest']['p_at_1']:.3f}" in page
    assert f"{row['n_posts']}" in page and "2021 raters" in page
    assert (
        f"{stored['held_out_auc']['mean']:.3f}" in page and f"{stored['held_out_auc']['raters_only_mean']:.3f}" in page
    )
