from __future__ import annotations

from typing import Any

import pytest

from judging.llm import LLMClient, LLMConfig
from tests.support.llm_server import ScriptedLLM


@pytest.fixture
def sleeps() -> list[float]:
    return []


@pytest.fixture
def llm_client(llm_server: ScriptedLLM, sleeps: list[float]) -> LLMClient:
    """A client on the shared scripted endpoint whose backoff sleeps are recorded, not slept."""
    config = LLMConfig(
        base_url=llm_server.base_url,
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
