from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest


def site(request: HttpRequest) -> dict[str, object]:
    """What every page needs to say which generator is active (LLM or offline baseline)."""
    return {
        "llm_configured": bool(settings.LLM_BASE_URL),
        "llm_model": settings.LLM_MODEL,
        "embedded_mode": not settings.DATABASE_URL,
    }
