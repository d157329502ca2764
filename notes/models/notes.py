"""Participants, notes, their status changes and ratings."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import F, Q
from django.db.models.functions import Least
from django.utils import timezone

from crowdnotes_site.lib import status as note_status
from notes.models.posts import Post


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
