"""The transactional outbox: every task intent is a row written in the same transaction as the
rows it works on (crowdnotes_site/queue.py writes and delivers them); and the per-user count of
LLM calls behind the daily budget (crowdnotes_site/llm.py)."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone


class OutboxMessage(models.Model):
    """One task to send to the broker. Written with the work's rows, delivered after commit (or by
    the dispatcher once the broker is reachable again); `delivered_at` is set once it was sent."""

    task_name = models.CharField(max_length=200)
    args = models.JSONField(default=list)
    kwargs = models.JSONField(default=dict)
    # task name + arguments: what a page looks up to say its work is still waiting for the broker.
    key = models.CharField(max_length=300, db_index=True)
    created_at = models.DateTimeField(default=timezone.now)
    attempts = models.PositiveIntegerField(default=0)
    last_error = models.TextField(blank=True)
    delivered_at = models.DateTimeField(null=True, blank=True)
    # Fair ordering of the CPU queue (queue.py): whose work this is, and the broker priority it got
    # (0 = the owner's first recent message, served before anybody's second).
    owner_id = models.IntegerField(null=True, blank=True)
    priority = models.PositiveSmallIntegerField(null=True, blank=True)

    class Meta:
        indexes = [
            models.Index(fields=["created_at"], condition=models.Q(delivered_at__isnull=True), name="outbox_pending"),
            models.Index(
                fields=["owner_id", "created_at"], condition=models.Q(owner_id__isnull=False), name="outbox_owner"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.key} ({'delivered' if self.delivered_at else 'pending'})"


class LlmUsage(models.Model):
    """LLM calls made for one user's work on one day (UTC), counted by the client of
    `crowdnotes_site.llm.llm_client(owner=...)`; past LLM_DAILY_CALLS_PER_USER the calls are refused."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    day = models.DateField()
    calls = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["-day", "-calls"]
        constraints = [models.UniqueConstraint(fields=["user", "day"], name="one_llm_usage_row_per_user_day")]

    def __str__(self) -> str:
        return f"{self.calls} LLM calls for user {self.user_id} on {self.day}"
