"""What CrowdNotes keeps about X: posts' X data, X's evaluator answers, notes proposed to X and
the notes X says this writer wrote, and the runs of "Fetch from X now". No credential is stored."""

from __future__ import annotations

from typing import ClassVar

from django.conf import settings
from django.db import models
from django.utils import timezone

from crowdnotes_site.lib.transitions import Transitions
from crowdnotes_site.transitions import Stateful


class XPost(models.Model):
    """The X side of a post (one row per X id): what the API said about it beyond its text."""

    post = models.OneToOneField("notes.Post", on_delete=models.CASCADE, related_name="xpost")
    x_id = models.CharField(max_length=20, unique=True)
    author_x_id = models.CharField(max_length=20, blank=True)
    lang = models.CharField(max_length=12, blank=True)
    # The quoted / replied-to posts: [{"relation", "id", "text"}]; the media: [{"type", "url", "alt_text"}].
    context = models.JSONField(default=list, blank=True)
    media = models.JSONField(default=list, blank=True)
    # Offered to the contributor as evidence URLs to review; never confirmed for them.
    suggested_source_links = models.JSONField(default=list, blank=True)
    eligible = models.BooleanField(default=False, db_index=True)  # returned by posts_eligible_for_notes
    eligible_test_mode = models.BooleanField(null=True, blank=True)
    first_seen_at = models.DateTimeField(default=timezone.now)
    last_seen_at = models.DateTimeField(null=True, blank=True)
    hydrated_at = models.DateTimeField(null=True, blank=True)
    # The lookup could not return the post (not found, protected, suspended): X's error title;
    # the post is not asked for again for X_NOT_FOUND_RETRY_DAYS.
    lookup_error = models.CharField(max_length=200, blank=True)
    lookup_error_at = models.DateTimeField(null=True, blank=True, db_index=True)

    def __str__(self) -> str:
        return f"X post {self.x_id}"

    @property
    def url(self) -> str:
        return f"https://x.com/i/status/{self.x_id}"


class XEvaluation(models.Model):
    """X's ClaimOpinion evaluator on one note text for one post (cached by the text's hash)."""

    post = models.ForeignKey("notes.Post", on_delete=models.CASCADE, related_name="x_evaluations")
    text_hash = models.CharField(max_length=64)
    note_text = models.TextField()
    claim_opinion_score = models.FloatField(null=True, blank=True)
    error = models.CharField(max_length=300, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["post", "text_hash"], name="x_evaluation_per_post_text")]

    def __str__(self) -> str:
        return f"X evaluation of post {self.post_id}: {self.claim_opinion_score}"


class XProposal(Stateful, models.Model):
    """A note proposed to X: one row per post (X takes one note per post per writer), written in
    the same transaction as its outbox message; the send is idempotent on this row."""

    class State(models.TextChoices):
        QUEUED = "queued", "Queued"
        SENDING = "sending", "Sending"
        # A send got no answer (timeout / 5xx): the next attempt first asks notes_written.
        UNCERTAIN = "uncertain", "No answer yet; checking with X before sending again"
        SENT = "sent", "Proposed to X"
        DUPLICATE = "duplicate", "X already has a note by this writer on this post"
        FAILED = "failed", "Refused by X"

    # Sent once (xnotes.services.proposal_send claims it); X's answer is final. A send that got no answer
    # (uncertain) is checked with X before sending again; a claim whose sender was lost is taken over.
    TRANSITIONS: ClassVar[Transitions] = Transitions("proposal to X", {
        State.QUEUED: {State.SENDING},
        State.UNCERTAIN: {State.SENDING},
        State.SENDING: {State.SENDING, State.QUEUED, State.UNCERTAIN, State.SENT, State.DUPLICATE, State.FAILED},
        State.SENT: set(),
        State.DUPLICATE: set(),
        State.FAILED: set(),
    })  # fmt: skip

    post = models.OneToOneField("notes.Post", on_delete=models.CASCADE, related_name="x_proposal")
    note = models.OneToOneField("notes.Note", on_delete=models.CASCADE, related_name="x_proposal")
    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    x_post_id = models.CharField(max_length=20)
    test_mode = models.BooleanField()
    text = models.TextField()
    classification = models.CharField(max_length=40)
    misleading_tags = models.JSONField(default=list, blank=True)
    trustworthy_sources = models.BooleanField(default=False)
    state = models.CharField(max_length=10, choices=State.choices, default=State.QUEUED, db_index=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    # A sender owns the row until then; past it (a lost worker) the send may be taken over, and
    # it asks notes_written first because the lost one may have reached X.
    claimed_until = models.DateTimeField(null=True, blank=True)
    error = models.TextField(blank=True)
    x_note_id = models.CharField(max_length=20, blank=True, db_index=True)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    sent_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        permissions = [
            ("propose_xnote", "Can propose notes to X (X writer)"),
            ("manage_x", "Can fetch from X and see the X writer page"),
        ]

    def __str__(self) -> str:
        return f"proposal of note {self.note_id} ({self.state})"


class XWrittenNote(models.Model):
    """A note X lists in notes_written for this writer, with its evaluator outcomes (test mode)
    or its status and ratings (live)."""

    x_note_id = models.CharField(max_length=20, unique=True)
    x_post_id = models.CharField(max_length=20, blank=True, db_index=True)
    test_mode = models.BooleanField()
    text = models.TextField(blank=True)
    classification = models.CharField(max_length=40, blank=True)
    status = models.CharField(max_length=60, blank=True)
    # [{"evaluator_type", "evaluator_score_bucket"}] (test mode)
    outcomes = models.JSONField(default=list, blank=True)
    ratings = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(null=True, blank=True, db_index=True)  # from the note's X id
    synced_at = models.DateTimeField(default=timezone.now)
    proposal = models.ForeignKey(XProposal, null=True, blank=True, on_delete=models.SET_NULL, related_name="written")

    class Meta:
        ordering = ["-created_at", "-x_note_id"]

    def __str__(self) -> str:
        return f"X note {self.x_note_id}"


class XRun(Stateful, models.Model):
    """What the runs against X's API share (a pull of eligible posts, a hydrate, a sync): one
    active at a time, waiting out X's rate limit and resuming, failed by the sweeper when their
    worker is lost (services.fetch_runs_expire / task_runs_expire)."""

    class State(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        WAITING = "waiting", "Waiting for X's rate limit to reset"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"

    ACTIVE = (State.QUEUED, State.RUNNING, State.WAITING)
    # Waiting for a rate-limit reset, it resumes; running → running is a task delivered again.
    MOVES: ClassVar[dict[str, set[str]]] = {
        State.QUEUED: {State.RUNNING, State.FAILED},
        State.RUNNING: {State.RUNNING, State.WAITING, State.DONE, State.FAILED},
        State.WAITING: {State.RUNNING, State.FAILED},
        State.DONE: set(),
        State.FAILED: set(),
    }

    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    state = models.CharField(max_length=10, choices=State.choices, default=State.QUEUED, db_index=True)
    wait_until = models.DateTimeField(null=True, blank=True)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(auto_now=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        abstract = True
        ordering = ["-created_at", "-id"]


class XFetchRun(XRun):
    """One pull of posts_eligible_for_notes (beat, the admin button or the command), resumable
    across rate-limit waits: the next page token is kept."""

    TRANSITIONS: ClassVar[Transitions] = Transitions("pull from X", XRun.MOVES)

    test_mode = models.BooleanField(default=True)
    max_results = models.PositiveSmallIntegerField(default=100)
    page_limit = models.PositiveIntegerField(default=10)
    post_limit = models.PositiveIntegerField(null=True, blank=True)
    next_token = models.CharField(max_length=200, blank=True)
    requests = models.PositiveIntegerField(default=0)
    pages = models.PositiveIntegerField(default=0)
    fetched = models.PositiveIntegerField(default=0)
    new = models.PositiveIntegerField(default=0)
    updated = models.PositiveIntegerField(default=0)
    rate_limited_waits = models.PositiveIntegerField(default=0)

    def __str__(self) -> str:
        return f"X fetch {self.pk} ({self.state})"

    def summary(self) -> dict[str, object]:
        return {
            "requests": self.requests, "pages": self.pages, "fetched": self.fetched, "new": self.new,
            "updated": self.updated, "rate_limited_waits": self.rate_limited_waits, "test_mode": self.test_mode,
        }  # fmt: skip


class XTaskRun(XRun):
    """One run of "fill imported posts' text" (hydrate) or "follow notes back" (sync): the admin's
    button, beat or a rate-limit retry of either. Its counts are the progress the writer page shows."""

    class Kind(models.TextChoices):
        HYDRATE = "hydrate", "Fill imported posts' text"
        SYNC = "sync", "Follow notes back"

    TRANSITIONS: ClassVar[Transitions] = Transitions("hydrate or sync run", XRun.MOVES)

    kind = models.CharField(max_length=10, choices=Kind.choices, db_index=True)
    # What the run has done so far: HydrateStats / SyncStats as a dict (requests, looked_up, hydrated, …).
    counts = models.JSONField(default=dict, blank=True)
    total = models.PositiveIntegerField(null=True, blank=True)  # hydrate: the posts it set out to look up

    def __str__(self) -> str:
        return f"X {self.kind} {self.pk} ({self.state})"
