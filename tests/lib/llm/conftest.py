from __future__ import annotations

import pytest

from crowdnotes_site.lib.llm.client import LLMClient, LLMConfig
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
