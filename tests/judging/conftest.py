from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from judging.llm import LLMClient, LLMConfig
from tests.judging.llm_stub import ScriptedLLMServer


@pytest.fixture
def llm_stub() -> Iterator[ScriptedLLMServer]:
    server = ScriptedLLMServer().start()
    yield server
    server.stop()


@pytest.fixture
def sleeps() -> list[float]:
    return []


@pytest.fixture
def llm_client(llm_stub: ScriptedLLMServer, sleeps: list[float]) -> LLMClient:
    config = LLMConfig(
        base_url=llm_stub.base_url,
        api_key="",
        model="stub-model",
        timeout_s=2.0,
        max_retries=2,
    )
    return LLMClient(config, sleep=sleeps.append)


@pytest.fixture
def own_workers(worker_factory: Any) -> Any:
    """worker_factory, with the session's shared worker stopped first so only this test's
    workers (and their settings) consume the queues. celery_worker restarts it when needed."""
    from tests.conftest import _shared_worker

    shared = _shared_worker.pop("w", None)
    if shared is not None:
        shared.stop()
    return worker_factory
