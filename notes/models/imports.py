"""What the import of the public Community Notes data keeps: status histories, and checkpoints of a resumable import."""

from __future__ import annotations

from django.db import models


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
