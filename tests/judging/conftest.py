from __future__ import annotations

from collections.abc import Iterator

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
