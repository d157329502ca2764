from __future__ import annotations

from typing import Any

import pytest


@pytest.fixture
def own_workers(worker_factory: Any) -> Any:
    """worker_factory, with the session's shared worker stopped first so only this test's
    workers (and their settings) consume the queues. celery_worker restarts it when needed."""
    from tests.conftest import _shared_worker

    shared = _shared_worker.pop("w", None)
    if shared is not None:
        shared.stop()
    return worker_factory
