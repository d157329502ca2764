from __future__ import annotations

from judging import steps
from judging.llm import LLMClient
from judging.prompts import TOPIC_LABELS, Evidence, SourceNote
from tests.support.llm_server import Reply, ScriptedLLM

POST = "Vitamin C cures cancer, doctors won't tell you."
SNIPPETS = [
    Evidence(
        "High-dose vitamin C has been studied in cancer patients. Trials have not shown that it cures cancer. "
        "Some studies looked at quality of life.",
        "https://cancer.gov/vitc",
    ),
    Evidence("The weather in Paris is mild in spring.", "https://travel.example/paris"),
]


def test_it_labels_relevance_by_embedding_when_given_a_similarity() -> None:
    sims = {SNIPPETS[0].text: 0.61, SNIPPETS[1].text: 0.02}
    result = steps.relevance_baseline(post=POST, snippets=SNIPPETS, similarity=lambda a, b: sims[b])
    assert result.value is True
    assert result.producer == steps.Producer("baseline", "embedding-cosine-v1(t=0.30)")
    assert "Snippet 2: cosine similarity 0.020 < 0.30" in result.reasoning
    assert steps.relevance_baseline(post=POST, snippets=SNIPPETS[1:], similarity=lambda a, b: 0.1).value is False


def test_it_finds_no_lexical_relevance_for_an_unrelated_snippet() -> None:
    assert steps.relevance_baseline(post=POST, snippets=SNIPPETS[1:]).value is False
    assert steps.relevance_baseline(post=POST, snippets=SNIPPETS[:1]).value is True


def test_it_flags_unsupported_numbers_and_absolutes_in_correctness() -> None:
    good = steps.correctness_baseline(
        post=POST,
        note="Trials have not shown that high-dose vitamin C cures cancer.",
        snippets=SNIPPETS,
    )
    assert good.value is True, good.reasoning
    bad = steps.correctness_baseline(
        post=POST,
        note="Vitamin C never helps: 95% of cancer trials proved it useless.",
        snippets=SNIPPETS,
    )
    assert bad.value is False
    assert "95%" in bad.reasoning and "never" in bad.reasoning
    assert bad.producer.kind == "baseline"


def test_it_checks_visible_helpfulness_criteria() -> None:
    ok = steps.helpfulness_baseline(
        post=POST,
        note="Clinical trials have not shown that high-dose vitamin C cures cancer.",
        urls=["https://cancer.gov/vitc"],
    )
    assert ok.value is True
    no_source = steps.helpfulness_baseline(
        post=POST,
        note="Clinical trials have not shown that high-dose vitamin C cures cancer.",
        urls=[],
    )
    assert no_source.value is False and "no source" in no_source.reasoning
    opinion = steps.helpfulness_baseline(
        post=POST,
        note="I think these people are idiots and vitamin C does nothing.",
        urls=["https://x.org"],
    )
    assert opinion.value is False and "opinion" in opinion.reasoning and "hostile" in opinion.reasoning


def test_it_drafts_extractively_within_budget_from_snippet_sentences() -> None:
    result = steps.draft_note_baseline(post=POST, snippets=SNIPPETS, budget=120)
    assert result.producer == steps.Producer("baseline", "extractive-lexical-v1")
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
    values = [steps.draft_note_llm(llm_client, post=POST, snippets=SNIPPETS, budget=150).value for _ in range(4)]
    assert values == [
        None,
        None,
        None,
        "Trials have not shown that vitamin C cures cancer.",
    ]
    assert "at most 150 characters" in llm_server.requests[0]["messages"][-1]["content"]


def test_it_parses_search_queries_and_has_a_keyword_baseline(llm_server: ScriptedLLM, llm_client: LLMClient) -> None:
    llm_server.script(Reply("1. vitamin C cancer trials\n2. high dose ascorbate oncology\n3. vitamin C cure myth"))
    assert steps.search_queries_llm(llm_client, post=POST, n=3).value == [
        "vitamin C cancer trials",
        "high dose ascorbate oncology",
        "vitamin C cure myth",
    ]
    base = steps.search_queries_baseline(post=POST, n=3)
    assert base.producer.kind == "baseline" and len(base.value) == 3
    assert base.value[0] == "vitamin cures cancer doctors won't tell"


def test_it_picks_one_index_or_none(llm_server: ScriptedLLM, llm_client: LLMClient) -> None:
    cands = [
        ("Paris weather", "mild spring", "https://t/1"),
        ("Vitamin C and cancer", "trials of vitamin C", "https://c/2"),
    ]
    llm_server.script(Reply("**1**"), Reply("5"))
    assert steps.pick_most_useful_llm(llm_client, post=POST, candidates=cands).value == 1
    assert steps.pick_most_useful_llm(llm_client, post=POST, candidates=cands).value is None
    assert steps.pick_most_useful_baseline(post=POST, candidates=cands).value == 1


def test_it_checks_principles(llm_server: ScriptedLLM, llm_client: LLMClient) -> None:
    llm_server.script(Reply("Loaded words.\nFinal decision: no"))
    result = steps.principle_check_llm(llm_client, text="Idiots believe this.", principle="neutral")
    assert result.value is False and result.prompt_version == "principle-neutral-v1"
    assert (
        steps.principle_check_baseline(text="In my opinion it probably works.", principle="no_opinion").value is False
    )
    assert steps.principle_check_baseline(text="Trials found no effect.", principle="no_opinion").value is True


def test_it_samples_supernote_candidates_with_the_given_temperature(
    llm_server: ScriptedLLM, llm_client: LLMClient
) -> None:
    notes = [
        SourceNote("Note A", helpful=1, not_helpful=5, tags=("opinion",)),
        SourceNote("Note B", helpful=6, somewhat=1),
    ]
    llm_server.script(Reply("A merged note."))
    result = steps.supernote_candidate_llm(llm_client, post=POST, notes=notes)
    assert result.value == "A merged note."
    assert (llm_server.requests[0]["temperature"], llm_server.requests[0]["top_p"]) == (
        0.95,
        0.8,
    )
    assert "Tags given by raters: opinion" in llm_server.requests[0]["messages"][-1]["content"]
    base = steps.supernote_candidate_baseline(post=POST, notes=notes)
    assert base.value == "Note B" and base.producer.name == "best-source-note-v1"


def test_it_labels_topics(llm_server: ScriptedLLM, llm_client: LLMClient) -> None:
    llm_server.script(Reply("4"))
    assert steps.topic_label_llm(llm_client, text=POST).value == TOPIC_LABELS[3]
    assert steps.topic_label_baseline(text="New booster vaccine dose approved").value == TOPIC_LABELS[1]
    assert steps.topic_label_baseline(text="Bill Gates microchip in the vaccine").value == TOPIC_LABELS[6]
    assert steps.topic_label_baseline(text="Great football match tonight").value == "not health"
