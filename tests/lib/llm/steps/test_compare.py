"""The pairwise evidence comparator: the LLM's answer parsed (never guessed) and the baseline."""

from __future__ import annotations

from typing import Any

import pytest

from crowdnotes_site.lib.llm.steps.common import Evidence
from crowdnotes_site.lib.llm.steps.compare import compare_evidence_baseline, compare_evidence_llm, parse_comparison
from crowdnotes_site.llm import llm_client

POST = "The MMR vaccine causes autism."
ON_POINT = Evidence("Large studies of children found no link between the MMR vaccine and autism.", "https://a/")
OFF_TOPIC = Evidence("Sourdough bread needs an active starter and a hot oven.", "https://b/")


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("B is specific.\nFinal answer: B", "B"),
        ("Final answer: **tie**", "tie"),
        ("final answer: a.", "A"),
        ("Set A or B, hard to say", None),
        ("Final answer: C", None),
    ],
)
def test_it_parses_the_final_answer_line_only(text: str, value: str | None) -> None:
    assert parse_comparison(text) == value


def test_the_baseline_prefers_the_set_closer_to_the_post_and_ties_within_the_margin() -> None:
    result = compare_evidence_baseline(post=POST, set_a=[OFF_TOPIC], set_b=[OFF_TOPIC, ON_POINT])
    assert result.value == "B" and result.producer.label == "baseline:evidence-utility-lexical-v1"
    assert result.extra["score_b"] > result.extra["score_a"]
    assert compare_evidence_baseline(post=POST, set_a=[ON_POINT], set_b=[ON_POINT]).value == "tie"
    assert compare_evidence_baseline(post=POST, set_a=[ON_POINT], set_b=[]).value == "A"


def test_the_llm_step_asks_with_both_sets_and_keeps_its_reasoning(llm_server: Any) -> None:
    llm_server.script("Set B answers the claim directly.\nFinal answer: B")
    client = llm_client()
    assert client is not None
    result = compare_evidence_llm(client, post=POST, set_a=[OFF_TOPIC], set_b=[ON_POINT])
    assert result.value == "B" and result.producer.label == "llm:scripted-model"
    assert result.reasoning == "Set B answers the claim directly."
    asked = llm_server.requests[0]["messages"][1]["content"]
    assert "Evidence set A:" in asked and "Sourdough" in asked and "no link between the MMR" in asked
