from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from datetime import datetime
from typing import Any

import numpy as np
from django.contrib.auth.models import AbstractBaseUser, Group
from django.db import connection, transaction
from django.db.models import F, Model
from django.utils import timezone

from notes import scoring, selectors
from notes.models import (
    HELPFUL_TAGS,
    NOT_HELPFUL_TAGS,
    Note,
    NoteStatusChange,
    Participant,
    Post,
    Rating,
    RatingLevel,
)


def normalize_post_text(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().casefold()


def post_text_hash(text: str) -> str:
    return hashlib.sha256(normalize_post_text(text).encode()).hexdigest()


def participant_for_user(*, user: AbstractBaseUser) -> Participant:
    """The scoring identity of an app user, created on first use."""
    participant, _ = Participant.objects.get_or_create(user=user, defaults={"external_id": f"user-{user.pk}"})
    return participant


@transaction.atomic
def user_signup(*, username: str, password: str, email: str, roles: list[str]) -> AbstractBaseUser:
    """Create an account in the chosen roles (Contributor and/or Rater)."""
    from django.contrib.auth import get_user_model

    user = get_user_model().objects.create_user(username=username, password=password, email=email)
    user.groups.set(Group.objects.filter(name__in=roles))
    participant_for_user(user=user)
    return user


@transaction.atomic
def post_create(
    *,
    text: str,
    flagged_by: AbstractBaseUser | None = None,
    source_url: str = "",
    author_handle: str = "",
    **extra: object,
) -> Post:
    return Post.objects.create(
        text=text,
        text_hash=post_text_hash(text),
        flagged_by=flagged_by,
        source_url=source_url,
        author_handle=author_handle,
        **extra,
    )


# --- Ratings and scoring ---------------------------------------------------------------------

TAGS_FOR_LEVEL: dict[str, set[str]] = {
    RatingLevel.HELPFUL: set(HELPFUL_TAGS),
    RatingLevel.SOMEWHAT_HELPFUL: set(HELPFUL_TAGS) | set(NOT_HELPFUL_TAGS),
    RatingLevel.NOT_HELPFUL: set(NOT_HELPFUL_TAGS),
}
# The reference counts a rating towards its rater's reputation only if it came within 48 h of the
# note (before the public data download could reveal outcomes). Here raters never see other
# ratings or scores before rating, and "made before the note's latest status" still applies, so
# the window is dropped: with it, ratings of notes older than two days would never count.
APP_SCORING_CONFIG = scoring.ScoringConfig(valid_rating_window_ms=None)
# pg_try_advisory_xact_lock key: one rescoring at a time, whoever triggers it.
SCORING_LOCK_KEY = 0x5C0_12E5


class RatingError(Exception):
    """A rating that the rules do not allow (shown to the rater as is)."""


@transaction.atomic
def rating_submit(*, rater: Participant, note: Note, level: str, tags: Iterable[str] = ()) -> tuple[Rating, bool]:
    """Create or change this rater's one rating of the note. Returns (rating, created)."""
    if note.author_id is not None and note.author_id == rater.pk:
        raise RatingError("You cannot rate your own note.")
    if level not in TAGS_FOR_LEVEL:
        raise RatingError(f"Unknown rating level {level!r}.")
    tag_list = sorted(set(tags))
    invalid = set(tag_list) - TAGS_FOR_LEVEL[level]
    if invalid:
        raise RatingError(f"Tags not allowed for {level}: {', '.join(sorted(invalid))}.")
    rating, created = Rating.objects.update_or_create(
        note=note, rater=rater, defaults={"level": level, "tags": tag_list}
    )
    if created:
        Note.objects.filter(pk=note.pk).update(num_ratings=F("num_ratings") + 1)
    return rating, created


def notes_rescore_request() -> None:
    """Queue a rescoring on the cpu queue once the current transaction commits."""
    from notes.tasks import score_notes

    transaction.on_commit(score_notes.delay)


def _update_rows(model: type[Model], fields: list[str], rows: list[tuple[object, ...]]) -> None:
    """UPDATE ... WHERE id = %s for many rows in one pipelined executemany (bulk_update's CASE
    expressions take ~1 ms per row at this size)."""
    if not rows:
        return
    quote = connection.ops.quote_name
    sets = ", ".join(f"{quote(model._meta.get_field(f).column)} = %s" for f in fields)
    # Table and column names come from the model, never from input.
    sql = f"UPDATE {quote(model._meta.db_table)} SET {sets} WHERE id = %s"  # noqa: S608
    with connection.cursor() as cursor:
        cursor.executemany(sql, rows)


def _changed(old: float | None, new: float | None) -> bool:
    if old is None or new is None:
        return (old is None) != (new is None)
    return abs(old - new) > 1e-9


@transaction.atomic
def notes_rescore(*, now: datetime | None = None, config: scoring.ScoringConfig | None = None) -> dict[str, Any]:
    """Score every note from the ratings in the database (notes/scoring.py) and store the results.

    Writes intercept/factor/status/num_ratings to changed notes, rater parameters to participants,
    and a NoteStatusChange row for every status change. Runs once at a time (advisory lock).
    """
    cfg = config or APP_SCORING_CONFIG
    now = now or timezone.now()
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_xact_lock(%s)", [SCORING_LOCK_KEY])
        if not cursor.fetchone()[0]:
            return {"skipped": "another rescoring is running"}
    inputs = selectors.scoring_inputs(now=now, lock_after_days=cfg.lock_after_days)
    result = scoring.score(
        inputs.ratings, inputs.meta, len(inputs.participant_pks), cfg, now_ms=int(now.timestamp() * 1000)
    )
    names = scoring.STATUS_NAMES
    note_rows: list[tuple[object, ...]] = []
    changes: list[NoteStatusChange] = []
    for i, pk in enumerate(inputs.note_pks.tolist()):
        intercept = None if np.isnan(result.note_intercept[i]) else float(result.note_intercept[i])
        factor = None if np.isnan(result.note_factor[i]) else float(result.note_factor[i])
        status, count = names[int(result.status[i])], int(result.num_ratings[i])
        old_status = inputs.previous_status[i]
        if (
            status == old_status
            and count == inputs.previous_num_ratings[i]
            and not _changed(inputs.previous_intercept[i], intercept)
            and not _changed(inputs.previous_factor[i], factor)
        ):
            continue
        note_rows.append((status, intercept, factor, count, now, pk))
        if status != old_status:
            changes.append(
                NoteStatusChange(
                    note_id=pk, previous_status=old_status, status=status, intercept=intercept, factor=factor,
                    changed_at=now,
                )
            )  # fmt: skip
    _update_rows(Note, ["status", "intercept", "factor", "num_ratings", "scored_at"], note_rows)
    NoteStatusChange.objects.bulk_create(changes, batch_size=2000)
    rater_rows: list[tuple[object, ...]] = []
    for u, pk in enumerate(inputs.participant_pks.tolist()):
        ri = None if np.isnan(result.rater_intercept[u]) else float(result.rater_intercept[u])
        rf = None if np.isnan(result.rater_factor[u]) else float(result.rater_factor[u])
        old_i, old_f = inputs.previous_rater[pk]
        if _changed(old_i, ri) or _changed(old_f, rf):
            rater_rows.append((ri, rf, now, pk))
    _update_rows(Participant, ["rater_intercept", "rater_factor", "scored_at"], rater_rows)
    counts = np.bincount(result.status, minlength=3)
    return {
        "notes": len(inputs.note_pks),
        "ratings": len(inputs.ratings.value),
        "notes_updated": len(note_rows),
        "status_changes": len(changes),
        "raters_updated": len(rater_rows),
        "helpful": int(counts[scoring.CURRENTLY_RATED_HELPFUL]),
        "not_helpful": int(counts[scoring.CURRENTLY_RATED_NOT_HELPFUL]),
        "needs_more_ratings": int(counts[scoring.NEEDS_MORE_RATINGS]),
    }
