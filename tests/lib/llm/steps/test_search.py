from __future__ import annotations

from crowdnotes_site.lib.llm.client import LLMClient
from crowdnotes_site.lib.llm.steps import search
from crowdnotes_site.lib.llm.steps.common import DATA_RULE
from tests.lib.llm.steps.examples import POST
from tests.support.llm_server import Reply, ScriptedLLM


def test_it_parses_search_queries_from_the_llm(llm_server: ScriptedLLM, llm_client: LLMClient) -> None:
    llm_server.script(Reply("1. vitamin C cancer trials\n2. high dose ascorbate oncology\n3. vitamin C cure myth"))
    assert search.search_queries_llm(llm_client, post=POST, n=3).value == [
        "vitamin C cancer trials",
        "high dose ascorbate oncology",
        "vitamin C cure myth",
    ]
    assert llm_server.requests[-1]["temperature"] == 0.7


def test_its_offline_queries_are_made_of_the_claims_key_terms() -> None:
    base = search.search_queries_baseline(post=POST, n=5)
    assert base.producer.kind == "baseline" and base.producer.name == "key-terms-v4"
    # All key terms, then each phrase alone, never a lone word ("cancer"); hype and vague words
    # ("cures", "doctors", "won't tell") dropped, the phrase "vitamin c" kept whole and quoted (the
    # search requires every term of a query).
    assert base.value == ['"vitamin c" cancer', '"vitamin c"']
    assert "Key terms of the claim: vitamin c; cancer" in base.reasoning


def test_it_drops_near_duplicate_queries_by_similarity() -> None:
    same_meaning = {frozenset({"flu shot safety", "is the flu vaccine safe"})}

    def similarity(a: str, b: str) -> float:
        return 0.95 if frozenset({a, b}) in same_meaning else 0.1

    kept, dropped = search.drop_near_duplicates(
        ["flu shot safety", "is the flu vaccine safe", "Flu shot safety", "influenza deaths per year"],
        similarity=similarity,
    )
    assert kept == ["flu shot safety", "influenza deaths per year"]
    assert dropped == ["is the flu vaccine safe", "Flu shot safety"]


def test_it_picks_one_index_or_none(llm_server: ScriptedLLM, llm_client: LLMClient) -> None:
    cands = [
        ("Paris weather", "mild spring", "https://t/1"),
        ("Vitamin C and cancer", "trials of vitamin C", "https://c/2"),
    ]
    llm_server.script(Reply("It reports the trials.\nIndex: 1"), Reply("5"), Reply("Either 0 or 1"), Reply("**[0]**"))
    first = search.pick_most_useful_llm(llm_client, post=POST, candidates=cands)
    assert first.value == 1 and search.pick_reasoning(first.raw_output) == "It reports the trials."
    assert search.pick_most_useful_llm(llm_client, post=POST, candidates=cands).value is None  # out of range
    assert search.pick_most_useful_llm(llm_client, post=POST, candidates=cands).value is None  # ambiguous
    assert search.pick_most_useful_llm(llm_client, post=POST, candidates=cands).value == 0
    assert DATA_RULE in llm_server.requests[0]["messages"][0]["content"]
    assert search.pick_most_useful_baseline(post=POST, candidates=cands).value == 1


def test_its_baseline_adds_the_reliability_prior_transparently() -> None:
    cands = [("Vitamin C cures cancer", "a blog post", "https://blog/1"), ("Vitamin C and cancer", "", "https://nih/2")]
    plain = search.pick_most_useful_baseline(post=POST, candidates=cands)
    assert plain.value == 0  # more words in common
    weighted = search.pick_most_useful_baseline(
        post=POST, candidates=cands, priors=[("social", 0.1), ("health_authority", 1.0)], prior_weight=0.5
    )
    assert weighted.value == 1
    assert "0.5 × reliability prior 1.00 (health_authority)" in weighted.reasoning


def test_its_baseline_weighs_key_terms_only_beside_passage_relevance() -> None:
    cands = [("Vitamin C cures cancer", "a blog post", "https://blog/1"), ("Vitamin C and cancer", "", "https://nih/2")]
    weighed = search.pick_most_useful_baseline(
        post=POST, candidates=cands, relevance=[0.60, 0.55], coverage=[0.25, 1.0], coverage_weight=0.15
    )
    assert weighed.value == 1 and weighed.producer.label == "baseline:passage-relevance+key-terms+prior-v3"
    assert "0.550 + 0.15 × share of the claim's key terms 1.00" in weighed.reasoning
    # Without passage relevance (not every candidate screened) the title + snippet decide and the
    # reasoning does not claim a key-term share it did not use.
    titles = search.pick_most_useful_baseline(post=POST, candidates=cands, coverage=None, coverage_weight=0.15)
    assert "key terms" not in titles.reasoning and titles.producer.label == "baseline:lexical-relevance+prior-v1"
