"""What the warm-up builds (the pre-filter table, the unpacked model) is built once per machine:
a second process waits for the first and reuses its file, or ranks without it, never computing
it beside the first."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from evidence.embedding import StillBuilding, build_once, build_timings, building

# A builder in its own process: counts its build in COUNT, then holds the lock until RELEASE exists.
_BUILDER = """
import sys, time
from pathlib import Path
from evidence.embedding import build_once
target, count, release = (Path(a) for a in sys.argv[1:4])

def build(tmp):
    with count.open("a") as f:
        f.write("built\\n")
    while not release.exists():
        time.sleep(0.05)
    tmp.write_text("table")

build_once(target, build, what="building the embedding table")
"""


def _start_builder(tmp_path: Path, target: Path) -> tuple[subprocess.Popen[bytes], Path, Path]:
    count, release = tmp_path / "count", tmp_path / "release"
    proc = subprocess.Popen([sys.executable, "-c", _BUILDER, str(target), str(count), str(release)])
    deadline = time.monotonic() + 30
    while building(target) is None:  # the builder holds the lock once it has counted its build
        assert proc.poll() is None and time.monotonic() < deadline, "the builder never took the lock"
        time.sleep(0.05)
    return proc, count, release


def test_it_builds_once_when_a_second_builder_comes_while_the_first_builds(tmp_path: Path) -> None:
    target = tmp_path / "static-model.npy"
    first, count, release = _start_builder(tmp_path, target)
    second = subprocess.Popen([sys.executable, "-c", _BUILDER, str(target), str(count), str(release)])
    time.sleep(1.0)
    assert second.poll() is None  # waiting on the lock, not building beside the first
    release.touch()
    assert first.wait(30) == 0 and second.wait(30) == 0
    assert count.read_text().splitlines() == ["built"]
    assert target.read_text() == "table"
    assert building(target) is None
    assert target.name in build_timings(tmp_path)


def test_it_refuses_at_once_without_waiting_and_says_who_builds_since_when(tmp_path: Path) -> None:
    target = tmp_path / "static-model.npy"
    proc, _count, release = _start_builder(tmp_path, target)
    calls: list[Path] = []
    try:
        with pytest.raises(StillBuilding) as refused:
            build_once(target, calls.append, what="something else", wait=False)
    finally:
        release.touch()
        proc.wait(30)
    assert calls == []
    assert refused.value.building.what == "building the embedding table"
    assert 0 <= time.time() - refused.value.building.since < 60
    assert refused.value.building.last_seconds is None  # the first build on this machine


def test_it_ranks_by_bm25_alone_while_another_process_builds_the_table(minilm_matcher: Any, tmp_path: Path) -> None:
    """A person's match during the warm-up must not compute the table the warm-up is building."""
    import torch

    from evidence.matching import _ranks, bm25, prerank, static_table_path

    forwards: list[int] = []

    class CountingTransformer(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.weight = torch.nn.Parameter(torch.zeros(1))
            self.config = type("Config", (), {"hidden_size": 4})()

        def forward(self, input_ids: Any, attention_mask: Any) -> Any:
            forwards.append(len(input_ids))
            return type("Out", (), {"last_hidden_state": torch.ones(input_ids.shape[0], 3, 4)})()

    class FakeModel:
        tokenizer = minilm_matcher.tokenizer

        def __getitem__(self, index: int) -> Any:
            return type("Module", (), {"auto_model": CountingTransformer()})()

    target = static_table_path("fake-counting", tmp_path)
    proc, _count, release = _start_builder(tmp_path, target)
    passages = ["measles vaccine doses protect children", "volcanic ash and lava", "sourdough bread"]
    try:
        ranked = prerank(FakeModel(), "fake-counting", "measles vaccine", passages, tmp_path)  # type: ignore[arg-type]
    finally:
        release.touch()
        proc.wait(30)
    assert forwards == []
    assert int(ranked.argmax()) == 0
    ids = minilm_matcher.tokenizer(["measles vaccine", *passages], add_special_tokens=False)["input_ids"]
    assert ranked.tolist() == (1 / (10 + _ranks(bm25(ids[0], ids[1:])))).tolist()
