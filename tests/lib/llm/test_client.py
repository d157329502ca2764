from __future__ import annotations

import pytest

from crowdnotes_site.lib.llm.client import (
    LLMClient,
    LLMConfig,
    LLMNotConfigured,
    LLMPermanentError,
    LLMTransientError,
    parse_final_decision,
    parse_lines,
    parse_single_integer,
    parse_single_line,
)
from tests.support.llm_server import Reply, ScriptedLLM


def test_it_returns_text_usage_latency_and_model(llm_server: ScriptedLLM, llm_client: LLMClient) -> None:
    llm_server.script(Reply("Final decision: yes"))
    result = llm_client.complete(task="relevance", messages=[{"role": "user", "content": "hi"}])
    assert result.text == "Final decision: yes"
    assert result.model == "stub-model"
    # the scripted server counts words as tokens
    assert (result.prompt_tokens, result.completion_tokens, result.total_tokens) == (1, 3, 4)
    assert result.attempts == 1
    assert result.latency_s >= 0
    assert llm_server.requests[0]["temperature"] == 0.0
    assert llm_server.requests[0]["messages"] == [{"role": "user", "content": "hi"}]


def test_it_uses_the_per_task_model_override(llm_server: ScriptedLLM, sleeps: list[float]) -> None:
    config = LLMConfig.from_settings(
        {
            "LLM_BASE_URL": llm_server.base_url,
            "LLM_MODEL": "base",
            "LLM_MODEL_DRAFT": "big-writer",
        }
    )
    client = LLMClient(config, sleep=sleeps.append)
    llm_server.script(Reply("a"), Reply("b"))
    assert client.complete(task="draft", messages=[]).model == "big-writer"
    assert client.complete(task="relevance", messages=[]).model == "base"
    assert [r["model"] for r in llm_server.requests] == ["big-writer", "base"]


def test_it_retries_429_then_succeeds_with_backoff(
    llm_server: ScriptedLLM, llm_client: LLMClient, sleeps: list[float]
) -> None:
    llm_server.script(Reply(status=429), Reply(status=429), Reply("ok"))
    result = llm_client.complete(task="t", messages=[])
    assert result.text == "ok"
    assert result.attempts == 3
    assert sleeps == [0.5, 1.0]  # exponential


def test_it_honours_retry_after_within_the_cap(
    llm_server: ScriptedLLM, llm_client: LLMClient, sleeps: list[float]
) -> None:
    llm_server.script(
        Reply(status=429, headers={"retry-after": "3"}),
        Reply(status=429, headers={"retry-after": "100"}),
        Reply("ok"),
    )
    llm_client.complete(task="t", messages=[])
    assert sleeps == [3.0, 8.0]


def test_it_fails_after_bounded_5xx_retries(
    llm_server: ScriptedLLM, llm_client: LLMClient, sleeps: list[float]
) -> None:
    llm_server.script(Reply(status=500), Reply(status=502), Reply(status=503), Reply("too late"))
    with pytest.raises(LLMTransientError, match="HTTP 503 after 3 attempts"):
        llm_client.complete(task="t", messages=[])
    assert len(llm_server.requests) == 3  # 1 try + max_retries=2
    assert len(sleeps) == 2


def test_it_does_not_retry_a_4xx(llm_server: ScriptedLLM, llm_client: LLMClient) -> None:
    llm_server.script(Reply(status=400), Reply("never"))
    with pytest.raises(LLMPermanentError, match="HTTP 400"):
        llm_client.complete(task="t", messages=[])
    assert len(llm_server.requests) == 1


def test_it_times_out_and_retries(llm_server: ScriptedLLM, sleeps: list[float]) -> None:
    client = LLMClient(
        LLMConfig(base_url=llm_server.base_url, model="m", timeout_s=0.3, max_retries=1),
        sleep=sleeps.append,
    )
    llm_server.script(Reply("slow", delay_s=1.5), Reply("fast"))
    assert client.complete(task="t", messages=[]).text == "fast"
    assert len(sleeps) == 1


def test_it_reports_timeouts_as_transient(llm_server: ScriptedLLM, sleeps: list[float]) -> None:
    client = LLMClient(
        LLMConfig(base_url=llm_server.base_url, model="m", timeout_s=0.2, max_retries=0),
        sleep=sleeps.append,
    )
    llm_server.script(Reply("slow", delay_s=1.0))
    with pytest.raises(LLMTransientError, match="timeout"):
        client.complete(task="t", messages=[])


def test_it_reports_connection_errors_as_transient(sleeps: list[float]) -> None:
    client = LLMClient(
        LLMConfig(base_url="http://127.0.0.1:9/v1", model="m", timeout_s=1, max_retries=1),
        sleep=sleeps.append,
    )
    with pytest.raises(LLMTransientError, match="connection error after 2 attempts"):
        client.complete(task="t", messages=[])


def test_it_rejects_a_malformed_response(llm_server: ScriptedLLM, llm_client: LLMClient) -> None:
    llm_server.script(Reply(body='{"id": "x", "object": "chat.completion", "choices": []}'))
    with pytest.raises(LLMPermanentError, match="no choices"):
        llm_client.complete(task="t", messages=[])


def test_it_rejects_a_non_json_body(llm_server: ScriptedLLM, llm_client: LLMClient) -> None:
    llm_server.script(Reply(body="<html>oops</html>"))
    with pytest.raises(LLMPermanentError):
        llm_client.complete(task="t", messages=[])


def test_it_refuses_to_build_without_a_base_url() -> None:
    config = LLMConfig.from_settings({"LLM_BASE_URL": "", "LLM_MODEL": "m"})
    assert not config.configured
    with pytest.raises(LLMNotConfigured):
        LLMClient(config)


def test_it_reads_settings_objects() -> None:
    class S:
        LLM_BASE_URL = "http://x/v1"
        LLM_MODEL = "m"
        LLM_MODEL_TOPIC = "small"
        LLM_TIMEOUT_S = 7
        LLM_MAX_RETRIES = 4

    config = LLMConfig.from_settings(S())
    assert (config.base_url, config.timeout_s, config.max_retries) == (
        "http://x/v1",
        7.0,
        4,
    )
    assert config.model_for("topic") == "small" and config.model_for("draft") == "m"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Reasoning...\nFinal decision: yes", True),
        ("final decision: NO", False),
        ("**Final decision:** Yes.", True),
        ("__Final Decision: no__", False),
        ("Final decision: **yes**!", True),
        ("### Final decision - no", False),
        ("> Final decision: `yes`", True),
        ("Final decision: yes\n...on reflection...\nFinal decision: no", False),
        ("Final decision: no\nFinal decision: yes.", True),
        ("Final decision: yes or no", None),
        ("The answer is yes.", None),
        ("Final decision: maybe", None),
        ("", None),
        ("I would say the final decision: yes", None),
    ],
)
def test_it_parses_messy_final_decisions(text: str, expected: bool | None) -> None:
    assert parse_final_decision(text) is expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("3", 3),
        ("**[3]**", 3),
        ("Index: 3.", 3),
        ("The most useful is result 2", 2),
        ("1 or 2", None),
        ("none", None),
        ("3.5", None),
        ("9", None),
        ("Answer: 3 (item 3)", 3),
    ],
)
def test_it_parses_a_single_integer(text: str, expected: int | None) -> None:
    assert parse_single_integer(text, lo=0, hi=5) == expected


def test_it_parses_a_single_line() -> None:
    assert parse_single_line('  "Vaccines do not cause autism."  \n') == "Vaccines do not cause autism."
    assert parse_single_line("```\nOne line\n```") == "One line"
    assert parse_single_line("Line one\nLine two") is None
    assert parse_single_line("   ") is None


def test_it_parses_listed_lines() -> None:
    assert parse_lines('1. first query\n- second\n\n(3) "third"') == [
        "first query",
        "second",
        "third",
    ]


def test_it_reads_task_overrides_from_the_environment_and_a_judge_family() -> None:
    config = LLMConfig.from_settings(
        {"LLM_BASE_URL": "http://x/v1", "LLM_MODEL": "m"},
        environ={"LLM_MODEL_JUDGE": "judge-model", "LLM_MODEL_JUDGE_HELPFULNESS": "h-model", "PATH": "/bin"},
    )
    assert config.model_for("judge_relevance") == "judge-model"
    assert config.model_for("judge_helpfulness") == "h-model"
    assert config.model_for("draft") == "m"
