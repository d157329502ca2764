from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.http import HttpRequest

from crowdnotes_site import banners
from crowdnotes_site.lib.text_rules import NOTE_MAX_CHARS

# Written by scripts/demo.sh (the start time, HH:MM UTC) while its background warm-up runs.
WARMUP_MARKER = "warmup.running"


# Written by judging.benchmark.queued (the time the run was queued) while the demo's benchmark is queued or runs.
BENCHMARK_MARKER = "benchmark.running"


def _started(marker: str) -> str | None:
    try:
        return (Path(settings.VAR_DIR) / marker).read_text().strip() or "?"
    except OSError:
        return None


# Written by scripts/lib/warmup.sh when a warm-up ends: how many seconds it took.
WARMUP_LAST = "warmup.last-seconds"


def warmup_last_minutes() -> int | None:
    """How long the last finished warm-up of this install took, in whole minutes (at least 1)."""
    seconds = _started(WARMUP_LAST)
    if seconds is None or not seconds.isdigit():
        return None
    return max(1, round(int(seconds) / 60))


def warmup_started() -> str | None:
    """When the demo's background warm-up started, while it runs; None otherwise."""
    return _started(WARMUP_MARKER)


def site(request: HttpRequest) -> dict[str, object]:
    """What every page needs: which generator is active (LLM or offline baseline), the note limit,
    and whether the demo's background warm-up is still running (and what it is doing)."""
    started = warmup_started()
    return {
        "warmup_started": started,
        "warmup_last_minutes": warmup_last_minutes() if started else None,
        "warmup": banners.warmup_progress() if started else None,
        "benchmark_started": _started(BENCHMARK_MARKER),
        "note_max_chars": NOTE_MAX_CHARS,
        "llm_configured": bool(settings.LLM_BASE_URL),
        "llm_model": settings.LLM_MODEL,
    }
