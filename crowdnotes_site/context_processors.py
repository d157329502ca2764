from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest

from crowdnotes_site.lib.text_rules import NOTE_MAX_CHARS


def site(request: HttpRequest) -> dict[str, object]:
    """What every page needs: which generator is active (LLM or offline baseline), the note limit."""
    return {
        "note_max_chars": NOTE_MAX_CHARS,
        "llm_configured": bool(settings.LLM_BASE_URL),
        "llm_model": settings.LLM_MODEL,
        "embedded_mode": not settings.DATABASE_URL,
    }
