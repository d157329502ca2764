from __future__ import annotations

from crowdnotes_site.lib.llm.client import LLMClient
from crowdnotes_site.lib.llm.steps import drafting
from crowdnotes_site.lib.llm.steps.common import Producer
from tests.lib.llm.steps.examples import POST, SNIPPETS
from tests.support.llm_server import Reply, ScriptedLLM


def test_it_drafts_extractively_within_budget_from_snippet_sentences() -> None:
    result = drafting.draft_note_baseline(post=POST, snippets=SNIPPETS, budget=120)
    assert result.producer == Producer("baseline", "extractive-lexical-v1")
    assert result.value and len(result.value) <= 120
    # the two sentences sharing most words with the post, in rank order; Paris never matches
    assert (
        result.value
        == "High-dose vitamin C has been studied in cancer patients. Trials have not shown that it cures cancer."
    )


def test_it_rejects_an_llm_draft_with_a_url_or_over_budget(llm_server: ScriptedLLM, llm_client: LLMClient) -> None:
    llm_server.script(
        Reply("Trials show no cure. https://cancer.gov"),
        Reply("x" * 200),
        Reply("Line one\nLine two"),
        Reply('"Trials have not shown that vitamin C cures cancer."'),
    )
    values = [drafting.draft_note_llm(llm_client, post=POST, snippets=SNIPPETS, budget=150).value for _ in range(4)]
    assert values == [
        None,
        None,
        None,
        "Trials have not shown that vitamin C cures cancer.",
    ]
    assert "at most 150 characters" in llm_server.requests[0]["messages"][-1]["content"]
