"""Follow the notes written: X's notes_written pages stored with their outcomes (test mode) or status
and ratings (live), and what X decides from them: the admission criteria and the writing limit."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from crowdnotes_site.lib import xids
from xnotes import rules
from xnotes.budget import RateLimited
from xnotes.client import XClient
from xnotes.models import XProposal, XWrittenNote


@dataclass
class SyncStats:
    requests: int = 0
    notes: int = 0
    pages: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


def _ratings_of(item: dict[str, Any]) -> dict[str, Any]:
    for key in ("ratings", "rating_counts", "public_metrics"):
        value = item.get(key)
        if isinstance(value, dict):
            return {k: v for k, v in value.items() if isinstance(v, int | float)}
    return {}


def sync_written(*, client: XClient, max_pages: int = 20, test_mode: bool | None = None,
                 on_rate_limit: Callable[[RateLimited], None] | None = None,
                 on_page: Callable[[SyncStats], None] | None = None) -> SyncStats:  # fmt: skip
    """Page through notes_written (the current mode) and store each note with its evaluator
    outcomes (test mode) or status and ratings (live); proposals get their X note id back.
    `on_page` is called after each stored page (the task's progress). A page of another shape
    raises rules.XShapeError naming what X sent; the pages before it stay stored."""
    test_mode = settings.X_TEST_MODE if test_mode is None else test_mode
    stats = SyncStats()
    before = client.requests
    token: str | None = None
    while stats.pages < max_pages:
        try:
            payload = client.notes_written(test_mode=test_mode, pagination_token=token)
        except RateLimited as limited:
            if on_rate_limit is None:
                raise
            on_rate_limit(limited)
            continue
        rules.check_notes_written_shape(payload)
        stats.pages += 1
        now = timezone.now()
        with transaction.atomic():
            for item in payload.get("data") or []:
                x_note_id = str(item.get("id", ""))
                if not xids.X_ID.match(x_note_id):
                    continue
                info = item.get("info") or {}
                post_x_id = str(info.get("post_id", ""))
                outcomes = ((item.get("test_result") or {}).get("evaluation_outcome")) or []
                proposal = (
                    XProposal.objects.filter(x_note_id=x_note_id).first()
                    or XProposal.objects.filter(x_post_id=post_x_id, test_mode=test_mode).first()
                )
                if proposal is not None and not proposal.x_note_id:
                    proposal.x_note_id = x_note_id
                    proposal.save(update_fields=["x_note_id"])
                XWrittenNote.objects.update_or_create(
                    x_note_id=x_note_id,
                    defaults={
                        "x_post_id": post_x_id, "test_mode": test_mode, "text": str(info.get("text") or ""),
                        "classification": str(info.get("classification") or ""),
                        "status": str(item.get("status") or ""), "outcomes": outcomes if isinstance(outcomes, list) else [],
                        "ratings": _ratings_of(item), "created_at": xids.x_id_time(x_note_id), "synced_at": now,
                        "proposal": proposal,
                    },
                )  # fmt: skip
                stats.notes += 1
        if on_page is not None:
            stats.requests = client.requests - before
            on_page(stats)
        token = (payload.get("meta") or {}).get("next_token")
        if not token:
            break
    stats.requests = client.requests - before
    return stats


def admission_now() -> rules.Admission:
    """The admission criteria over the writer's 50 most recent test-mode notes."""
    recent = XWrittenNote.objects.filter(test_mode=True).order_by("-created_at", "-x_note_id")
    return rules.admission([n.outcomes for n in recent[: rules.ADMISSION_WINDOW]])


def admission_json(adm: rules.Admission) -> dict[str, Any]:
    out: dict[str, Any] = {"window": adm.window, "n": adm.n, "eligible": adm.eligible}
    for c in adm.criteria:
        out[c.name] = {"share": c.share, "threshold": c.threshold, "passed": c.passed, "count": c.count, "n": c.n}
    return out


def writing_limit_json(wl: rules.WritingLimit) -> dict[str, Any]:
    return {"limit": wl.limit, "rule": wl.rule, "nh_5": wl.nh_5, "nh_10": wl.nh_10, "hr_r": wl.hr_r,
            "hr_l": wl.hr_l, "dn_30": wl.dn_30, "total": wl.total}  # fmt: skip


def writing_limit_now(*, now: dt.datetime | None = None) -> rules.WritingLimit:
    """The overview's writing limit from the live notes X listed in notes_written."""
    now = now or timezone.now()
    live = XWrittenNote.objects.filter(test_mode=False).order_by("-created_at", "-x_note_id")
    statuses = list(live.values_list("status", flat=True))
    last_30 = live.filter(created_at__gte=now - dt.timedelta(days=30)).count()
    return rules.writing_limit(statuses, last_30)
