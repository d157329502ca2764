from __future__ import annotations

from typing import ClassVar

from django.conf import settings
from django.db import models
from django.utils import timezone

from crowdnotes_site.leases import ClaimedRun
from crowdnotes_site.lib.categories import CATEGORY_LABELS
from crowdnotes_site.lib.transitions import Transitions
from crowdnotes_site.transitions import Stateful

SOURCE_CATEGORIES = list(CATEGORY_LABELS.items())


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
    # Who publishes it (crowdnotes_site.lib.categories; analytics charts these), and how we know.
    domain = models.CharField(max_length=253, blank=True, db_index=True)
    category = models.CharField(max_length=20, choices=SOURCE_CATEGORIES, blank=True, db_index=True)
    category_method = models.CharField(max_length=120, blank=True)
    language = models.CharField(max_length=16, blank=True)
    # Set when `index_documents` put it in the local evidence index (a frozen snapshot: such a
    # source is reused however old it is). copy_url: where a copy can be read (the demo's pages).
    indexed_at = models.DateTimeField(null=True, blank=True, db_index=True)
    copy_url = models.TextField(blank=True)

    def __str__(self) -> str:
        return self.title or self.url


class DomainCategory(models.Model):
    """The admin-editable mapping of a domain (or host) to a source category; it wins over the
    built-in rules. Rows made by the optional LLM step say so in `method`."""

    domain = models.CharField(max_length=253, unique=True, help_text="A registered domain (nih.gov) or a host.")
    category = models.CharField(max_length=20, choices=SOURCE_CATEGORIES)
    method = models.CharField(max_length=120, default="admin")
    note = models.TextField(blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["domain"]
        verbose_name_plural = "domain categories"

    def __str__(self) -> str:
        return f"{self.domain} → {self.category}"


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


class Snippet(Stateful, models.Model):
    """One evidence URL attached to a draft job (and later its note): state, best passage, confirmation."""

    class State(models.TextChoices):
        QUEUED = "queued", "Queued"
        FETCHING = "fetching", "Fetching"
        EXTRACTING = "extracting", "Extracting text"
        EMBEDDING = "embedding", "Matching passages"
        READY = "ready", "Ready"
        FAILED = "failed", "Failed"

    # Processing (evidence.snippets): a worker's claim moves a queued snippet to fetching (or takes over
    # one whose lease expired); a cached page goes straight to embedding; a transient error or the
    # sweeper puts it back in the queue. A retry queues a failed one again; discarding its draft fails a
    # queued one. A ready snippet's refine changes its passage, never its state; `snippet_fail` (its
    # task's time limit) may still end it.
    TRANSITIONS: ClassVar[Transitions] = Transitions("snippet", {
        State.QUEUED: {State.FETCHING, State.FAILED},
        State.FETCHING: {State.FETCHING, State.EXTRACTING, State.EMBEDDING, State.QUEUED, State.FAILED},
        State.EXTRACTING: {State.FETCHING, State.EMBEDDING, State.QUEUED, State.FAILED},
        State.EMBEDDING: {State.FETCHING, State.READY, State.QUEUED, State.FAILED},
        State.READY: {State.FAILED},
        State.FAILED: {State.QUEUED},
    })  # fmt: skip

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
    # The sentence (or two adjacent) of the passage closest to the post: character offsets into
    # passage.text, set together with `passage` (Matcher.best_sentence); None before matching.
    sentence_start = models.PositiveIntegerField(null=True, blank=True)
    sentence_end = models.PositiveIntegerField(null=True, blank=True)
    scores = models.JSONField(default=list, blank=True)
    timings_ms = models.JSONField(default=dict, blank=True)
    confirmation = models.CharField(max_length=10, choices=Confirmation.choices, default=Confirmation.PENDING)
    confirmed_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    confirmed_at = models.DateTimeField(null=True, blank=True)
    # Hash of the passage text that was confirmed: a changed passage invalidates the confirmation.
    confirmed_text_hash = models.CharField(max_length=64, blank=True)
    # Set when CrowdNotes' automation proposed this source (with why); None for the contributor's URLs.
    proposed_by = models.ForeignKey(
        "evidence.AutomationRun", null=True, blank=True, on_delete=models.SET_NULL, related_name="proposals"
    )
    proposal_reason = models.TextField(blank=True)
    # The processing worker's lease, renewed by its heartbeat; past it, the sweeper re-queues the snippet.
    lease_until = models.DateTimeField(null=True, blank=True)
    # A ready snippet whose refine (the passages the pre-filter skipped) is queued or running; while
    # set, `lease_until` is the refine's lease, and the sweeper re-queues a refine whose lease expired.
    refine_pending = models.BooleanField(default=False)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(auto_now=True)

    # The contributor's actions on a snippet and the states each is allowed from: the one place
    # that decides (evidence.snippets' services ask `action_refusal`; views and tasks call those).
    # A retry fetches a failed page again; nothing changes a snippet once its draft was submitted.
    ACTIONS_FROM: ClassVar[dict[str, frozenset[str]]] = {
        "confirm": frozenset({State.READY}),
        "reject": frozenset({State.READY}),
        "retry": frozenset({State.FAILED}),
        "remove": frozenset(State),
    }

    class Meta:
        ordering = ["position", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["draft_job", "url"], condition=models.Q(draft_job__isnull=False), name="unique_url_per_draft"
            )
        ]

    def __str__(self) -> str:
        return f"{self.url} ({self.state})"

    def action_refusal(self, action: str) -> str | None:
        """Why `action` is not allowed on this snippet now (a message for the contributor), or None."""
        job = self.draft_job
        if self.note_id is not None or (job is not None and job.state == job.State.SUBMITTED):
            return "This note was already submitted: its evidence can no longer change."
        if job is not None and job.state == job.State.DISCARDED:
            return "This draft was discarded."
        allowed = self.ACTIONS_FROM.get(action)
        if allowed is None:
            return f"Unknown action {action!r}."
        if self.state not in allowed:
            if action == "retry":
                return "Only a source whose fetch failed can be retried."
            return "This source has no passage to review yet."
        return None

    @property
    def text(self) -> str:
        return self.passage.text if self.passage else ""

    @property
    def sentence_parts(self) -> tuple[str, str, str] | None:
        """The passage split around its highlighted sentence: (before, sentence, after), or None."""
        text = self.text
        start, end = self.sentence_start, self.sentence_end
        if not text or start is None or end is None or not 0 <= start < end <= len(text):
            return None
        return text[:start], text[start:end], text[end:]

    @property
    def sentence(self) -> str:
        """The highlighted sentence of the passage ("" when there is none)."""
        parts = self.sentence_parts
        return parts[1] if parts else ""


class AutomationRun(ClaimedRun):
    """ "Find evidence for me": queries → search → pool → utility rounds → fetching, for one post.

    A Celery task runs one stage per delivery under a claim (ClaimedRun), like JudgeRun; the
    pipeline's state between stages is `flow` (evidence.search.flow.SearchState as JSON), each
    utility round is a UtilityRound row."""

    class Stage(models.TextChoices):
        QUERIES = "queries", "Writing search queries"
        SEARCH = "search", "Searching"
        POOL = "pool", "Building the pool"
        CHOOSING = "choosing", "Choosing sources"
        FETCHING = "fetching", "Fetching the chosen sources"
        DONE = "done", "Done"

    draft_job = models.ForeignKey(
        "notes.DraftJob", null=True, blank=True, on_delete=models.CASCADE, related_name="automation_runs"
    )
    post_text = models.TextField()
    tau = models.PositiveSmallIntegerField()
    cutoff = models.DateField(null=True, blank=True)
    single_query = models.BooleanField(default=False)
    rank_order = models.BooleanField(default=False)
    stage = models.CharField(max_length=10, choices=Stage.choices, default=Stage.QUERIES)
    flow = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"automation run {self.pk}: {self.state} at {self.stage}"


class UtilityRound(models.Model):
    """One round of the utility judgment: the candidates shown, the answer, why, and who answered."""

    run = models.ForeignKey(AutomationRun, on_delete=models.CASCADE, related_name="rounds")
    number = models.PositiveSmallIntegerField()
    candidates = models.JSONField(default=list)  # what the judge saw: index, title, snippet, url
    chosen_index = models.IntegerField(null=True, blank=True)
    chosen_url = models.TextField(blank=True)
    reasoning = models.TextField(blank=True)
    producer = models.CharField(max_length=160)
    prompt_version = models.CharField(max_length=40, blank=True)
    prompt = models.TextField(blank=True)
    raw_output = models.TextField(blank=True)
    attempts = models.PositiveSmallIntegerField(default=1)
    fallback = models.BooleanField(default=False)
    error = models.TextField(blank=True)
    latency_ms = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["run", "number"]
        constraints = [models.UniqueConstraint(fields=["run", "number"], name="one_utility_round_per_number")]

    def __str__(self) -> str:
        return f"run {self.run_id} round {self.number}: {self.chosen_url or 'none'}"


class Prefetch(models.Model):
    """A head start on one URL typed into a form: fetch → extract → passages → passage embeddings,
    stored in the shared source cache before the note is submitted (evidence.prefetch).

    One row per URL (by hash), shared by every contributor; `requested_by` is who started the
    current attempt (the per-user cap of pending prefetches counts it)."""

    class State(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Fetching"
        READY = "ready", "Ready"
        FAILED = "failed", "Failed"

    url = models.TextField()
    url_hash = models.CharField(max_length=64, unique=True)
    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    state = models.CharField(max_length=8, choices=State.choices, default=State.QUEUED, db_index=True)
    source = models.ForeignKey(EvidenceSource, null=True, blank=True, on_delete=models.SET_NULL)
    error_code = models.CharField(max_length=40, blank=True)
    error_message = models.TextField(blank=True)
    timings_ms = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"prefetch {self.url} ({self.state})"
