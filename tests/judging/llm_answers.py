"""Scripted answers per judge stage for the shared loopback LLM (no Django imports)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def stage_of(messages: list[dict[str, Any]]) -> str:
    """Which judge a request is for, from its prompt."""
    user = messages[-1]["content"]
    if "is this snippet relevant" in user:
        return "relevance"
    if "faithful to the snippets" in user:
        return "correctness"
    if "find this note helpful" in user:
        return "helpfulness"
    return "other"


def answers(**by_stage: str) -> Callable[[list[dict[str, Any]]], str]:
    """A responder for `llm_server.respond_with`: one answer per judge stage."""
    return lambda messages: by_stage[stage_of(messages)]
