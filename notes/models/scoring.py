"""A scoring run: the matrix factorization over the database's ratings."""

from __future__ import annotations

from typing import ClassVar

from django.conf import settings
from django.db import models
from django.utils import timezone

from crowdnotes_site.leases import ClaimedRun
from crowdnotes_site.lib.transitions import Transitions


class ScoringRun(ClaimedRun):
    """One run of the Community Notes scorer over the whole database (scheduled or asked for)."""

    class State(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        DONE = "done", "Done"
        SKIPPED = "skipped", "Skipped (another run was in progress)"
        FAILED = "failed", "Failed"

    class Trigger(models.TextChoices):
        SCHEDULE = "schedule", "Schedule"
        ADMIN = "admin", "Admin (rescore now)"
        DEMO_LOAD = "demo_load", "Demo load (load_demo)"

    # A failed run may be claimed again by its task's retry; a run that found another in progress is skipped.
    TRANSITIONS: ClassVar[Transitions] = Transitions("scoring run", {
        State.QUEUED: {State.RUNNING, State.FAILED},
        State.RUNNING: {State.RUNNING, State.QUEUED, State.DONE, State.SKIPPED, State.FAILED},
        State.FAILED: {State.RUNNING},
        State.DONE: set(),
        State.SKIPPED: set(),
    })  # fmt: skip

    trigger = models.CharField(max_length=10, choices=Trigger.choices, default=Trigger.SCHEDULE)
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # ClaimedRun's field over this model's own states (a skipped run).
    state = models.CharField(max_length=10, choices=State.choices, default=State.QUEUED, db_index=True)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    # The scorer's summary (notes, ratings, notes_updated, status_changes, helpful, ...).
    summary = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"scoring run {self.pk} ({self.state})"

    @property
    def duration_s(self) -> float | None:
        if self.started_at is None or self.finished_at is None:
            return None
        return (self.finished_at - self.started_at).total_seconds()
