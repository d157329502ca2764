"""Living notes: requests, versions, retired ratings, suggestions and revision runs."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from crowdnotes_site.leases import ClaimedRun
from notes.models.drafts import DraftJob
from notes.models.notes import Note, NoteStatus, Participant, RatingLevel
from notes.models.posts import Post

# --- Living notes: requests, versions, suggestions, revisions ---------------------------------


class NoteRequest(models.Model):
    """A signed-in user's request for a note on a post (one per user and post)."""

    post = models.ForeignKey(Post, on_delete=models.CASCADE, related_name="note_requests")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="note_requests")
    reason = models.CharField(max_length=500, blank=True)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    # Set on the one request whose count crossed NOTE_REQUEST_AUTO_DRAFT_THRESHOLD: the draft it started.
    started_draft = models.OneToOneField(
        DraftJob, null=True, blank=True, on_delete=models.SET_NULL, related_name="started_by_request"
    )

    class Meta:
        ordering = ["-created_at"]
        constraints = [models.UniqueConstraint(fields=["post", "user"], name="one_note_request_per_user_post")]

    def __str__(self) -> str:
        return f"request by {self.user_id} on post {self.post_id}"


class NoteVersion(models.Model):
    """One text of a note. Version 1 is the submitted text; later ones come from revisions."""

    note = models.ForeignKey(Note, on_delete=models.CASCADE, related_name="versions")
    number = models.PositiveIntegerField()
    text = models.TextField()
    evidence_urls = models.JSONField(default=list, blank=True)
    # The confirmed passages this version was written from: [{"url": ..., "text": ..., "snippet": pk}]
    snippets = models.JSONField(default=list, blank=True)
    # A person ("user:<name>") or a model ("llm:<model>", "baseline:<name>").
    producer = models.CharField(max_length=120)
    reason = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    # The status the note had when this version was replaced, and its ratings then (for the note page).
    final_status = models.CharField(max_length=32, choices=NoteStatus.choices, blank=True)
    final_num_ratings = models.PositiveIntegerField(null=True, blank=True)
    final_intercept = models.FloatField(null=True, blank=True)
    # The jury's predicted helpfulness (intercept) when a revision compared it with a candidate.
    predicted_intercept = models.FloatField(null=True, blank=True)
    # The person who accepted this text (a revision's version; None for version 1, written by its author).
    accepted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["note", "number"]
        constraints = [models.UniqueConstraint(fields=["note", "number"], name="one_note_version_per_number")]

    def __str__(self) -> str:
        return f"note {self.note_id} v{self.number}"


class RetiredRating(models.Model):
    """A rating of a version that a revision replaced: kept with its version, no longer scored
    (the new version starts its own ratings)."""

    version = models.ForeignKey(NoteVersion, on_delete=models.CASCADE, related_name="retired_ratings")
    rater = models.ForeignKey(Participant, on_delete=models.CASCADE, related_name="+")
    level = models.CharField(max_length=20, choices=RatingLevel.choices)
    tags = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.rater_id} rated v{self.version_id}: {self.level}"


class SuggestionKind(models.TextChoices):
    FACTUAL = "factual", "Factual correction"
    CONTEXT = "context", "Added context"
    CHALLENGE = "challenge", "Challenges the main claim"
    WORDING = "wording", "Wording"
    OPINION = "opinion", "Policy or opinion"


class RevisionRun(ClaimedRun):
    """One revision attempt of a note: draft from the suggestions, judges, jury, decision.
    One active run per note (constraint); claimed and swept like the other runs (ClaimedRun's table)."""

    class Outcome(models.TextChoices):
        # The machine's checks passed it: it waits for the note's author (or an admin) to decide.
        PROPOSED = "proposed", "Proposed, waiting for a person"
        PUBLISHED = "published", "Accepted by a person and published"
        DECLINED = "declined", "Declined by a person"
        REJECTED = "rejected", "Rejected by the checks"

    note = models.ForeignKey(Note, on_delete=models.CASCADE, related_name="revision_runs")
    base_version = models.ForeignKey(NoteVersion, on_delete=models.CASCADE, related_name="+")
    outcome = models.CharField(max_length=10, choices=Outcome.choices, blank=True)
    candidate_text = models.TextField(blank=True)
    producer = models.CharField(max_length=120, blank=True)
    prompt = models.TextField(blank=True)
    # [{"stage", "verdict", "reasoning", "judge_kind", "judge_name", "error"}]
    judge_log = models.JSONField(default=list, blank=True)
    judges_passed = models.BooleanField(null=True, blank=True)
    jury_current = models.FloatField(null=True, blank=True)
    jury_candidate = models.FloatField(null=True, blank=True)
    jury_margin = models.FloatField(null=True, blank=True)
    reasons = models.TextField(blank=True)
    # The checks that do not depend on the model that wrote the candidate (notes/living/checks.py):
    # [{"name", "passed", "value", "bound", "detail"}]
    checks = models.JSONField(default=list, blank=True)
    # The person who accepted or declined a proposal, when, and why.
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    decided_at = models.DateTimeField(null=True, blank=True)
    decision_reason = models.TextField(blank=True)
    published_version = models.OneToOneField(
        NoteVersion, null=True, blank=True, on_delete=models.SET_NULL, related_name="revision_run"
    )
    created_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        ordering = ["-created_at"]
        permissions = [
            ("decide_revision", "Can accept or decline proposed revisions of notes whose author cannot"),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["note"], condition=Q(state__in=["queued", "running"]), name="one_active_revision_per_note"
            ),
            models.UniqueConstraint(
                fields=["note"], condition=Q(outcome="proposed"), name="one_open_proposal_per_note"
            ),
        ]

    def __str__(self) -> str:
        return f"revision run {self.pk} of note {self.note_id} ({self.state})"


class Suggestion(models.Model):
    """A change a rater suggested with their rating, and what became of it."""

    class State(models.TextChoices):
        PENDING = "pending", "Waiting for a revision"
        WITHDRAWN = "withdrawn", "Withdrawn (the rating was changed or withdrawn)"
        IN_PROPOSAL = "in_proposal", "Used in a proposed version waiting for a person's decision"
        USED_PUBLISHED = "used_published", "Used in a published version"
        USED_REJECTED = "used_rejected", "Used in a revision that was rejected"
        NOT_USED = "not_used", "Not used"

    note = models.ForeignKey(Note, on_delete=models.CASCADE, related_name="suggestions")
    version = models.ForeignKey(NoteVersion, on_delete=models.CASCADE, related_name="suggestions")
    rater = models.ForeignKey(Participant, on_delete=models.CASCADE, related_name="suggestions")
    # No database constraint: a first import's bulk load drops and rebuilds the ratings table's primary
    # key (notes/communitynotes/importer.py), which a foreign key would pin; Django still applies SET_NULL.
    rating = models.ForeignKey(
        "notes.Rating",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="suggestions",
        db_constraint=False,
    )
    text = models.TextField()
    source_url = models.URLField(max_length=2000, blank=True)
    snippet = models.ForeignKey("evidence.Snippet", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    kind = models.CharField(max_length=10, choices=SuggestionKind.choices)
    kind_method = models.CharField(max_length=120)  # "offline rule" or "llm:<model>"
    state = models.CharField(max_length=16, choices=State.choices, default=State.PENDING, db_index=True)
    outcome_reason = models.TextField(blank=True)
    revision = models.ForeignKey(
        RevisionRun, null=True, blank=True, on_delete=models.SET_NULL, related_name="suggestions"
    )
    created_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["note", "rater"], condition=Q(state="pending"), name="one_pending_suggestion_per_rater_note"
            )
        ]

    def __str__(self) -> str:
        return f"suggestion {self.pk} on note {self.note_id} ({self.state})"
