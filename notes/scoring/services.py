"""Scoring runs: asked for, claimed and run by a worker; the rescoring that writes each note's status from the database's ratings."""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from typing import TYPE_CHECKING, Any

import numpy as np
from django.db import connection, transaction
from django.db.models import F, Model, Q
from django.utils import timezone

from crowdnotes_site import leases
from crowdnotes_site.dbstats import refresh_planner_statistics
from crowdnotes_site.leases import heartbeat, lease_deadline
from crowdnotes_site.lib.communitynotes import scoring
from crowdnotes_site.lib.communitynotes.scoring import explain as scoring_explain
from crowdnotes_site.queue import enqueue_on_commit
from crowdnotes_site.transitions import transition_rows
from notes.models import (
    Note,
    NoteStatusChange,
    Participant,
    ScoringRun,
)
from notes.scoring import reader
from notes.scoring.selectors import APP_SCORING_CONFIG

if TYPE_CHECKING:
    from django.contrib.auth.models import User

# A rescoring that rewrites at least this many notes (and a tenth of them) refreshes the planner's
# statistics of the notes table.
RESCORE_ANALYZE_MIN_ROWS = 1000
# pg_try_advisory_xact_lock key: one rescoring at a time, whoever triggers it.
SCORING_LOCK_KEY = 0x5C0_12E5


def notes_rescore_request(*, user: User | None = None) -> ScoringRun:
    """Queue a rescoring ("rescore now") on the cpu queue once the current transaction commits.

    One asked-for run at a time: while one is queued or running, asking again returns it."""
    pending = ScoringRun.objects.filter(
        trigger=ScoringRun.Trigger.ADMIN, state__in=[ScoringRun.State.QUEUED, ScoringRun.State.RUNNING]
    ).first()
    if pending is not None:
        return pending
    run = ScoringRun.objects.create(trigger=ScoringRun.Trigger.ADMIN, requested_by=user)
    _scoring_enqueue(run.pk)
    return run


def _scoring_enqueue(run_id: int) -> None:
    """Queue the run on the cpu queue in the fair turn of the admin who asked for it (a scheduled
    run has nobody's turn)."""
    owner = ScoringRun.objects.filter(pk=run_id).values_list("requested_by_id", flat=True).first()
    enqueue_on_commit("notes.tasks.score_notes", run_id, owner=owner)


def scoring_run_execute(*, run_id: int | None = None) -> ScoringRun:
    """Run the scorer and record the run (a scheduled run, run_id None, gets its row here).

    The run is claimed first (compare-and-set; a failed run may be claimed again by the task's
    retry) and its claim is renewed by a heartbeat while the scorer runs, so a lost worker's run is
    re-queued by the sweeper (`scoring_runs_sweep`) within WORK_LEASE_S + WORK_SWEEP_INTERVAL_S.
    The run's row is written outside the scoring transaction, so a failed scoring still shows as a
    failed run with its error."""
    if run_id is None:
        run_id = ScoringRun.objects.create(trigger=ScoringRun.Trigger.SCHEDULE).pk
    now = timezone.now()
    claimable = Q(state__in=[ScoringRun.State.QUEUED, ScoringRun.State.FAILED]) | Q(
        state=ScoringRun.State.RUNNING, claimed_until__lt=now
    )
    claimed = transition_rows(
        ScoringRun.objects.filter(claimable, pk=run_id),
        ScoringRun.State.RUNNING, claimed_until=lease_deadline(), started_at=now, error="", attempts=F("attempts") + 1,
    )  # fmt: skip
    run = ScoringRun.objects.get(pk=run_id)
    if not claimed:
        return run  # done, skipped, or another worker holds a live claim (a redelivered task)
    with heartbeat(ScoringRun, run_id, field="claimed_until"):
        try:
            summary = notes_rescore(now=run.started_at)  # its status changes carry the run's start time
        except Exception as exc:
            run.transition(ScoringRun.State.FAILED)
            run.error, run.finished_at, run.claimed_until = f"{type(exc).__name__}: {exc}"[:2000], timezone.now(), None
            run.save(update_fields=["state", "error", "finished_at", "claimed_until"])
            raise
    run.transition(ScoringRun.State.SKIPPED if "skipped" in summary else ScoringRun.State.DONE)
    run.summary, run.finished_at, run.claimed_until = summary, timezone.now(), None
    run.save(update_fields=["state", "summary", "finished_at", "claimed_until"])
    return run


@leases.sweep("scoring_runs")
def scoring_runs_sweep() -> list[int]:
    """Re-queue the scoring runs whose worker stopped renewing the claim (beat: work_sweep)."""
    return leases.runs_sweep(ScoringRun, _scoring_enqueue)


def _update_rows(model: type[Model], fields: list[str], rows: list[tuple[Any, ...]]) -> None:
    """UPDATE the rows (each: the `fields`' values, then the id). Many rows on PostgreSQL: COPY
    into a temporary table and one UPDATE … FROM (a first rescoring of a whole download
    rewrites millions of notes); a few: one pipelined executemany (bulk_update's CASE
    expressions are slow at this size)."""
    if not rows:
        return
    quote = connection.ops.quote_name
    columns = {f.name: str(f.column) for f in model._meta.concrete_fields}
    table = quote(model._meta.db_table)
    # Table and column names come from the model, never from input.
    with connection.cursor() as cursor:
        if connection.vendor != "postgresql" or len(rows) < _UPDATE_BY_COPY_ROWS:
            sets = ", ".join(f"{quote(columns[f])} = %s" for f in fields)
            cursor.executemany(f"UPDATE {table} SET {sets} WHERE id = %s", rows)  # noqa: S608
            return
        names = [quote(columns[f]) for f in fields]
        cursor.execute(
            f"CREATE TEMP TABLE cn_rescore_rows AS SELECT {', '.join(names)}, id FROM {table} WITH NO DATA"  # noqa: S608
        )
        with cursor.copy("COPY cn_rescore_rows FROM STDIN") as copy:  # type: ignore[attr-defined]
            for row in rows:
                copy.write_row(row)
        sets = ", ".join(f"{name} = u.{name}" for name in names)
        cursor.execute(f"UPDATE {table} t SET {sets} FROM cn_rescore_rows u WHERE t.id = u.id")  # noqa: S608
        cursor.execute("DROP TABLE cn_rescore_rows")


_UPDATE_BY_COPY_ROWS = 2000
RESCORE_WRITE_BATCH = 50_000  # notes explained, compared and written at a time


def _differs(old: np.ndarray, new: np.ndarray) -> np.ndarray:
    """Per element: one is NaN (none) and the other not, or both numbers more than 1e-9 apart."""
    old_none, new_none = np.isnan(old), np.isnan(new)
    with np.errstate(invalid="ignore"):
        return (old_none != new_none) | (~old_none & ~new_none & (np.abs(old - new) > 1e-9))


def _number(value: float) -> float | None:
    return None if value != value else float(value)


@transaction.atomic
def notes_rescore(*, now: datetime | None = None, config: scoring.ScoringConfig | None = None) -> dict[str, Any]:
    """Score every note from the ratings in the database (crowdnotes_site/lib/communitynotes/scoring/) and store the results.

    Writes intercept/factor/status/num_ratings to changed notes, rater parameters to participants,
    and a NoteStatusChange row for every status change. Runs once at a time (advisory lock).
    Memory: the ratings are read into the scorer's compact arrays (selectors.scoring_inputs)
    and let go once scored; the notes are then explained, compared and written in batches of
    RESCORE_WRITE_BATCH, so no Python object per note is held for all notes at once.
    """
    cfg = config or APP_SCORING_CONFIG
    now = now or timezone.now()
    # SQLite (the embedded demo) serialises writers itself; PostgreSQL needs the advisory lock.
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_try_advisory_xact_lock(%s)", [SCORING_LOCK_KEY])
            if not cursor.fetchone()[0]:
                return {"skipped": "another rescoring is running"}
    inputs = reader.scoring_inputs(now=now, lock_after_days=cfg.lock_after_days)
    n_ratings = len(inputs.ratings.value)
    result = scoring.score(
        inputs.ratings, inputs.meta, len(inputs.participant_pks), cfg, now_ms=int(now.timestamp() * 1000)
    )
    empty = np.zeros(0, dtype=np.int32)
    inputs.ratings = scoring.Ratings(rater=empty, note=empty, value=empty.astype(np.float32))  # scored: let go
    assert result.explanation is not None
    ex = result.explanation
    # What can be compared without the explanation's text, for all notes at once.
    differs = (
        (result.status != inputs.previous_status)
        | (result.num_ratings != inputs.previous_num_ratings)
        | (ex.neg_count != inputs.previous_sides[:, 0])
        | (ex.pos_count != inputs.previous_sides[:, 1])
        | _differs(inputs.previous_intercept, result.note_intercept)
        | _differs(inputs.previous_factor, result.note_factor)
    )
    notes_updated = status_changes = 0
    update_fields = ["status", "intercept", "factor", "num_ratings", "scored_at", "score_rules", "intercept_max",
                     "neg_side_ratings", "pos_side_ratings", "score_explanation"]  # fmt: skip
    for start in range(0, len(inputs.note_pks), RESCORE_WRITE_BATCH):
        at = list(range(start, min(start + RESCORE_WRITE_BATCH, len(inputs.note_pks))))
        note_rows: list[tuple[Any, ...]] = []
        changes: list[NoteStatusChange] = []
        for i, why in zip(at, scoring_explain.why_rows(result, at), strict=True):
            explanation = scoring_explain.explain(why, cfg)
            digest = hashlib.md5(explanation.encode(), usedforsecurity=False).digest()
            if not differs[i] and digest == inputs.previous_explanation_md5[i].tobytes():
                continue
            pk = int(inputs.note_pks[i])
            note_rows.append(
                (why.status, why.intercept, why.factor, why.num_ratings, now, json.dumps(list(why.rules)),
                 why.intercept_max, why.neg_count, why.pos_count, explanation, pk)
            )  # fmt: skip
            old_code = int(inputs.previous_status[i])
            if int(result.status[i]) != old_code:
                changes.append(
                    NoteStatusChange(
                        note_id=pk, previous_status=scoring.STATUS_NAMES.get(old_code, ""), status=why.status,
                        intercept=why.intercept, factor=why.factor, changed_at=now,
                    )
                )  # fmt: skip
        _update_rows(Note, update_fields, note_rows)
        NoteStatusChange.objects.bulk_create(changes, batch_size=2000)
        notes_updated += len(note_rows)
        status_changes += len(changes)
    if notes_updated >= max(RESCORE_ANALYZE_MIN_ROWS, len(inputs.note_pks) // 10):
        # Most statuses were rewritten (a first scoring, an import): the rating queue and the audit
        # pages filter on status, so their plans need the new counts now, not at the next autovacuum.
        refresh_planner_statistics(Note)
    raters = np.flatnonzero(
        _differs(inputs.previous_rater_intercept, result.rater_intercept)
        | _differs(inputs.previous_rater_factor, result.rater_factor)
    )
    rater_rows = [
        (_number(result.rater_intercept[u]), _number(result.rater_factor[u]), now, int(inputs.participant_pks[u]))
        for u in raters.tolist()
    ]
    _update_rows(Participant, ["rater_intercept", "rater_factor", "scored_at"], rater_rows)
    counts = np.bincount(result.status, minlength=3)
    return {
        "notes": len(inputs.note_pks),
        "ratings": n_ratings,
        "notes_updated": notes_updated,
        "status_changes": status_changes,
        "raters_updated": len(rater_rows),
        "helpful": int(counts[scoring.CURRENTLY_RATED_HELPFUL]),
        "not_helpful": int(counts[scoring.CURRENTLY_RATED_NOT_HELPFUL]),
        "needs_more_ratings": int(counts[scoring.NEEDS_MORE_RATINGS]),
    }
