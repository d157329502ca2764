from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone


class EvidenceSource(models.Model):
    """One fetched web page or PDF, cached by URL and content hash."""

    url = models.TextField()
    url_hash = models.CharField(max_length=64, db_index=True)
    final_url = models.TextField(blank=True)
    content_type = models.CharField(max_length=100, blank=True)
    title = models.CharField(max_length=500, blank=True)
    published_at = models.DateField(null=True, blank=True)
    cleaned_text = models.TextField(blank=True)
    content_hash = models.CharField(max_length=64, blank=True, db_index=True)
    byte_size = models.PositiveIntegerField(default=0)
    fetched_at = models.DateTimeField(default=timezone.now)
    error_code = models.CharField(max_length=40, blank=True)
    error_message = models.TextField(blank=True)

    def __str__(self) -> str:
        return self.title or self.url


class Passage(models.Model):
    """A token window of a source's text, with its embedding for one model."""

    source = models.ForeignKey(EvidenceSource, on_delete=models.CASCADE, related_name="passages")
    embedding_model = models.CharField(max_length=100)
    chunk_index = models.PositiveIntegerField()
    text = models.TextField()
    char_start = models.PositiveIntegerField()
    char_end = models.PositiveIntegerField()
    n_tokens = models.PositiveIntegerField(default=0)
    # sha256 of text: an identical passage of another URL reuses this embedding.
    text_hash = models.CharField(max_length=64, blank=True, db_index=True)
    # float32 vector bytes (pgvector is not available here; ranking happens in numpy).
    embedding = models.BinaryField(null=True, blank=True)

    class Meta:
        ordering = ["chunk_index"]
        constraints = [
            models.UniqueConstraint(
                fields=["source", "embedding_model", "chunk_index"], name="unique_passage_per_model"
            )
        ]

    def __str__(self) -> str:
        return f"{self.source_id}#{self.chunk_index}"


class Snippet(models.Model):
    """One evidence URL attached to a draft job (and later its note): state, best passage, confirmation."""

    class State(models.TextChoices):
        QUEUED = "queued", "Queued"
        FETCHING = "fetching", "Fetching"
        EXTRACTING = "extracting", "Extracting text"
        EMBEDDING = "embedding", "Matching passages"
        READY = "ready", "Ready"
        FAILED = "failed", "Failed"

    class Confirmation(models.TextChoices):
        PENDING = "pending", "Not reviewed"
        CONFIRMED = "confirmed", "Confirmed"
        REJECTED = "rejected", "Rejected"

    post = models.ForeignKey("notes.Post", on_delete=models.CASCADE, related_name="snippets")
    draft_job = models.ForeignKey(
        "notes.DraftJob", null=True, blank=True, on_delete=models.CASCADE, related_name="snippets"
    )
    note = models.ForeignKey("notes.Note", null=True, blank=True, on_delete=models.CASCADE, related_name="snippets")
    url = models.TextField()
    position = models.PositiveSmallIntegerField(default=0)
    state = models.CharField(max_length=12, choices=State.choices, default=State.QUEUED, db_index=True)
    error_code = models.CharField(max_length=40, blank=True)
    error_message = models.TextField(blank=True)
    source = models.ForeignKey(EvidenceSource, null=True, blank=True, on_delete=models.SET_NULL)
    passage = models.ForeignKey(Passage, null=True, blank=True, on_delete=models.SET_NULL)
    similarity = models.FloatField(null=True, blank=True)
    scores = models.JSONField(default=list, blank=True)
    timings_ms = models.JSONField(default=dict, blank=True)
    confirmation = models.CharField(max_length=10, choices=Confirmation.choices, default=Confirmation.PENDING)
    confirmed_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    confirmed_at = models.DateTimeField(null=True, blank=True)
    # Hash of the passage text that was confirmed: a changed passage invalidates the confirmation.
    confirmed_text_hash = models.CharField(max_length=64, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["position", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["draft_job", "url"], condition=models.Q(draft_job__isnull=False), name="unique_url_per_draft"
            )
        ]

    def __str__(self) -> str:
        return f"{self.url} ({self.state})"

    @property
    def text(self) -> str:
        return self.passage.text if self.passage else ""
