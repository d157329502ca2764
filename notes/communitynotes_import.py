"""Import public Community Notes TSVs into the database: streaming, batched, idempotent.

Posts are keyed by the tweet id (Post.external_id), participants by their public id, notes by
noteId and ratings by (note, rater), so a re-import updates rows and never duplicates them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from itertools import islice
from pathlib import Path
from typing import TypeVar

from django.db import transaction
from django.db.models import Count, OuterRef, Subquery
from django.db.models.functions import Coalesce

from notes import communitynotes_io as cio
from notes.analytics.delays import note_time_ms, snowflake_time
from notes.models import Note, NoteStatus, NoteStatusChange, Participant, Post, Rating
from notes.services import post_text_hash
from notes.text_rules import find_urls

T = TypeVar("T")
BATCH = 5000


@dataclass
class ImportReport:
    counts: Counter[str] = field(default_factory=Counter)
    skipped: Counter[str] = field(default_factory=Counter)

    def lines(self) -> list[str]:
        out = [f"{k}: {v}" for k, v in sorted(self.counts.items())]
        out += [f"skipped ({reason}): {n}" for reason, n in sorted(self.skipped.items())]
        return out


def _batches(items: Iterable[T], size: int = BATCH) -> Iterator[list[T]]:
    it = iter(items)
    while batch := list(islice(it, size)):
        yield batch


def _dt(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=UTC)


def _participants(ids: set[str]) -> dict[str, int]:
    Participant.objects.bulk_create([Participant(external_id=i) for i in ids], ignore_conflicts=True)
    return dict(Participant.objects.filter(external_id__in=ids).values_list("external_id", "pk"))


def _posts(tweet_ids: set[str]) -> dict[str, int]:
    existing = dict(Post.objects.filter(external_id__in=tweet_ids).values_list("external_id", "pk"))
    missing = tweet_ids - set(existing)
    new = []
    for tweet_id in missing:
        text = f"Post {tweet_id} (imported from the public Community Notes data; text not included)"
        new.append(
            Post(
                external_id=tweet_id, text=text, text_hash=post_text_hash(text), text_available=False,
                source_url=f"https://x.com/i/status/{tweet_id}",
                posted_at=snowflake_time(tweet_id) if tweet_id.isdigit() and int(tweet_id) > 0 else None,
            )
        )  # fmt: skip
    Post.objects.bulk_create(new)
    existing.update({p.external_id: p.pk for p in new})
    return existing


def _imported_notes(note_ids: Iterable[int]) -> dict[str | None, int]:
    """external id -> pk of the notes among these noteIds that are already imported."""
    ids = {str(i) for i in note_ids}
    return dict(Note.objects.filter(external_id__in=ids).values_list("external_id", "pk"))


def import_notes(path: str | Path, report: ImportReport) -> None:
    read: cio.ReadReport = cio.ReadReport()
    for batch in _batches(read.rows(cio.read_notes(path))):
        with transaction.atomic():
            people = _participants({n.author_id for n in batch})
            posts = _posts({n.tweet_id or "0" for n in batch})
            latest = {n.note_id: n for n in batch}  # a note listed twice keeps its last row
            notes = [
                Note(
                    external_id=str(n.note_id), post_id=posts[n.tweet_id or "0"], author_id=people[n.author_id],
                    text=n.summary, classification=n.classification,
                    created_at=_dt(note_time_ms(n.note_id, n.created_at_ms)),
                    evidence_urls=find_urls(n.summary, web_only=True)[:10],
                )
                for n in latest.values()
            ]  # fmt: skip
            Note.objects.bulk_create(
                notes,
                update_conflicts=True,
                unique_fields=["external_id"],
                update_fields=["post", "author", "text", "classification", "created_at", "evidence_urls"],
            )
        report.counts["notes upserted"] += len(notes)
    report.skipped.update({f"notes: {k}": v for k, v in read.skipped.items()})


def import_ratings(path: str | Path, report: ImportReport) -> None:
    read: cio.ReadReport = cio.ReadReport()
    touched: set[int] = set()
    for batch in _batches(read.rows(cio.read_ratings(path))):
        with transaction.atomic():
            notes = _imported_notes(r.note_id for r in batch)
            known = [r for r in batch if str(r.note_id) in notes]
            report.skipped["ratings: note not imported"] += len(batch) - len(known)
            people = _participants({r.rater_id for r in known})
            # One rating per (note, rater): a later row replaces an earlier one.
            latest = {(notes[str(r.note_id)], people[r.rater_id]): r for r in known}
            report.counts["ratings replaced by a later row"] += len(known) - len(latest)
            Rating.objects.bulk_create(
                [
                    Rating(note_id=n, rater_id=u, level=r.level, tags=sorted(r.tags), created_at=_dt(r.created_at_ms))
                    for (n, u), r in latest.items()
                ],
                update_conflicts=True,
                unique_fields=["note", "rater"],
                update_fields=["level", "tags", "created_at"],
            )
            touched.update(n for n, _ in latest)
        report.counts["ratings upserted"] += len(latest)
    report.skipped.update({f"ratings: {k}": v for k, v in read.skipped.items()})
    for batch_ids in _batches(sorted(touched)):
        counts = Rating.objects.filter(note=OuterRef("pk")).values("note").annotate(n=Count("pk")).values("n")
        Note.objects.filter(pk__in=batch_ids).update(num_ratings=Coalesce(Subquery(counts), 0))


def import_status_history(path: str | Path, report: ImportReport) -> None:
    """Current status per note, and its changes (first non-NMR, latest non-NMR, current) with times."""
    read: cio.ReadReport = cio.ReadReport()
    valid = set(NoteStatus.values)
    for batch in _batches(read.rows(cio.read_status_history(path))):
        with transaction.atomic():
            notes = _imported_notes(h.note_id for h in batch)
            known = [h for h in batch if str(h.note_id) in notes]
            report.skipped["status history: note not imported"] += len(batch) - len(known)
            existing = set(
                NoteStatusChange.objects.filter(note_id__in=notes.values()).values_list(
                    "note_id", "status", "changed_at"
                )
            )
            changes: list[NoteStatusChange] = []
            updates: list[Note] = []
            for h in known:
                pk = notes[str(h.note_id)]
                events = [
                    (h.first_non_nmr_ms, h.first_non_nmr_status),
                    (h.most_recent_non_nmr_ms, h.most_recent_non_nmr_status),
                    (h.current_status_ms, h.current_status),
                ]
                previous = NoteStatus.NEEDS_MORE_RATINGS.value
                timed = [(ms, status) for ms, status in events if ms and status in valid]
                for ms, status in sorted(timed):
                    when = _dt(ms)
                    if status != previous and (pk, status, when) not in existing:
                        existing.add((pk, status, when))
                        changes.append(
                            NoteStatusChange(note_id=pk, previous_status=previous, status=status, changed_at=when)
                        )
                    previous = status
                if h.current_status in valid:
                    updates.append(Note(pk=pk, status=h.current_status))
            NoteStatusChange.objects.bulk_create(changes)
            Note.objects.bulk_update(updates, ["status"])
        report.counts["status changes added"] += len(changes)
        report.counts["note statuses set"] += len(updates)
    report.skipped.update({f"status history: {k}": v for k, v in read.skipped.items()})
