from __future__ import annotations

from typing import ClassVar, TypeVar

from django.conf import settings
from django.db import models
from django.db.models import F, Q
from django.db.models.functions import Least
from django.utils import timezone

from crowdnotes_site.lib import status as note_status
from crowdnotes_site.lib.llm.steps.common import Producer
from crowdnotes_site.lib.transitions import RUN_STEPS, Transitions
from crowdnotes_site.transitions import Stateful


class Topic(models.TextChoices):
    DISEASES = "diseases", "Diseases or conditions"
    TREATMENTS = "treatments", "Drugs, vaccines, treatments and tests"
    GUIDANCE = "guidance", "Public-health guidance or policy"
    WELLNESS = "wellness", "Wellness products, diets and supplements"
    PROFESSIONALS = "professionals", "Healthcare professionals or systems"
    CONCEPTS = "concepts", "Biological or epidemiological concepts"
    CONSPIRACIES = "conspiracies", "Health conspiracies or hoaxes"
    NOT_HEALTH = "not_health", "Not health"


_M = TypeVar("_M", bound=models.Model)


def has_text_q(prefix: str = "") -> Q:
    """The one definition of "the post has text": `prefix` reaches the post from another model
    ("post__" from a note). Imported posts without text hold only a placeholder."""
    return Q(**{f"{prefix}text_available": True})


# The "post text" filter of the home page, the rating queue and Stuck posts. By default only posts
# a person can read: imported posts without text hold a placeholder nobody can rate or merge.
TEXT_WITH, TEXT_ALL, TEXT_WITHOUT = "", "all", "without"
TEXT_FILTER_CHOICES = [
    (TEXT_WITH, "Posts with text"),
    (TEXT_ALL, "All posts, also imported ones without text"),
    (TEXT_WITHOUT, "Only imported posts without text"),
]


def text_filter(value: str | None) -> str:
    """The filter's value from a query string (anything unknown is the default)."""
    return value if value is not None and value in (TEXT_ALL, TEXT_WITHOUT) else TEXT_WITH


def filter_by_text(queryset: models.QuerySet[_M], choice: str, *, prefix: str = "") -> models.QuerySet[_M]:
    """`queryset` under the text filter; `prefix` reaches the post ("post__" from notes)."""
    if choice == TEXT_WITH:
        return queryset.filter(has_text_q(prefix))
    if choice == TEXT_WITHOUT:
        return queryset.exclude(has_text_q(prefix))
    return queryset


# The pages count what the text filter hides up to this many and then say "more than": an exact
# count reads every imported post or note (1.3 M posts, 2.5 M notes at the full download, and the
# rating queue looks up the rater's rating of each): seconds per page view; this many: milliseconds.
HIDDEN_COUNT_CAP = 1000


def count_hidden(queryset: models.QuerySet[_M]) -> int:
    """The rows of `queryset` counted up to HIDDEN_COUNT_CAP + 1 (more than the cap: "more than")."""
    return queryset.order_by()[: HIDDEN_COUNT_CAP + 1].count()


def hidden_over(count: int) -> int:
    """The cap when `count` (from `count_hidden`) passed it, else 0: the page then says "More than" it."""
    return HIDDEN_COUNT_CAP if count > HIDDEN_COUNT_CAP else 0


class PostQuerySet(models.QuerySet["Post"]):
    def with_text(self) -> PostQuerySet:
        return self.filter(has_text_q())

    def without_text(self) -> PostQuerySet:
        return self.exclude(has_text_q())


class Post(models.Model):
    """A flagged social-media post (pasted by a contributor or imported)."""

    text = models.TextField()
    # sha256 of the normalised text: duplicate flags link to the existing post.
    text_hash = models.CharField(max_length=64, db_index=True)
    source_url = models.URLField(max_length=2000, blank=True)
    external_id = models.CharField(max_length=64, blank=True, db_index=True)
    author_handle = models.CharField(max_length=100, blank=True)
    posted_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    flagged_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    topic = models.CharField(max_length=20, choices=Topic.choices, blank=True)
    topic_method = models.CharField(max_length=100, blank=True)
    is_demo = models.BooleanField(default=False)
    # False for a post imported from public data without its text: `text` is then a
    # placeholder, shown as such and never sent to a judge or classifier as the post.
    text_available = models.BooleanField(default=True)

    objects = PostQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            # The home page's default list (posts with text, newest first). With the whole public
            # download imported (2 M posts without text, all newer than the few with text) the
            # created_at index alone walks every imported post before the first row it may show.
            models.Index(fields=["-created_at", "-id"], condition=Q(text_available=True), name="post_with_text_newest"),
        ]

    def __str__(self) -> str:
        return self.text[:60]

    def text_missing_reason(self) -> str | None:
        """Why this post's text must not be given to a drafter, judge or search, or None: the one
        rule for imported posts whose `text` is only a placeholder."""
        if not self.text_available and self.flagged_by_id is not None:
            return "the post was requested by its link on X and its text is not known here yet"
        if not self.text_available:
            return "the post was imported from public Community Notes data without its text"
        return None


class ImportedNoteHistory(models.Model):
    """One note's status history from public Community Notes data (noteStatusHistory), kept for
    the delay analytics whether or not the note itself was imported: the public notes and
    status-history files of different periods barely overlap."""

    note_external_id = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(db_index=True)  # createdAtMillis, else the time in the note id
    first_verdict_at = models.DateTimeField(null=True, blank=True)  # first Helpful / Not Helpful
    first_verdict_status = models.CharField(max_length=40, blank=True)
    current_status = models.CharField(max_length=40, blank=True)
    source_file = models.CharField(max_length=200, blank=True)

    def __str__(self) -> str:
        return self.note_external_id


class Participant(models.Model):
    """Anyone who writes or rates notes: an app user or an imported Community Notes participant."""

    external_id = models.CharField(max_length=64, unique=True)
    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE, related_name="participant"
    )
    rater_intercept = models.FloatField(null=True, blank=True)
    rater_factor = models.FloatField(null=True, blank=True)
    scored_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return self.user.get_username() if self.user else self.external_id


class NoteStatus(models.TextChoices):
    NEEDS_MORE_RATINGS = note_status.NEEDS_MORE_RATINGS, note_status.LABELS[note_status.NEEDS_MORE_RATINGS]
    HELPFUL = note_status.CURRENTLY_RATED_HELPFUL, note_status.LABELS[note_status.CURRENTLY_RATED_HELPFUL]
    NOT_HELPFUL = note_status.CURRENTLY_RATED_NOT_HELPFUL, note_status.LABELS[note_status.CURRENTLY_RATED_NOT_HELPFUL]


class Note(models.Model):
    class Origin(models.TextChoices):
        HUMAN = "human", "Human"
        AUGMENTED = "augmented", "Augmented (human evidence, machine draft)"
        # Machine-proposed evidence, but the contributor rewrote the machine draft (or wrote without one).
        HUMAN_MACHINE_EVIDENCE = "human_machine_evidence", "Human-written with machine evidence"
        AUTOMATED = "automated", "Automated (machine evidence and draft)"
        # Human and machine-proposed evidence together: neither "augmented" (human evidence only)
        # nor "automated" (machine evidence only) would be true.
        MIXED = "mixed", "Mixed (human and machine-proposed evidence)"
        SUPERNOTE = "supernote", "Supernote"

    class Classification(models.TextChoices):
        MISLEADING = "MISINFORMED_OR_POTENTIALLY_MISLEADING", "Misinformed or potentially misleading"
        NOT_MISLEADING = "NOT_MISLEADING", "Not misleading"

    post = models.ForeignKey(Post, on_delete=models.CASCADE, related_name="notes")
    author = models.ForeignKey(
        Participant, null=True, blank=True, on_delete=models.SET_NULL, related_name="notes_authored"
    )
    external_id = models.CharField(max_length=64, unique=True, null=True, blank=True)
    text = models.TextField()
    origin = models.CharField(max_length=24, choices=Origin.choices, default=Origin.HUMAN)
    classification = models.CharField(max_length=40, choices=Classification.choices, default=Classification.MISLEADING)
    evidence_urls = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    # The draft the contributor started from, kept so the audit can compare draft and final text.
    draft_job = models.OneToOneField(
        "notes.DraftJob", null=True, blank=True, on_delete=models.SET_NULL, related_name="note"
    )
    draft_text = models.TextField(blank=True)
    # How much of the machine draft the submitted text kept (difflib ratio, 0..1); None: no draft.
    draft_survival = models.FloatField(null=True, blank=True)
    status = models.CharField(
        max_length=32, choices=NoteStatus.choices, default=NoteStatus.NEEDS_MORE_RATINGS, db_index=True
    )
    intercept = models.FloatField(null=True, blank=True)
    factor = models.FloatField(null=True, blank=True)
    num_ratings = models.PositiveIntegerField(default=0)
    scored_at = models.DateTimeField(null=True, blank=True)
    # Why the note has its status (written by notes_rescore; crowdnotes_site/lib/communitynotes/scoring/explain.py): the
    # scorer's rules that matched (the last one decided), the upper confidence bound of the
    # intercept, the ratings from raters on each side, and the sentence shown on the post page.
    score_rules = models.JSONField(default=list, blank=True)
    intercept_max = models.FloatField(null=True, blank=True)
    neg_side_ratings = models.PositiveIntegerField(default=0)
    pos_side_ratings = models.PositiveIntegerField(default=0)
    score_explanation = models.TextField(blank=True)
    is_demo = models.BooleanField(default=False)
    # The published version (None: a note without versions, e.g. imported; its text is version 1).
    current_version = models.ForeignKey(
        "notes.NoteVersion", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["-created_at"]
        permissions = [
            ("view_scores", "Can see note intercepts and factors"),
            ("run_scoring", "Can run the Community Notes scorer"),
        ]
        # The rating queue (selectors.rating_queue): notes needing ratings, in the queue's order
        # for raters on the negative side, the positive side, and without a factor yet.
        indexes = [
            models.Index(
                F("neg_side_ratings"), F("num_ratings"), F("created_at").desc(), F("id").desc(),
                name="note_queue_neg_side", condition=Q(status=NoteStatus.NEEDS_MORE_RATINGS),
            ),
            models.Index(
                F("pos_side_ratings"), F("num_ratings"), F("created_at").desc(), F("id").desc(),
                name="note_queue_pos_side", condition=Q(status=NoteStatus.NEEDS_MORE_RATINGS),
            ),
            models.Index(
                Least("neg_side_ratings", "pos_side_ratings"), F("num_ratings"), F("created_at").desc(),
                F("id").desc(), name="note_queue_min_side", condition=Q(status=NoteStatus.NEEDS_MORE_RATINGS),
            ),
            # Posts with a Supernote (the blind comparisons offered on the rating queue).
            models.Index(fields=["post"], name="note_supernote_post", condition=Q(origin="supernote")),
        ]  # fmt: skip

    def __str__(self) -> str:
        return self.text[:60]

    @property
    def status_reason(self) -> str:
        """Why the note has its status, without model numbers (crowdnotes_site/lib/communitynotes/scoring/explain.py)."""
        if not self.score_rules:  # not scored since the rules were recorded
            return ""
        # Deferred: it loads the scorer and numpy (~0.2 s); models load in every process, reasons
        # are read only on the pages that show them.
        from crowdnotes_site.lib.communitynotes.scoring import explain as scoring_explain

        why = scoring_explain.NoteWhy(
            status=self.status, rules=tuple(self.score_rules), num_ratings=self.num_ratings, intercept=self.intercept,
            factor=self.factor, neg_count=self.neg_side_ratings, pos_count=self.pos_side_ratings,
        )  # fmt: skip
        return scoring_explain.explain_plain(why)

    def can_be_rated_by(self, participant: Participant | None) -> bool:
        """Anyone with a scoring identity may rate a note, except its author."""
        return participant is not None and (self.author_id is None or self.author_id != participant.pk)


class NoteStatusChange(models.Model):
    """Every status change of a note, with its time (the delay analytics read these)."""

    note = models.ForeignKey(Note, on_delete=models.CASCADE, related_name="status_changes")
    previous_status = models.CharField(max_length=32, choices=NoteStatus.choices, blank=True)
    status = models.CharField(max_length=32, choices=NoteStatus.choices)
    intercept = models.FloatField(null=True, blank=True)
    factor = models.FloatField(null=True, blank=True)
    changed_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        ordering = ["changed_at"]

    def __str__(self) -> str:
        return f"note {self.note_id} -> {self.status}"


class ScoringRun(Stateful, models.Model):
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
    state = models.CharField(max_length=10, choices=State.choices, default=State.QUEUED, db_index=True)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # The scorer's summary (notes, ratings, notes_updated, status_changes, helpful, ...).
    summary = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
    # The worker's claim, renewed by its heartbeat; past it the sweeper re-queues the run.
    claimed_until = models.DateTimeField(null=True, blank=True)
    attempts = models.PositiveSmallIntegerField(default=0)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"scoring run {self.pk} ({self.state})"

    @property
    def duration_s(self) -> float | None:
        if self.started_at is None or self.finished_at is None:
            return None
        return (self.finished_at - self.started_at).total_seconds()


class RatingLevel(models.TextChoices):
    HELPFUL = "HELPFUL", "Helpful"
    SOMEWHAT_HELPFUL = "SOMEWHAT_HELPFUL", "Somewhat helpful"
    NOT_HELPFUL = "NOT_HELPFUL", "Not helpful"


HELPFUL_TAGS: dict[str, str] = {
    "helpfulClear": "Clear and well-written",
    "helpfulGoodSources": "Cites high-quality sources",
    "helpfulAddressesClaim": "Directly addresses the post's claim",
    "helpfulImportantContext": "Provides important context",
    "helpfulUnbiasedLanguage": "Neutral or unbiased language",
}
NOT_HELPFUL_TAGS: dict[str, str] = {
    "notHelpfulIncorrect": "Incorrect information",
    "notHelpfulSourcesMissingOrUnreliable": "Sources missing or unreliable",
    "notHelpfulMissingKeyPoints": "Misses key points or irrelevant",
    "notHelpfulHardToUnderstand": "Hard to understand",
    "notHelpfulArgumentativeOrBiased": "Argumentative or biased language",
    "notHelpfulSpamHarassmentOrAbuse": "Spam, harassment or abuse",
    "notHelpfulIrrelevantSources": "Sources do not support the note",
    "notHelpfulOpinionSpeculation": "Opinion or speculation",
    "notHelpfulNoteNotNeeded": "Note not needed on this post",
}


# The tags a rating of each level may carry: Somewhat helpful takes both kinds.
TAGS_FOR_LEVEL: dict[str, frozenset[str]] = {
    RatingLevel.HELPFUL: frozenset(HELPFUL_TAGS),
    RatingLevel.SOMEWHAT_HELPFUL: frozenset(HELPFUL_TAGS) | frozenset(NOT_HELPFUL_TAGS),
    RatingLevel.NOT_HELPFUL: frozenset(NOT_HELPFUL_TAGS),
}


class Rating(models.Model):
    # No index of its own: the unique (note, rater) index leads with note and serves every
    # lookup by note (one index less to maintain on bulk imports).
    note = models.ForeignKey(Note, on_delete=models.CASCADE, related_name="ratings", db_index=False)
    rater = models.ForeignKey(Participant, on_delete=models.CASCADE, related_name="ratings")
    level = models.CharField(max_length=20, choices=RatingLevel.choices)
    tags = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(auto_now=True)
    # The version rated (None: imported, or rated before notes had versions: the note's version 1).
    # Indexed only where set (Meta): imported ratings, nearly all rows, never enter that index.
    version = models.ForeignKey(
        "notes.NoteVersion", null=True, blank=True, on_delete=models.SET_NULL, related_name="ratings", db_index=False
    )

    class Meta:
        constraints = [models.UniqueConstraint(fields=["note", "rater"], name="one_rating_per_rater_per_note")]
        indexes = [
            models.Index(fields=["version"], condition=Q(version__isnull=False), name="rating_version_when_set"),
        ]

    def __str__(self) -> str:
        return f"{self.rater_id} rated note {self.note_id}: {self.level}"


class ImportCheckpoint(models.Model):
    """How far an interrupted bulk import of one file got (deleted when the file is done, or, in
    a whole-folder import, marked finished until the folder is done).

    Written in the same transaction as the rows it counts, so a resumed import starts exactly
    after the last committed chunk (notes/communitynotes/importer.py)."""

    key = models.CharField(max_length=512, unique=True)  # file kind, path, size and mtime
    lines_done = models.BigIntegerField(default=0)
    # The byte offset of line lines_done + 1 (0: unknown, an older checkpoint: skip by lines).
    bytes_done = models.BigIntegerField(default=0)
    finished = models.BooleanField(default=False)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"{self.key}: {self.lines_done} lines"


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


class SupernoteRun(Stateful, models.Model):
    """One Supernote generation for a post: candidates, filters, jury and the selection outcome."""

    class State(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"

    # Claimed one slice at a time (crowdnotes_site.leases); a failed run is not retried: start a new one.
    TRANSITIONS: ClassVar[Transitions] = Transitions("Supernote run", RUN_STEPS)

    post = models.ForeignKey(Post, on_delete=models.CASCADE, related_name="supernote_runs")
    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    state = models.CharField(max_length=10, choices=State.choices, default=State.QUEUED, db_index=True)
    stage = models.CharField(max_length=200, blank=True)
    progress = models.PositiveSmallIntegerField(default=0)
    error = models.TextField(blank=True)
    n_candidates = models.PositiveIntegerField(default=100)
    jury_size = models.PositiveIntegerField(default=200)
    stratified = models.BooleanField(default=False)
    seed = models.BigIntegerField(default=0)
    # The notes the candidates were made from (pks), the PHM version and the scorer's μ used.
    source_note_ids = models.JSONField(default=list, blank=True)
    phm_version = models.CharField(max_length=120, blank=True)
    # What the PHM used was trained on and its held-out AUC, shown with the jury score (an AUC near
    # 0.5, as on the demo's few ratings, means the model is at chance and the score says little).
    phm_trained_on = models.CharField(max_length=300, blank=True)
    phm_auc = models.FloatField(null=True, blank=True)
    mu = models.FloatField(null=True, blank=True)
    best_existing_note = models.ForeignKey(
        "notes.Note", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    best_existing_intercept = models.FloatField(null=True, blank=True)
    proposed_note = models.OneToOneField(
        "notes.Note", null=True, blank=True, on_delete=models.SET_NULL, related_name="supernote_run"
    )
    outcome = models.TextField(blank=True)
    # Candidates with a text, and how many distinct texts among them (normalized; repeats are
    # not scored by the jury).
    n_drawn = models.PositiveIntegerField(null=True, blank=True)
    n_distinct = models.PositiveIntegerField(null=True, blank=True)
    # The best-scored candidate's intercept re-estimated on fresh jury draws (the draws that selected
    # it favour it: its selection score is the maximum of noisy estimates); the proposal is decided on this.
    winner_index = models.PositiveIntegerField(null=True, blank=True)
    winner_intercept = models.FloatField(null=True, blank=True)
    winner_intercept_sd = models.FloatField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # A run is done in slices, one task delivery each (notes.supernotes.services.supernote_run_step):
    # candidates written and checked so far; the worker's claim on the current slice (renewed by its
    # heartbeat, swept when it expires) and the deliveries of that slice.
    candidates_done = models.PositiveIntegerField(default=0)
    claimed_until = models.DateTimeField(null=True, blank=True)
    attempts = models.PositiveSmallIntegerField(default=0)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            # One run per post at a time: two concurrent "Generate" clicks cannot both insert.
            models.UniqueConstraint(
                fields=["post"], condition=Q(state__in=["queued", "running"]), name="one_active_supernote_run_per_post"
            )
        ]

    def __str__(self) -> str:
        return f"supernote run {self.pk} ({self.state})"


class SupernoteCandidate(models.Model):
    """A candidate text of a run, with the principle-filter log and its jury score."""

    run = models.ForeignKey(SupernoteRun, on_delete=models.CASCADE, related_name="candidates")
    index = models.PositiveIntegerField()
    text = models.TextField(blank=True)
    # "llm:<model>" or "baseline:extractive-merge-v2" (Producer.label).
    producer = models.CharField(max_length=120)
    # The source notes given to the generator, in the order given (pks).
    source_note_ids = models.JSONField(default=list)
    passed = models.BooleanField(default=False)
    # [{"filter": name, "ok": bool, "reason": text, "by": producer label}]
    filter_log = models.JSONField(default=list, blank=True)
    jury_intercept = models.FloatField(null=True, blank=True)
    jury_factor = models.FloatField(null=True, blank=True)
    jury_intercept_sd = models.FloatField(null=True, blank=True)

    class Meta:
        ordering = ["run", "index"]
        constraints = [models.UniqueConstraint(fields=["run", "index"], name="one_candidate_per_index")]

    def __str__(self) -> str:
        return f"candidate {self.index} of run {self.run_id}"

    @property
    def failed_filters(self) -> list[dict[str, object]]:
        return [entry for entry in self.filter_log if not entry.get("ok")]


class SupernoteComparison(models.Model):
    """One rater's blind comparison of a proposed Supernote with the best existing note of its post
    (issue 11 item 7). Created when the rater is assigned the pair, with the order drawn then
    (`supernote_first`: the Supernote is "Note A"), so a reload shows the same order; answered once."""

    rater = models.ForeignKey(Participant, on_delete=models.CASCADE, related_name="supernote_comparisons")
    supernote = models.ForeignKey(Note, on_delete=models.CASCADE, related_name="+")
    other_note = models.ForeignKey(Note, on_delete=models.CASCADE, related_name="+")
    supernote_first = models.BooleanField()
    created_at = models.DateTimeField(default=timezone.now)
    answered_at = models.DateTimeField(null=True, blank=True, db_index=True)
    supernote_preferred = models.BooleanField(null=True, blank=True)
    # {statement key: 1..5} (crowdnotes_site/lib/communitynotes/supernotes/comparison.py: STATEMENTS) for each side.
    supernote_scores = models.JSONField(default=dict, blank=True)
    other_scores = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["rater", "supernote", "other_note"], name="one_comparison_per_rater_per_pair"
            )
        ]

    def __str__(self) -> str:
        return f"comparison {self.pk} by {self.rater_id}"


# --- Living notes (issue 36): requests, versions, suggestions, revisions ---------------------


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


class RevisionRun(Stateful, models.Model):
    """One revision attempt of a note: draft from the suggestions, judges, jury, decision.
    One active run per note (constraint); claimed and swept like the other runs (crowdnotes_site.leases)."""

    class State(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"

    class Outcome(models.TextChoices):
        # The machine's checks passed it: it waits for the note's author (or an admin) to decide.
        PROPOSED = "proposed", "Proposed, waiting for a person"
        PUBLISHED = "published", "Accepted by a person and published"
        DECLINED = "declined", "Declined by a person"
        REJECTED = "rejected", "Rejected by the checks"

    TRANSITIONS: ClassVar[Transitions] = Transitions("revision run", RUN_STEPS)

    note = models.ForeignKey(Note, on_delete=models.CASCADE, related_name="revision_runs")
    base_version = models.ForeignKey(NoteVersion, on_delete=models.CASCADE, related_name="+")
    state = models.CharField(max_length=10, choices=State.choices, default=State.QUEUED, db_index=True)
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
    error = models.TextField(blank=True)
    claimed_until = models.DateTimeField(null=True, blank=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

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
