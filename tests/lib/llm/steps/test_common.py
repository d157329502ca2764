from __future__ import annotations

from crowdnotes_site.lib.llm.client import LLMClient
from crowdnotes_site.lib.llm.steps import (
    PROMPT_VERSIONS,
    compare,
    drafting,
    judges,
    principles,
    search,
    supernote,
    topics,
)
from crowdnotes_site.lib.llm.steps.common import Producer
from tests.lib.llm.steps.examples import POST, SNIPPETS
from tests.support.llm_server import Reply, ScriptedLLM

FAMILIES = (drafting, judges, search, principles, supernote, topics, compare)


def test_it_parses_a_producer_label_back() -> None:
    for producer in (Producer("llm", "gpt-4.1-mini"), Producer("baseline", "extractive-lexical-v1")):
        assert Producer.from_label(producer.label) == producer
    assert Producer.from_label("llm:org/model:8b") == Producer("llm", "org/model:8b")


def test_it_collects_every_family_prompt_version_once() -> None:
    keys = [key for family in FAMILIES for key in family.VERSIONS]
    assert len(keys) == len(set(keys)) == len(PROMPT_VERSIONS)
    assert len(set(PROMPT_VERSIONS.values())) == len(PROMPT_VERSIONS)


def test_it_records_the_family_version_on_llm_and_baseline_results(
    llm_server: ScriptedLLM, llm_client: LLMClient
) -> None:
    llm_server.script(Reply("Relevant.\nFinal decision: yes"))
    llm = judges.relevance_llm(llm_client, post=POST, snippets=SNIPPETS)
    base = judges.correctness_baseline(post=POST, note="Trials found no cure.", snippets=SNIPPETS)
    draft = drafting.draft_note_baseline(post=POST, snippets=SNIPPETS, budget=120)
    assert (llm.prompt_version, base.prompt_version, draft.prompt_version) == (
        PROMPT_VERSIONS["relevance"],
        PROMPT_VERSIONS["correctness"],
        PROMPT_VERSIONS["draft"],
    )
