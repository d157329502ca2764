"""Writes for the analytics: the imported public status history the delays page reads."""

from __future__ import annotations

from datetime import UTC, datetime
from itertools import islice
from pathlib import Path

from django.db import transaction

from crowdnotes_site.lib.communitynotes.data import tsv as cio
from crowdnotes_site.lib.communitynotes.research.delays import note_time_ms
from notes.models import ImportedNoteHistory, NoteStatus

BATCH = 5000
VERDICTS = {NoteStatus.HELPFUL.value, NoteStatus.NOT_HELPFUL.value}


def _dt(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=UTC)


def imported_history(h: cio.StatusHistoryRow, source_file: str) -> dict[str, object]:
    """The ImportedNoteHistory fields of one status-history row (besides its id)."""
    verdict = h.first_non_nmr_status in VERDICTS
    return {
        "note_external_id": str(h.note_id),
        "created_at": _dt(note_time_ms(h.note_id, h.created_at_ms)),
        "first_verdict_at": _dt(h.first_non_nmr_ms) if h.first_non_nmr_ms and verdict else None,
        "first_verdict_status": h.first_non_nmr_status if verdict else "",
        "current_status": h.current_status,
        "source_file": source_file,
    }


def status_history_store(path: str | Path) -> tuple[int, dict[str, int]]:
    """Store every row of a noteStatusHistory file (file or folder) as ImportedNoteHistory,
    replacing earlier rows of the same notes (idempotent). Returns (rows stored, skipped by reason)."""
    read: cio.ReadReport = cio.ReadReport()
    rows = read.rows(cio.read_status_history(path))
    stored = 0
    while batch := list(islice(rows, BATCH)):
        objs = [ImportedNoteHistory(**imported_history(h, Path(path).name)) for h in batch]
        with transaction.atomic():
            ImportedNoteHistory.objects.bulk_create(
                objs,
                update_conflicts=True,
                unique_fields=["note_external_id"],
                update_fields=[
                    "created_at",
                    "first_verdict_at",
                    "first_verdict_status",
                    "current_status",
                    "source_file",
                ],
            )
        stored += len(objs)
    return stored, dict(read.skipped)
