"""What the X pages show (reads only)."""

from __future__ import annotations

import datetime as dt
import time
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db.models import Count, Exists, F, OuterRef, QuerySet
from django.utils import timezone

from judging.models import JudgeDecision, JudgeRun
from notes.models import Note, Post, Rating, Topic
from xnotes import budget, rules
from xnotes.client import missing_settings
from xnotes.models import XEvaluation, XFetchRun, XPost, XProposal, XTaskRun, XWrittenNote
from xnotes.services import evaluator, hydrate, proposals, written

POLL_SECONDS = 2


@dataclass(frozen=True)
class XStatus:
    """Whether X is on, in which mode, and how to turn it on: every X page shows it."""

    missing: list[str]
    test_mode: bool

    @property
    def configured(self) -> bool:
        return not self.missing


def x_status() -> XStatus:
    return XStatus(missing=missing_settings(), test_mode=settings.X_TEST_MODE)


def awaiting_note() -> QuerySet[XPost]:
    """From X: eligible posts classified as health, with no note yet, newest first: by the post's
    own time on X (one fetch stores many posts at the same first_seen_at), then by when it was seen."""
    has_note = Exists(Note.objects.filter(post_id=OuterRef("post_id")))
    return (
        XPost.objects.filter(eligible=True)
        .exclude(post__topic__in=["", Topic.NOT_HEALTH])
        .annotate(has_note=has_note)
        .filter(has_note=False)
        .select_related("post")
        .order_by(F("post__posted_at").desc(nulls_last=True), "-first_seen_at", "-id")
    )


def unclassified_count() -> int:
    return XPost.objects.filter(eligible=True, post__topic="").count()


def xpost_for(post: Post) -> XPost | None:
    return XPost.objects.filter(post=post).first()


@dataclass(frozen=True)
class ProposalView:
    proposal: XProposal | None
    refusals: list[str]
    can_propose: bool
    written: XWrittenNote | None
    x_id: str


def proposal_view(*, note: Note, user: Any) -> ProposalView:
    proposal = XProposal.objects.filter(post_id=note.post_id).first()
    refusals = [] if proposal else proposals.proposal_refusals(note)
    written = None
    if proposal is not None and proposal.x_note_id:
        written = XWrittenNote.objects.filter(x_note_id=proposal.x_note_id).first()
    can = bool(user and user.has_perm("xnotes.propose_xnote")) and not refusals and proposal is None
    return ProposalView(proposal, refusals, can, written, evaluator.x_post_id(note.post))


def suggested_choice(note: Note) -> rules.Suggestion:
    """What the propose form starts with (xnotes.rules.suggest_choice): the note's classification,
    its ratings' tags and the reasoning of the judges that passed it in its latest judge run."""
    rating_tags = [list(t or []) for t in Rating.objects.filter(note=note).values_list("tags", flat=True)]
    run = JudgeRun.objects.filter(note=note).order_by("-created_at", "-id").first()
    judge_reasons: list[rules.JudgeReason] = []
    if run is not None:
        for d in JudgeDecision.objects.filter(run=run).order_by("id"):
            if (d.override_verdict or d.verdict) == JudgeDecision.Verdict.YES:
                judge_reasons.append(rules.JudgeReason(stage=d.stage, reasoning=d.reasoning))
    return rules.suggest_choice(
        note_misleading=note.classification == Note.Classification.MISLEADING,
        rating_tags=rating_tags,
        judge_reasons=judge_reasons,
    )


def evaluation_for(*, post: Post, text: str) -> XEvaluation | None:
    return evaluator.evaluation_cached(post=post, text=text)


@dataclass(frozen=True)
class WriterPage:
    status: XStatus
    admission: rules.Admission
    writing_limit: rules.WritingLimit
    quota: proposals.Quota
    written_total: int
    written_test: int  # notes stored from notes_written in test mode
    written_live: int
    last_sync: dt.datetime | None  # the newest stored note's sync, or a finished sync run's end
    runs: list[XFetchRun]
    active_run: XFetchRun | None
    budget_notes: budget.BudgetState
    budget_tweets: budget.BudgetState
    without_text: int
    not_returned: int
    hydrate_runs: list[XTaskRun]
    sync_runs: list[XTaskRun]

    @property
    def active_hydrate(self) -> XTaskRun | None:
        return next((r for r in self.hydrate_runs if r.state in XTaskRun.ACTIVE), None)

    @property
    def active_sync(self) -> XTaskRun | None:
        return next((r for r in self.sync_runs if r.state in XTaskRun.ACTIVE), None)

    @property
    def poll_seconds(self) -> int:
        return POLL_SECONDS if self.active_run or self.active_hydrate or self.active_sync else 0

    @property
    def notes_reset(self) -> dt.datetime | None:
        return epoch(self.budget_notes.reset_at)

    @property
    def tweets_reset(self) -> dt.datetime | None:
        return epoch(self.budget_tweets.reset_at)

    @property
    def hydrate_limit(self) -> int:
        return int(settings.X_HYDRATE_BATCH_LIMIT)

    @property
    def retry_days(self) -> int:
        return int(settings.X_NOT_FOUND_RETRY_DAYS)

    @property
    def budget_store(self) -> str:
        """Where the budget is kept (the default cache): what every process reads and writes."""
        backend = str(settings.CACHES["default"]["BACKEND"])
        if "redis" in backend.lower():
            return "Redis (REDIS_URL)" if settings.REDIS_URL else "the broker's Redis (CELERY_BROKER_URL; no REDIS_URL)"
        if "File" in backend:
            return f"a file cache every process of this machine shares ({settings.CACHES['default']['LOCATION']}; no REDIS_URL)"
        return f"the cache {backend.rsplit('.', 1)[-1]}"

    @property
    def tweets_blocked_until(self) -> dt.datetime | None:
        blocked = self.budget_tweets.blocked_until
        return epoch(blocked) if blocked and blocked > time.time() else None

    @property
    def notes_blocked_until(self) -> dt.datetime | None:
        blocked = self.budget_notes.blocked_until
        return epoch(blocked) if blocked and blocked > time.time() else None

    @property
    def schedule(self) -> dict[str, str]:
        def every(seconds: int) -> str:
            return f"every {seconds // 60} minutes" if seconds else "never (not scheduled)"

        return {"fetch": every(settings.X_FETCH_INTERVAL_S), "hydrate": every(settings.X_HYDRATE_INTERVAL_S),
                "sync": every(settings.X_SYNC_INTERVAL_S)}  # fmt: skip


def writer_page() -> WriterPage:
    runs = list(XFetchRun.objects.select_related("requested_by")[:10])
    stored = XWrittenNote.objects.order_by("-synced_at").values_list("synced_at", flat=True).first()
    synced = (
        XTaskRun.objects.filter(kind=XTaskRun.Kind.SYNC, state=XTaskRun.State.DONE, finished_at__isnull=False)
        .order_by("-finished_at")
        .values_list("finished_at", flat=True)
        .first()
    )
    last = max((t for t in (stored, synced) if t is not None), default=None)
    by_mode = dict(XWrittenNote.objects.values("test_mode").annotate(n=Count("pk")).values_list("test_mode", "n"))
    return WriterPage(
        status=x_status(),
        admission=written.admission_now(),
        writing_limit=written.writing_limit_now(),
        quota=proposals.quota(),
        written_total=by_mode.get(settings.X_TEST_MODE, 0),
        written_test=by_mode.get(True, 0),
        written_live=by_mode.get(False, 0),
        last_sync=last,
        runs=runs,
        active_run=next((r for r in runs if r.state in XFetchRun.ACTIVE), None),
        budget_notes=budget.state("notes"),
        budget_tweets=budget.state("tweets"),
        without_text=hydrate.posts_without_text().count(),
        not_returned=XPost.objects.exclude(lookup_error="").count(),
        hydrate_runs=list(XTaskRun.objects.filter(kind=XTaskRun.Kind.HYDRATE).select_related("requested_by")[:5]),
        sync_runs=list(XTaskRun.objects.filter(kind=XTaskRun.Kind.SYNC).select_related("requested_by")[:5]),
    )


def epoch(value: float | None) -> dt.datetime | None:
    return None if value is None else dt.datetime.fromtimestamp(value, tz=dt.UTC)


def now() -> dt.datetime:
    return timezone.now()
