"""The warm-up's pre-filter table is built in slices on the cpu queue: a person's evidence page
queued while the slices run goes before the remaining slices, and is matched meanwhile without
the table instead of building it again. Real worker, Redis, PostgreSQL."""

from __future__ import annotations

import io
import re
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from django.core.management import call_command
from django.db import connections

from evidence import snippets
from evidence.matching import static_table_path, table_progress
from evidence.models import Snippet
from tests.conftest import wait_for
from tests.evidence.conftest import MEASLES, article
from tests.notes.factories import make_job, make_post
from tests.support.worker import purge_broker

pytestmark = [pytest.mark.django_db(transaction=True)]


@pytest.mark.worker
def test_a_persons_page_queued_during_the_warmup_slices_runs_before_the_remaining_slices(
    worker_factory: Any, web_server: Any, contributor: Any, settings: Any, tmp_path: Path
) -> None:
    purge_broker()
    cache = tmp_path / "models"  # no table yet: this worker has to build it
    settings.MODEL_CACHE_DIR = cache
    model = settings.EMBEDDING_MODEL
    worker = worker_factory(queues="cpu", extra_env={"MODEL_CACHE_DIR": str(cache), "EVIDENCE_REFINE": "0"})
    # The demo's warm-up step: queue the slices and wait for the table (in a thread, as its own process would).
    out = io.StringIO()

    def warm_up() -> None:
        try:
            call_command("evidence_warmup", "--in-slices", stdout=out)
        finally:
            connections.close_all()  # this thread's connection, before the test database is dropped

    command = threading.Thread(target=warm_up)
    command.start()
    wait_for(lambda: (p := table_progress(model, cache)) is not None and p.done > 0, timeout=120)
    # The person's page, queued after the slices started.
    url = web_server.add("/measles", article(MEASLES, title="Measles").encode())
    snippets.snippets_add(job=make_job(contributor, make_post("Measles vaccines do not work.")), urls=[url])
    wait_for(lambda: Snippet.objects.get().state in ("ready", "failed"), timeout=120)
    assert Snippet.objects.get().state == "ready", worker.output()
    command.join(timeout=300)
    assert not command.is_alive() and static_table_path(model, cache).exists(), out.getvalue()
    assert re.search(r"pre-filter table +\d+% \(", out.getvalue()) and "ready in" in out.getvalue()
    log = worker.log_path.read_text(errors="replace")
    order = re.findall(r"Task (evidence\.tasks\.\w+)\[[^\]]+\] succeeded", log)
    page = order.index("evidence.tasks.snippet_process")
    assert "evidence.tasks.prefilter_table_slice" in order[:page]  # the slices had started
    assert "evidence.tasks.prefilter_table_slice" in order[page + 1 :], order  # and went on after it
    # Built once, by the slices: every row filled, the build's measured time kept.
    table = np.load(static_table_path(model, cache))
    assert table.shape[0] > 0 and bool(np.all(np.abs(table).sum(1) > 0))
    assert table_progress(model, cache) is None
    assert static_table_path(model, cache).name in (cache / "build-timings.json").read_text()
