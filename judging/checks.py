"""Start-up check that the judges' timeouts nest (STYLE.md): LLM client timeout < task soft
limit < hard limit < broker visibility timeout, and the work lease (renewed by a heartbeat while
a stage runs) < visibility timeout, so the sweeper, not the broker, recovers a lost worker's run."""

from __future__ import annotations

import itertools
from typing import Any

from django.conf import settings
from django.core.checks import Error, Warning, register


@register()
def judge_timeouts_nest(app_configs: Any = None, **kwargs: Any) -> list[Any]:
    chain = [
        ("LLM_TIMEOUT_S", float(settings.LLM_TIMEOUT_S)),
        ("CELERY_TASK_SOFT_TIME_LIMIT", float(settings.CELERY_TASK_SOFT_TIME_LIMIT)),
        ("CELERY_TASK_TIME_LIMIT", float(settings.CELERY_TASK_TIME_LIMIT)),
        ("CELERY_VISIBILITY_TIMEOUT", float(settings.CELERY_VISIBILITY_TIMEOUT)),
    ]
    pairs = [*itertools.pairwise(chain), (("WORK_LEASE_S", float(settings.WORK_LEASE_S)), chain[-1])]
    problems: list[Any] = [
        Error(f"{a} ({va:g}) must be smaller than {b} ({vb:g})", id="judging.E001")
        for (a, va), (b, vb) in pairs
        if va >= vb
    ]
    retries = settings.LLM_MAX_RETRIES
    backoff = sum(min(settings.LLM_BACKOFF_BASE_S * 2**i, settings.LLM_BACKOFF_MAX_S) for i in range(retries))
    worst = settings.JUDGE_PARSE_ATTEMPTS * ((retries + 1) * settings.LLM_TIMEOUT_S + backoff)
    if worst >= settings.CELERY_TASK_SOFT_TIME_LIMIT:
        problems.append(
            Warning(
                f"a judge stage may take {worst:g}s (JUDGE_PARSE_ATTEMPTS x (LLM_MAX_RETRIES+1) x LLM_TIMEOUT_S "
                f"+ backoff), more than CELERY_TASK_SOFT_TIME_LIMIT ({settings.CELERY_TASK_SOFT_TIME_LIMIT}s)",
                id="judging.W001",
            )
        )
    return problems
