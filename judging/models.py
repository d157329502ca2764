from __future__ import annotations

from typing import ClassVar

from django.conf import settings
from django.db import models
from django.utils import timezone

from crowdnotes_site.leases import ClaimedRun
from crowdnotes_site.lib.transitions import FAILED, QUEUED, RUN_STEPS, Transitions

# An override's reason is read on the audit page: a paragraph, not a document. The form and judging.services.decision_override both refuse a longer one.
OVERRIDE_REASON_MAX_CHARS = 2000


class Stage(models.TextChoices):
    RELEVANCE = "relevance", "Relevance"
    CORRECTNESS = "correctness", "Correctness"
    HELPFULNESS = "helpfulness", "Helpfulness"


class JudgeKind(models.TextChoices):
    LLM = "llm", "LLM"
    CLASSIFIER = "classifier", "Trained classifier"
    BASELINE = "baseline", "Offline baseline"


class JudgeRun(ClaimedRun):
    """One run of the judge chain on one version (content hash) of a note."""

    # Claimed one stage at a time (ClaimedRun); a failed run may be queued again (an admin's retry, or
    # once after an LLM outage).
    TRANSITIONS: ClassVar[Transitions] = Transitions("judge run", {**RUN_STEPS, FAILED: {QUEUED}})

    note = models.ForeignKey("notes.Note", on_delete=models.CASCADE, related_name="judge_runs")
    content_hash = models.CharField(max_length=64)
    helpful = models.BooleanField(null=True, blank=True)
    # The stage being judged; the claim (`claimed_until`) is on this stage.
    stage = models.CharField(max_length=12, choices=Stage.choices, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    # When the beat sweep queued this run again after it failed during an LLM outage (at most once).
    outage_retried_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [models.UniqueConstraint(fields=["note", "content_hash"], name="one_run_per_note_version")]

    def __str__(self) -> str:
        return f"run {self.pk} of note {self.note_id}: {self.state}"


class JudgeDecision(models.Model):
    """One stage's verdict, with everything needed to audit it."""

    class Verdict(models.TextChoices):
        YES = "yes", "Yes"
        NO = "no", "No"
        ERROR = "error", "Error"

    run = models.ForeignKey(JudgeRun, null=True, blank=True, on_delete=models.CASCADE, related_name="decisions")
    note = models.ForeignKey("notes.Note", on_delete=models.CASCADE, related_name="judge_decisions")
    content_hash = models.CharField(max_length=64)
    stage = models.CharField(max_length=12, choices=Stage.choices)
    verdict = models.CharField(max_length=5, choices=Verdict.choices)
    reasoning = models.TextField(blank=True)
    judge_kind = models.CharField(max_length=10, choices=JudgeKind.choices)
    judge_name = models.CharField(max_length=120)
    prompt_version = models.CharField(max_length=40, blank=True)
    inputs = models.JSONField(default=dict)
    prompt = models.TextField(blank=True)
    raw_output = models.TextField(blank=True)
    latency_ms = models.PositiveIntegerField(default=0)
    prompt_tokens = models.PositiveIntegerField(null=True, blank=True)
    completion_tokens = models.PositiveIntegerField(null=True, blank=True)
    attempts = models.PositiveSmallIntegerField(default=1)  # answers asked for (unparsable ones re-asked)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    override_verdict = models.CharField(max_length=5, choices=Verdict.choices, blank=True)
    override_reason = models.TextField(blank=True)
    overridden_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    overridden_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(fields=["note", "stage", "content_hash"], name="one_decision_per_stage_version")
        ]

    def __str__(self) -> str:
        return f"{self.stage} of note {self.note_id}: {self.verdict}"

    @property
    def effective_verdict(self) -> str:
        return self.override_verdict or self.verdict


class JudgeOverride(models.Model):
    """Audit trail: every override of a decision, kept even when overridden again."""

    decision = models.ForeignKey(JudgeDecision, on_delete=models.CASCADE, related_name="overrides")
    previous_verdict = models.CharField(max_length=5, choices=JudgeDecision.Verdict.choices)
    verdict = models.CharField(max_length=5, choices=JudgeDecision.Verdict.choices)
    reason = models.TextField()
    by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["at"]

    def __str__(self) -> str:
        return f"override of decision {self.decision_id}: {self.previous_verdict} -> {self.verdict}"


class PreflightCheck(ClaimedRun):
    """A contributor's pre-flight: the judges' advice on a draft, computed by a worker (the judges
    load models and call the LLM, which a web request never does). Advice only: it decides nothing.
    Asked once (ClaimedRun's table): a failed check is asked for again as a new one; a check whose
    workers keep dying is failed after JUDGE_MAX_CLAIMS claims."""

    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    draft_job = models.ForeignKey("notes.DraftJob", null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    post_text = models.TextField()
    note_text = models.TextField()
    urls = models.JSONField(default=list, blank=True)
    snippets = models.JSONField(default=list, blank=True)  # [{"text": ..., "source": ...}]
    # Declared here only because it has no index (ClaimedRun's `state` has one).
    state = models.CharField(max_length=10, choices=ClaimedRun.State.choices, default=ClaimedRun.State.QUEUED)
    # {"stages": [{stage, verdict, reasoning, judge_kind, judge_name, error, note_text_judged}], "helpful": ...}
    result = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"pre-flight {self.pk} ({self.state})"

    @property
    def pending(self) -> bool:
        return self.state in (self.State.QUEUED, self.State.RUNNING)
