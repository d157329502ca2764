from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from crowdnotes_site.lib.llm.classifier import JudgedNote
from crowdnotes_site.lib.llm.client import LLMClient, LLMConfig
from crowdnotes_site.lib.llm.pipeline import (
    JudgeInput,
    build_judges,
    content_hash,
    helpful_from,
    next_stage,
    run_pipeline,
)
from crowdnotes_site.lib.llm.steps import judges
from crowdnotes_site.lib.llm.steps.common import Evidence, split_data_block
from tests.judging.llm_answers import stage_of
from tests.support.llm_server import Reply, ScriptedLLM

POST = "The MMR vaccine causes autism in children, doctors are hiding it."
SNIPPETS = (
    Evidence(
        "Large studies of over 650,000 children found no link between the MMR vaccine and autism.",
        "https://cdc.gov/a",
    ),
)
NOTE = "Large studies of over 650,000 children found no link between the MMR vaccine and autism."


def _inp(**kw: Any) -> JudgeInput:
    base: dict[str, Any] = {
        "post": POST,
        "note": NOTE,
        "urls": ("https://cdc.gov/a",),
        "snippets": SNIPPETS,
    }
    base.update(kw)
    return JudgeInput(**base)


def _answers(server: ScriptedLLM, **by_stage: str) -> None:
    server.respond_with(lambda messages: by_stage[stage_of(messages)])


def test_it_passes_a_note_through_all_three_stages_in_order(llm_server: ScriptedLLM, llm_client: LLMClient) -> None:
    _answers(
        llm_server,
        relevance="On point.\nFinal decision: yes",
        correctness="Faithful.\n**Final decision: Yes**",
        helpfulness="Clear, sourced.\nFinal decision: yes.",
    )
    result = run_pipeline(_inp(), build_judges(client=llm_client))
    assert [s.stage for s in result.stages] == [
        "relevance",
        "correctness",
        "helpfulness",
    ]
    assert [stage_of(r["messages"]) for r in llm_server.requests] == [
        "relevance",
        "correctness",
        "helpfulness",
    ]
    assert result.helpful is True
    assert result.stages[0].reasoning == "Snippet 1: On point."
    assert result.stages[0].judge == "llm:stub-model"
    assert result.stages[2].prompt_tokens == _words(llm_server.requests[2])


def test_it_stops_after_a_failed_relevance(llm_server: ScriptedLLM, llm_client: LLMClient) -> None:
    _answers(llm_server, relevance="Off topic.\nFinal decision: no")
    result = run_pipeline(_inp(), build_judges(client=llm_client))
    assert [(s.stage, s.verdict) for s in result.stages] == [("relevance", "no")]
    assert result.helpful is False
    assert len(llm_server.requests) == 1


def test_it_skips_helpfulness_when_correctness_fails(llm_server: ScriptedLLM, llm_client: LLMClient) -> None:
    _answers(
        llm_server,
        relevance="Final decision: yes",
        correctness="Exaggerates.\nFinal decision: no",
    )
    result = run_pipeline(_inp(), build_judges(client=llm_client))
    assert [(s.stage, s.verdict) for s in result.stages] == [
        ("relevance", "yes"),
        ("correctness", "no"),
    ]
    assert result.helpful is False


def test_it_retries_an_unparsable_answer_then_reports_error(llm_server: ScriptedLLM, llm_client: LLMClient) -> None:
    _answers(llm_server, relevance="Hmm, hard to say.")
    result = run_pipeline(_inp(), build_judges(client=llm_client), max_attempts=3)
    assert [(s.stage, s.verdict) for s in result.stages] == [("relevance", "error")]
    assert result.stages[0].attempts == 3
    assert "no parsable final decision" in result.stages[0].error
    assert result.helpful is None
    assert len(llm_server.requests) == 3


def test_it_uses_a_parsable_retry(llm_server: ScriptedLLM, llm_client: LLMClient) -> None:
    llm_server.script(Reply("I think so"), Reply("Final decision: no"))
    result = run_pipeline(_inp(), build_judges(client=llm_client))
    assert (result.stages[0].verdict, result.stages[0].attempts) == ("no", 2)


def test_it_reports_a_persistent_llm_failure_as_error(llm_server: ScriptedLLM, llm_client: LLMClient) -> None:
    llm_server.script(*[Reply(status=503) for _ in range(3)])
    result = run_pipeline(_inp(), build_judges(client=llm_client))
    assert result.stages[0].verdict == "error"
    assert "HTTP 503" in result.stages[0].error
    assert result.helpful is None


def test_it_truncates_only_at_helpfulness(llm_server: ScriptedLLM, llm_client: LLMClient) -> None:
    _answers(
        llm_server,
        relevance="Final decision: yes",
        correctness="Final decision: yes",
        helpfulness="Final decision: yes",
    )
    long_note = ("Studies found no link between the vaccine and autism. " * 8) + "See https://who.int/x"
    urls = ("https://cdc.gov/a", "https://nih.gov/b")
    result = run_pipeline(_inp(note=long_note, urls=urls), build_judges(client=llm_client))
    correctness, helpfulness = result.stages[1], result.stages[2]
    assert correctness.note_text_judged == long_note
    assert split_data_block(llm_server.requests[1]["messages"][-1]["content"])[1]["note"] == long_note
    judged = helpfulness.note_text_judged
    assert "http" not in judged
    assert len(judged) <= 280 - 3  # three URLs count 1 each
    assert helpfulness.inputs["truncated"] is True
    assert split_data_block(llm_server.requests[2]["messages"][-1]["content"])[1]["note"] == judged


def test_it_runs_offline_with_labelled_baselines() -> None:
    result = run_pipeline(_inp(), build_judges(client=None))
    assert [s.judge_kind for s in result.stages] == ["baseline"] * 3
    assert result.stages[0].judge_name == "lexical-overlap-v1+claim-terms-v1+note-on-claim-v1"
    assert result.helpful is True


def test_it_uses_the_classifier_for_helpfulness_when_offline() -> None:
    class Model:
        version = "helpfulness-clf-test"
        threshold = 0.5

        def predict_proba(self, notes: Sequence[JudgedNote]) -> list[float]:
            return [0.2 for _ in notes]

    judges = build_judges(client=None, classifier=Model())
    result = run_pipeline(_inp(), judges)
    assert result.stages[2].judge == "classifier:helpfulness-clf-test"
    assert result.stages[2].verdict == "no"


def test_it_lets_settings_choose_the_backend_per_stage(llm_server: ScriptedLLM, llm_client: LLMClient) -> None:
    _answers(llm_server, correctness="Final decision: yes")
    judges = build_judges(client=llm_client, backends={"relevance": "baseline", "helpfulness": "baseline"})
    result = run_pipeline(_inp(), judges)
    assert [s.judge_kind for s in result.stages] == ["baseline", "llm", "baseline"]
    assert [stage_of(r["messages"]) for r in llm_server.requests] == ["correctness"]


def test_it_hashes_the_content_so_edits_invalidate() -> None:
    assert content_hash(_inp()) == content_hash(_inp())
    assert content_hash(_inp()) != content_hash(_inp(note=NOTE + " Edited."))
    assert content_hash(_inp()) != content_hash(_inp(snippets=(Evidence("other"),)))


def test_it_computes_the_next_stage_and_outcome() -> None:
    assert next_stage([]) == "relevance"
    assert next_stage(["yes"]) == "correctness"
    assert next_stage(["yes", "no"]) is None
    assert next_stage(["yes", "yes", "yes"]) is None
    assert helpful_from(["yes", "yes", "yes"]) is True
    assert helpful_from(["yes", "error"]) is None
    assert helpful_from(["no"]) is False


def test_it_does_not_build_an_llm_judge_without_an_endpoint() -> None:
    import pytest

    with pytest.raises(ValueError, match="LLM_BASE_URL"):
        build_judges(client=None, backends={"relevance": "llm"})
    assert not LLMConfig().configured


def test_it_checks_each_snippet_on_its_own_until_one_is_relevant(
    llm_server: ScriptedLLM, llm_client: LLMClient
) -> None:
    snippets = (Evidence("Paris weather."), Evidence("MMR studies found no autism link."), Evidence("Unused."))
    llm_server.script(Reply("Off topic.\nFinal decision: no"), Reply("On point.\nFinal decision: yes"))
    result = run_pipeline(
        _inp(snippets=snippets), {"relevance": build_judges(client=llm_client)["relevance"]} | _stop_after_relevance()
    )
    rel = result.stages[0]
    assert rel.verdict == "yes"
    assert rel.reasoning == "Snippet 1: Off topic.\nSnippet 2: On point."
    assert len(llm_server.requests) == 2  # snippet 3 never asked
    assert "Paris weather." in llm_server.requests[0]["messages"][-1]["content"]
    assert "Paris weather." not in llm_server.requests[1]["messages"][-1]["content"]
    assert rel.prompt_tokens == _words(*llm_server.requests) and rel.extra["snippet_verdicts"] == [False, True]


def test_it_reports_relevance_error_when_no_snippet_passes_and_one_is_unparsable(
    llm_server: ScriptedLLM, llm_client: LLMClient
) -> None:
    snippets = (Evidence("A."), Evidence("B."))
    llm_server.script(Reply("Final decision: no"), Reply("unsure"), Reply("Final decision: no"), Reply("unsure"))
    result = run_pipeline(_inp(snippets=snippets), build_judges(client=llm_client), max_attempts=2)
    assert (result.stages[0].verdict, result.stages[0].attempts, result.helpful) == ("error", 2, None)


def _stop_after_relevance() -> dict[str, Any]:
    def never(_: JudgeInput) -> Any:
        raise AssertionError("later stages are not part of this test")

    return {
        "correctness": lambda i: judges.correctness_baseline(post=i.post, note="zzz", snippets=()),
        "helpfulness": never,
    }


def _words(*requests: dict[str, Any]) -> int:
    """Prompt tokens as the scripted server counts them (words)."""
    return sum(len(m["content"].split()) for r in requests for m in r["messages"])
