"""The benchmark run through the task queue (the demo's first start): queued, waiting for the warm-up,
run in slices that re-queue themselves, resumable, its progress on the results page."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from crowdnotes_site.models import OutboxMessage
from judging.benchmark import queued
from tests.judging.benchmark.test_run_benchmark import dataset, records
from tests.support.web_server import WebServer

pytestmark = pytest.mark.django_db
MODES = ["human", "augmentation"]


@pytest.fixture
def offline(settings: Any, tmp_path: Path) -> Any:
    settings.BENCHMARK_DIR = tmp_path / "runs"
    settings.VAR_DIR = tmp_path / "var"
    settings.LLM_BASE_URL = ""
    settings.BENCHMARK_SLICE_TASKS = 3
    return settings


def _slices() -> list[OutboxMessage]:
    return list(OutboxMessage.objects.filter(task_name=queued.TASK).order_by("pk"))


def test_a_queued_run_waits_for_the_warm_up_then_runs_in_slices_and_the_page_shows_progress(
    offline: Any, tmp_path: Path, web_server: WebServer, admin_client: Any
) -> None:
    data = dataset(tmp_path, web_server)
    progress = queued.benchmark_queue(dataset=data, modes=MODES)
    assert progress is not None and (progress.state, progress.done, progress.total) == ("queued", 0, 4)
    message = _slices()[0]
    assert (message.args, message.priority) == ([str(data), MODES], offline.FAIR_QUEUE_PRIORITY_STEPS - 1)
    assert (offline.VAR_DIR / "benchmark.running").exists()  # the banner on every page
    body = admin_client.get("/judging/benchmark/").content.decode()
    assert "No benchmark run yet" not in body and "0 of 4 tasks done" in body and 'hx-trigger="every 5s"' in body

    (offline.VAR_DIR / "warmup.running").write_text("06:12")  # the demo's warm-up is indexing the pages
    with pytest.raises(queued.NotReady):
        queued.benchmark_slice(dataset=data, modes=MODES)
    assert "waiting for the demo&#x27;s warm-up" in admin_client.get("/judging/benchmark/").content.decode()
    assert not (queued.out_dir(data) / "rows.jsonl").exists()
    (offline.VAR_DIR / "warmup.running").unlink()

    first = queued.benchmark_slice(dataset=data, modes=MODES)
    assert (first.state, first.done) == ("queued", 3) and len(_slices()) == 2  # the next slice queued itself
    body = admin_client.get("/judging/benchmark/").content.decode()
    assert "3 of 4 tasks done" in body and "OFFLINE: offline baselines" in body  # the table fills as it goes
    last = queued.benchmark_slice(dataset=data, modes=MODES)
    assert (last.state, last.done, last.total) == ("done", 4, 4) and len(_slices()) == 2
    assert len(records(queued.out_dir(data))) == 4
    assert not (offline.VAR_DIR / "benchmark.running").exists()
    body = admin_client.get("/judging/benchmark/").content.decode()
    assert "4 of 4 tasks done" in body and "every 5s" not in body and "2 of 2 rows complete" in body
    # A finished run is not queued again (a second demo start).
    assert queued.benchmark_queue(dataset=data, modes=MODES) is None and len(_slices()) == 2


def test_an_interrupted_run_is_queued_again_and_goes_on_where_it_stopped(
    offline: Any, tmp_path: Path, web_server: WebServer
) -> None:
    data = dataset(tmp_path, web_server)
    queued.benchmark_queue(dataset=data, modes=MODES)
    queued.benchmark_slice(dataset=data, modes=MODES)
    before = [(r["row_id"], r["mode"], r["finished_at"]) for r in records(queued.out_dir(data))]
    progress = queued.benchmark_queue(dataset=data, modes=MODES)  # the demo restarted mid-run
    assert progress is not None and (progress.state, progress.done) == ("queued", 3)
    queued.benchmark_slice(dataset=data, modes=MODES)
    after = [(r["row_id"], r["mode"], r["finished_at"]) for r in records(queued.out_dir(data))]
    assert after[:3] == before and len(after) == 4


def test_a_slice_that_finishes_nothing_stops_the_run_and_says_why(
    offline: Any, tmp_path: Path, web_server: WebServer, admin_client: Any
) -> None:
    data = dataset(tmp_path, web_server)
    queued.benchmark_queue(dataset=data, modes=MODES)
    out = queued.out_dir(data)
    (out / "run.json").write_text(json.dumps({"dataset_sha256": "another dataset"}))
    stopped = queued.benchmark_slice(dataset=data, modes=MODES)
    assert stopped.state == "failed" and "another dataset" in stopped.message
    assert len(_slices()) == 1 and not (offline.VAR_DIR / "benchmark.running").exists()
    body = admin_client.get("/judging/benchmark/").content.decode()
    assert "stopped" in body and "holds a run of another dataset" in body and "every 5s" not in body
