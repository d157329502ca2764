"""The scoring page's overview, and why a note has its status."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Count, Q
from django.utils import timezone

from crowdnotes_site.lib.communitynotes import scoring
from notes.models import (
    Note,
    NoteStatus,
    NoteStatusChange,
    Rating,
    RatingLevel,
    ScoringRun,
)

# The reference counts a rating towards its rater's reputation only if it came within 48 h of the
# note (before the public data download could reveal outcomes). Here raters never see other
# ratings or scores before rating, and "made before the note's latest status" still applies, so
# the window is dropped: with it, ratings of notes older than two days would never count.
APP_SCORING_CONFIG = scoring.ScoringConfig(valid_rating_window_ms=None)


# --- The scoring page ------------------------------------------------------------------------


@dataclass(frozen=True)
class ScoringOverview:
    """What the admin scoring page shows: recent runs, the last finished one and its status
    changes, the asked-for run still pending, and when the schedule runs next."""

    runs: list[ScoringRun]
    last: ScoringRun | None
    changes: list[NoteStatusChange]
    pending: ScoringRun | None
    interval_s: float
    # When the schedule is due next: the last scheduled run's time plus beat's interval for
    # score-notes (None before the first scheduled run). It may have passed (`due_since`).
    due_at: datetime | None
    poll_seconds: int | None
    checked_at: datetime  # when this overview was read (the page says how fresh it is)

    @property
    def next_run_at(self) -> datetime | None:
        """The next scheduled run's time when it is still ahead; never a time already past."""
        return self.due_at if self.due_at is not None and self.due_at > self.checked_at else None

    @property
    def due_since(self) -> datetime | None:
        """When the scheduled run that has not come yet fell due (None when it is still ahead)."""
        return self.due_at if self.due_at is not None and self.due_at <= self.checked_at else None

    @property
    def overdue(self) -> bool:
        """The scheduled run should have started (a grace of SCORING_OVERDUE_S for beat's tick and the
        queue) but has not."""
        return self.due_since is not None and (self.checked_at - self.due_since).total_seconds() > SCORING_OVERDUE_S


SCORING_POLL_S = 2
# With nothing pending the page still re-reads itself, so a scheduled run and its "next run" are never
# shown stale for long; a scheduled run later than the grace is shown as overdue.
SCORING_IDLE_POLL_S = 20
SCORING_OVERDUE_S = 30


def scoring_overview(*, limit: int = 10) -> ScoringOverview:

    runs = list(ScoringRun.objects.select_related("requested_by")[:limit])
    last = ScoringRun.objects.filter(state=ScoringRun.State.DONE).order_by("-finished_at", "-id").first()
    changes: list[NoteStatusChange] = []
    if last is not None and last.started_at is not None:
        changes = list(
            NoteStatusChange.objects.filter(changed_at=last.started_at).select_related("note").order_by("note_id")[:50]
        )
    pending = ScoringRun.objects.filter(state__in=[ScoringRun.State.QUEUED, ScoringRun.State.RUNNING]).first()
    interval_s = float(settings.CELERY_BEAT_SCHEDULE["score-notes"]["schedule"])  # type: ignore[arg-type]
    last_scheduled = ScoringRun.objects.filter(trigger=ScoringRun.Trigger.SCHEDULE).order_by("-created_at").first()
    due_at = last_scheduled.created_at + timedelta(seconds=interval_s) if last_scheduled else None
    return ScoringOverview(
        runs=runs,
        last=last,
        changes=changes,
        pending=pending,
        interval_s=interval_s,
        due_at=due_at,
        poll_seconds=SCORING_POLL_S if pending else SCORING_IDLE_POLL_S,
        checked_at=timezone.now(),
    )


# --- Why a note has its status ---------------------------------------------------------------


@dataclass(frozen=True)
class SideCount:
    label: str
    ratings: int
    helpful: int  # Helpful or Somewhat helpful
    not_helpful: int


@dataclass(frozen=True)
class StatusExplanation:
    """The crowd status of a note in plain words, from the last scoring run's output: the note's
    intercept and factor, and its ratings counted per rater side (the sign of each rater's factor)."""

    status_label: str
    n_ratings: int
    sides: list[SideCount]
    unscored_raters: int
    intercept: float | None
    factor: float | None
    scored_at: datetime | None
    reasons: list[str]
    # The scorer's own stored reason (crowdnotes_site/lib/communitynotes/scoring/explain.py, without model numbers), when scored.
    scorer_reason: str = ""


def status_explanation(*, note: Note, config: scoring.ScoringConfig | None = None) -> StatusExplanation:
    """Derived from the stored scorer output only (the scoring engineer's per-note explanation,
    when stored by the scorer, replaces `reasons`)."""
    cfg = config or APP_SCORING_CONFIG
    helpful_q = Q(level__in=[RatingLevel.HELPFUL, RatingLevel.SOMEWHAT_HELPFUL])
    counts = Rating.objects.filter(note=note).aggregate(
        neg=Count("pk", filter=Q(rater__rater_factor__lt=0)),
        neg_h=Count("pk", filter=Q(rater__rater_factor__lt=0) & helpful_q),
        pos=Count("pk", filter=Q(rater__rater_factor__gte=0)),
        pos_h=Count("pk", filter=Q(rater__rater_factor__gte=0) & helpful_q),
        unscored=Count("pk", filter=Q(rater__rater_factor__isnull=True)),
        total=Count("pk"),
    )
    sides = [
        SideCount("raters with a negative factor", counts["neg"], counts["neg_h"], counts["neg"] - counts["neg_h"]),
        SideCount("raters with a positive factor", counts["pos"], counts["pos_h"], counts["pos"] - counts["pos_h"]),
    ]
    total = counts["total"]
    reasons: list[str] = []
    if total < cfg.min_ratings_for_status:
        missing = cfg.min_ratings_for_status - total
        reasons.append(
            f"{total} rating{'s' if total != 1 else ''} so far; a status needs at least "
            f"{cfg.min_ratings_for_status}: {missing} more."
        )
    if counts["unscored"]:
        reasons.append(
            f"{counts['unscored']} rating{'s' if counts['unscored'] != 1 else ''} come from raters the scorer has no "
            f"factor for yet (a rater needs {cfg.min_ratings_per_rater} ratings to be placed on a side)."
        )
    scored_sides = [s for s in sides if s.ratings]
    if len(scored_sides) == 1:
        other = sides[1] if scored_sides[0] is sides[0] else sides[0]
        reasons.append(
            f"All {scored_sides[0].ratings} placed ratings come from {scored_sides[0].label}: "
            f"needs raters from the other side ({other.label})."
        )
    if note.intercept is None:
        reasons.append("Not scored yet: the scorer has not had enough ratings of this note to estimate it.")
    else:
        assert note.factor is not None
        crnh = cfg.crnh_intercept + cfg.crnh_factor_multiplier * abs(note.factor)
        if note.status == NoteStatus.NEEDS_MORE_RATINGS:
            if note.intercept < cfg.crh_intercept:
                reasons.append(
                    f"Helpfulness score {note.intercept:.3f}: Helpful needs {cfg.crh_intercept:.2f} or more "
                    f"(agreement across sides); Not Helpful needs below {crnh:.3f}."
                )
            elif abs(note.factor) > cfg.crh_max_abs_factor:
                reasons.append(
                    f"Helpfulness score {note.intercept:.3f} is high, but the factor {note.factor:.3f} says one side "
                    f"carries it (Helpful needs |factor| ≤ {cfg.crh_max_abs_factor})."
                )
            else:
                reasons.append(
                    f"Helpfulness score {note.intercept:.3f} passes {cfg.crh_intercept:.2f}, but another rule of the "
                    "scorer holds it (for example too little support from the minority side, or too many "
                    "'Incorrect' tags)."
                )
        elif note.status == NoteStatus.HELPFUL:
            reasons.append(
                f"Helpfulness score {note.intercept:.3f} ≥ {cfg.crh_intercept:.2f} with factor {note.factor:.3f}: "
                "raters from both sides found it helpful."
            )
        else:
            reasons.append(f"Helpfulness score {note.intercept:.3f} is below {crnh:.3f}: rated not helpful.")
    return StatusExplanation(
        status_label=note.get_status_display(),
        n_ratings=total,
        sides=sides,
        unscored_raters=counts["unscored"],
        intercept=note.intercept,
        factor=note.factor,
        scored_at=note.scored_at,
        reasons=reasons,
        scorer_reason=note.status_reason,
    )
