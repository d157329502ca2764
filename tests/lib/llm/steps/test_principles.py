from __future__ import annotations

from crowdnotes_site.lib.llm.client import LLMClient
from crowdnotes_site.lib.llm.steps import principles
from tests.support.llm_server import Reply, ScriptedLLM


def test_it_checks_principles(llm_server: ScriptedLLM, llm_client: LLMClient) -> None:
    llm_server.script(Reply("Loaded words.\nFinal decision: no"))
    result = principles.principle_check_llm(llm_client, text="Idiots believe this.", principle="neutral")
    assert result.value is False and result.prompt_version == "principle-neutral-v2"
    assert (
        principles.principle_check_baseline(text="In my opinion it probably works.", principle="no_opinion").value
        is False
    )
    assert principles.principle_check_baseline(text="Trials found no effect.", principle="no_opinion").value is True
