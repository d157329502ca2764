"""The configured LLM client, shared by every app (evidence, judging, notes): built from settings
and the environment by `crowdnotes_site.lib.llm.client.LLMConfig.from_settings`; and the per-user
daily budget of LLM calls that the client of someone's work charges."""

from __future__ import annotations

import functools
import os

from django.conf import settings
from django.db import connection
from django.utils import timezone

from crowdnotes_site.lib.llm.client import CountedClient, LLMBudgetExceeded, LLMClient, LLMConfig
from crowdnotes_site.models import LlmUsage


def llm_client(*, owner: int | None = None) -> LLMClient | None:
    """The configured LLM client, or None when LLM_BASE_URL is unset (offline baselines).

    With `owner` (the user whose work this is), every call counts against that user's daily
    budget (LLM_DAILY_CALLS_PER_USER; `llm_usage_charge`); past it a call raises LLMBudgetExceeded
    (a permanent error: the run fails visibly, saying why). Work of nobody in particular (the
    periodic Supernote job, commands, the benchmark) is not counted."""
    config = LLMConfig.from_settings(settings, environ=os.environ)
    if not config.configured:
        return None
    # Building the SDK client loads the TLS trust store (~30 ms): once per configuration.
    key = repr(config)
    client = _clients.get(key)
    if client is None:
        client = _clients[key] = LLMClient(config)
    if owner is None:
        return client
    return CountedClient(client, charge=functools.partial(llm_usage_charge, user_id=owner))


_clients: dict[str, LLMClient] = {}


def llm_answers() -> bool:
    """Whether the configured LLM answers now: one tiny completion (the beat sweep's probe before it
    re-queues work an LLM outage failed). False when it is not configured or any error comes back."""
    client = llm_client()
    if client is None:
        return False
    try:
        client.complete(task="health", messages=[{"role": "user", "content": "Reply with OK."}], max_tokens=2)
    except Exception:  # any failure means "not yet": the next sweep asks again
        return False
    return True


def llm_usage_charge(*, user_id: int) -> int:
    """Count one LLM call for the user today (UTC) and return the day's count; refuse it
    (LLMBudgetExceeded, nothing counted) once the day's LLM_DAILY_CALLS_PER_USER are used. One
    atomic upsert, so concurrent workers never lose a count."""
    budget = settings.LLM_DAILY_CALLS_PER_USER
    day = timezone.now().date()
    table = connection.ops.quote_name(LlmUsage._meta.db_table)
    # The WHERE makes the update a no-op at the budget: no row comes back, nothing is counted.
    # The table name comes from the model, never from input.
    sql = f"INSERT INTO {table} (user_id, day, calls) VALUES (%s, %s, 1) ON CONFLICT (user_id, day) DO UPDATE SET calls = {table}.calls + 1 WHERE %s = 0 OR {table}.calls < %s RETURNING calls"  # noqa: S608
    with connection.cursor() as cursor:
        cursor.execute(sql, [user_id, day, budget, budget])
        row = cursor.fetchone()
    if row is None:
        raise LLMBudgetExceeded(
            f"the daily LLM budget of {budget} calls for this user is used up; it starts again at 00:00 UTC"
        )
    return int(row[0])
