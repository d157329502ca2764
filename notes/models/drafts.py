"""A contributor's draft job."""

from __future__ import annotations

from typing import ClassVar

from django.conf import settings
from django.db import models
from django.utils import timezone

from crowdnotes_site.lib.llm.steps.common import Producer
from crowdnotes_site.lib.transitions import Transitions
from crowdnotes_site.transitions import Stateful
from notes.models.posts import Post


class DraftJob(Stateful, models.Model):
    """A contributor's work on one note: evidence gathering, machine draft, edits, submission."""

    class Mode(models.TextChoices):
        AUGMENTATION = "augmentation", "Augmentation (my evidence)"
        AUTOMATION = "automation", "Automation (machine evidence)"

    class State(models.TextChoices):
        COLLECTING = "collecting", "Collecting evidence"
        DRAFTING = "drafting", "Drafting"
        DRAFTED = "drafted", "Draft ready"
        FAILED = "failed", "Failed"
        SUBMITTED = "submitted", "Submitted"
        # The owner gave up on it (e.g. an orphan left by an outage); kept, but no longer open.
        DISCARDED = "discarded", "Discarded"

    # No longer open: a new contribution on the same post starts a new draft job.
    CLOSED_STATES = (State.SUBMITTED, State.DISCARDED)
    # The one place that says which state follows which (notes.services call `transition`): a draft
    # may be (re)drafted, submitted or discarded until it is submitted or discarded; nothing follows those.
    TRANSITIONS: ClassVar[Transitions] = Transitions("draft", {
        State.COLLECTING: {State.DRAFTING, State.SUBMITTED, State.DISCARDED},
        State.DRAFTING: {State.DRAFTED, State.FAILED, State.SUBMITTED, State.DISCARDED},
        State.DRAFTED: {State.DRAFTING, State.SUBMITTED, State.DISCARDED},
        State.FAILED: {State.DRAFTING, State.SUBMITTED, State.DISCARDED},
        State.SUBMITTED: set(),
        State.DISCARDED: set(),
    })  # fmt: skip

    post = models.ForeignKey(Post, on_delete=models.CASCADE, related_name="draft_jobs")
    contributor = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="draft_jobs")
    mode = models.CharField(max_length=12, choices=Mode.choices, default=Mode.AUGMENTATION)
    state = models.CharField(max_length=12, choices=State.choices, default=State.COLLECTING, db_index=True)
    progress = models.PositiveSmallIntegerField(default=0)
    error = models.TextField(blank=True)
    draft_text = models.TextField(blank=True)
    # The text in the contributor's editor, saved as it is edited (autosave, "Save my text", a
    # pre-flight or a submit that failed); None until the first save. A new machine draft resets it.
    edited_text = models.TextField(blank=True)
    edited_at = models.DateTimeField(null=True, blank=True)
    # Which generator wrote the draft, e.g. "llm:gpt-4.1-mini" or "baseline:extractive".
    draft_method = models.CharField(max_length=120, blank=True)
    # Per draft sentence, the snippet it came from (when the method knows it).
    draft_provenance = models.JSONField(default=list, blank=True)
    # How many drafts were requested: a request names the round it saw, so a double click (or two
    # tabs) asking for the same round queues one draft task.
    draft_round = models.PositiveIntegerField(default=0)
    # The drafting worker's lease, renewed by its heartbeat; past it, the sweeper re-queues the job.
    lease_until = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["contributor", "post"],
                condition=~models.Q(state__in=["submitted", "discarded"]),
                name="one_open_draft_job_per_contributor_post",
            )
        ]

    def __str__(self) -> str:
        return f"draft {self.pk} ({self.state})"

    @property
    def editor_text(self) -> str:
        """What the editor shows: the contributor's last saved text, else the machine draft."""
        return self.edited_text if self.edited_at is not None else self.draft_text

    @property
    def draft_producer(self) -> Producer:
        """Who wrote the draft ("llm" + model or "baseline" + name), parsed from draft_method."""
        return Producer.from_label(self.draft_method)
