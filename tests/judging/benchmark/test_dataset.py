"""Reading and validating the benchmark's JSONL; the demo dataset."""

from __future__ import annotations

import datetime as dt
import json
import re
from pathlib import Path

import pytest

from judging.benchmark.dataset import DatasetError, load_dataset

ROOT = Path(__file__).resolve().parents[3]
GOOD = {
    "post": "p",
    "note": "n",
    "urls": ["https://a.example/x", "https://a.example/x"],
    "label": "not helpful",
    "note_time": "2024-03-01",
}


def write(tmp_path: Path, *lines: object) -> Path:
    path = tmp_path / "d.jsonl"
    path.write_text("\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines) + "\n", encoding="utf-8")
    return path


def test_a_valid_row_is_normalized(tmp_path: Path) -> None:
    (row,) = load_dataset(write(tmp_path, GOOD))
    assert row.id == "line-1" and row.label == "Not Helpful" and row.urls == ("https://a.example/x",)
    assert row.note_time == dt.datetime(2024, 3, 1, tzinfo=dt.UTC)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"label": "Somewhat"}, "line 2: 'label' must be one of Helpful, Not Helpful"),
        ({"urls": []}, "line 2: 'urls' must be a non-empty list"),
        ({"urls": ["ftp://x"]}, "line 2: not an http(s) URL"),
        ({"note_time": "yesterday"}, "line 2: 'note_time' is not an ISO date"),
        ({"post": ""}, "line 2: 'post' must be a non-empty string"),
        ({"id": "line-1"}, "line 2: duplicate id 'line-1'"),
    ],
)
def test_an_invalid_row_names_its_line_and_field(tmp_path: Path, change: dict[str, object], message: str) -> None:
    with pytest.raises(DatasetError, match=re.escape(message)):
        load_dataset(write(tmp_path, GOOD, {**GOOD, **change}))


def test_a_line_that_is_not_json_is_refused(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="line 1: not JSON"):
        load_dataset(write(tmp_path, "{oops"))


def test_the_demo_dataset_is_marked_demo_and_cites_served_corpus_pages(shared_data: Path) -> None:
    rows = load_dataset(ROOT / "bench" / "benchmark_demo.jsonl")
    assert len(rows) >= 4 and all(row.demo for row in rows)
    assert {row.label for row in rows} == {"Helpful", "Not Helpful"}
    for row in rows:
        for url in row.urls:
            prefix = "http://127.0.0.1:8001/"
            assert url.startswith(prefix)
            assert (shared_data / "webpages" / url.removeprefix(prefix)).is_file()
