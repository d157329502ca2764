from __future__ import annotations

from crowdnotes_site.lib.llm.client import LLMClient
from crowdnotes_site.lib.llm.steps import topics
from crowdnotes_site.lib.llm.steps.topics import TOPIC_LABELS
from tests.lib.llm.steps.examples import POST
from tests.support.llm_server import Reply, ScriptedLLM


def test_it_labels_topics(llm_server: ScriptedLLM, llm_client: LLMClient) -> None:
    llm_server.script(Reply("4"))
    assert topics.topic_label_llm(llm_client, text=POST).value == TOPIC_LABELS[3]
    assert topics.topic_label_baseline(text="New booster vaccine dose approved").value == TOPIC_LABELS[1]
    assert topics.topic_label_baseline(text="Bill Gates microchip in the vaccine").value == TOPIC_LABELS[6]
    assert topics.topic_label_baseline(text="Great football match tonight").value == "not health"
