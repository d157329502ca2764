"""A note's versions: the published one, and version 1 made when a note without one is first read."""

from __future__ import annotations

from django.db import transaction

from notes.models import Note, NoteVersion, Rating


def _producer_of(note: Note) -> str:
    if note.origin == Note.Origin.SUPERNOTE:
        return "supernote"
    if note.author is not None and note.author.user is not None:
        return f"user:{note.author.user.get_username()}"
    if note.is_demo:  # written for the demo (or loaded from a CSV of public notes), by a simulated author
        return "demo"
    return "imported" if note.external_id else "author"


def current_version(note: Note) -> NoteVersion:
    """The note's published version; a note without one (imported, or written before versions)
    gets its text as version 1 now."""
    if note.current_version_id is not None:
        return NoteVersion.objects.get(pk=note.current_version_id)
    with transaction.atomic():
        locked = Note.objects.select_for_update(of=("self",)).select_related("author__user").get(pk=note.pk)
        if locked.current_version_id is None:
            version = NoteVersion.objects.create(
                note=locked, number=1, text=locked.text, evidence_urls=locked.evidence_urls,
                producer=_producer_of(locked), reason="the text as submitted", created_at=locked.created_at,
            )  # fmt: skip
            Note.objects.filter(pk=note.pk).update(current_version=version)
            Rating.objects.filter(note=note, version__isnull=True).update(version=version)
            locked.current_version = version
        note.current_version_id = locked.current_version_id
        return NoteVersion.objects.get(note=note, pk=locked.current_version_id or 0)
