"""Finished short-lived work is pruned: pre-flights and head starts older than the retention."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.conf import settings
from django.utils import timezone

from evidence.models import EvidenceSource, Prefetch
from judging.models import PreflightCheck
from notes.tasks import prune_finished_work

pytestmark = pytest.mark.django_db


def _preflight(user: Any, state: str, finished_days_ago: float | None) -> int:
    finished = None if finished_days_ago is None else timezone.now() - timedelta(days=finished_days_ago)
    check = PreflightCheck.objects.create(
        requested_by=user, post_text="post", note_text="note", state=state, finished_at=finished
    )
    return check.pk


def _prefetch(url: str, state: str, days_ago: float, source: EvidenceSource | None = None) -> int:
    at = timezone.now() - timedelta(days=days_ago)
    row = Prefetch.objects.create(url=url, url_hash=url, state=state, source=source, created_at=at, updated_at=at)
    return row.pk


def test_it_deletes_finished_work_past_the_retention_and_keeps_the_rest(contributor: Any) -> None:
    days = settings.FINISHED_WORK_RETENTION_DAYS
    old, recent = days + 0.1, days - 0.1
    done_old = _preflight(contributor, PreflightCheck.State.DONE, old)
    failed_old = _preflight(contributor, PreflightCheck.State.FAILED, old)
    kept_checks = {
        _preflight(contributor, PreflightCheck.State.DONE, recent),
        _preflight(contributor, PreflightCheck.State.QUEUED, None),  # left to its lease, never pruned
        _preflight(contributor, PreflightCheck.State.RUNNING, None),
    }
    source = EvidenceSource.objects.create(url="https://example.org/a", url_hash="a")
    _prefetch("https://example.org/a", Prefetch.State.READY, old, source)
    _prefetch("https://example.org/b", Prefetch.State.FAILED, old)
    kept_prefetches = {
        _prefetch("https://example.org/c", Prefetch.State.READY, recent),
        _prefetch("https://example.org/d", Prefetch.State.QUEUED, old),
    }

    assert prune_finished_work() == {"preflights": 2, "prefetches": 2}

    assert set(PreflightCheck.objects.values_list("pk", flat=True)) == kept_checks
    assert not PreflightCheck.objects.filter(pk__in=[done_old, failed_old]).exists()
    assert set(Prefetch.objects.values_list("pk", flat=True)) == kept_prefetches
    assert EvidenceSource.objects.filter(pk=source.pk).exists()  # the page read stays in the cache
    assert prune_finished_work() == {"preflights": 0, "prefetches": 0}


def test_beat_runs_it_at_least_daily() -> None:
    entry = settings.CELERY_BEAT_SCHEDULE["prune-finished-work"]
    assert entry["task"] == prune_finished_work.name
    assert 0 < float(entry["schedule"]) <= 86400  # type: ignore[arg-type]
