from __future__ import annotations

from judging.steps import judges
from judging.steps.common import Producer
from tests.judging.steps.examples import POST, SNIPPETS


def test_it_labels_relevance_by_embedding_when_given_a_similarity() -> None:
    sims = {SNIPPETS[0].text: 0.61, SNIPPETS[1].text: 0.02}
    result = judges.relevance_baseline(post=POST, snippets=SNIPPETS, similarity=lambda a, b: sims[b])
    assert result.value is True
    assert result.producer == Producer("baseline", "embedding-cosine-v1(t=0.30)")
    assert "Snippet 2: cosine similarity 0.020 < 0.30" in result.reasoning
    assert judges.relevance_baseline(post=POST, snippets=SNIPPETS[1:], similarity=lambda a, b: 0.1).value is False


def test_it_finds_no_lexical_relevance_for_an_unrelated_snippet() -> None:
    assert judges.relevance_baseline(post=POST, snippets=SNIPPETS[1:]).value is False
    assert judges.relevance_baseline(post=POST, snippets=SNIPPETS[:1]).value is True


def test_it_flags_unsupported_numbers_and_absolutes_in_correctness() -> None:
    good = judges.correctness_baseline(
        post=POST,
        note="Trials have not shown that high-dose vitamin C cures cancer.",
        snippets=SNIPPETS,
    )
    assert good.value is True, good.reasoning
    bad = judges.correctness_baseline(
        post=POST,
        note="Vitamin C never helps: 95% of cancer trials proved it useless.",
        snippets=SNIPPETS,
    )
    assert bad.value is False
    assert "95%" in bad.reasoning and "never" in bad.reasoning
    assert bad.producer.kind == "baseline"


def test_it_checks_visible_helpfulness_criteria() -> None:
    ok = judges.helpfulness_baseline(
        post=POST,
        note="Clinical trials have not shown that high-dose vitamin C cures cancer.",
        urls=["https://cancer.gov/vitc"],
    )
    assert ok.value is True
    no_source = judges.helpfulness_baseline(
        post=POST,
        note="Clinical trials have not shown that high-dose vitamin C cures cancer.",
        urls=[],
    )
    assert no_source.value is False and "no source" in no_source.reasoning
    opinion = judges.helpfulness_baseline(
        post=POST,
        note="I think these people are idiots and vitamin C does nothing.",
        urls=["https://x.org"],
    )
    assert opinion.value is False and "opinion" in opinion.reasoning and "hostile" in opinion.reasoning
