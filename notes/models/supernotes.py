"""Supernotes: a run over a stuck post, its candidates and the blind comparisons."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from crowdnotes_site.leases import ClaimedRun
from notes.models.notes import Note, Participant
from notes.models.posts import Post


class SupernoteRun(ClaimedRun):
    """One Supernote generation for a post: candidates, filters, jury and the selection outcome.
    Claimed one slice at a time (ClaimedRun's table: a failed run is not retried, a new one is started)."""

    post = models.ForeignKey(Post, on_delete=models.CASCADE, related_name="supernote_runs")
    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    stage = models.CharField(max_length=200, blank=True)
    progress = models.PositiveSmallIntegerField(default=0)
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
    # A run is done in slices, one task delivery each (notes.supernotes.services.supernote_run_step):
    # candidates written and checked so far. `claimed_until` is the claim on the current slice and
    # `attempts` counts that slice's deliveries.
    candidates_done = models.PositiveIntegerField(default=0)

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
    """One rater's blind comparison of a proposed Supernote with the best existing note of its post.
    Created when the rater is assigned the pair, with the order drawn then
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
