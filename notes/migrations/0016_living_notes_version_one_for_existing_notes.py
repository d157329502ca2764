"""Data migration (issue 36): every note written in the app gets its text as version 1.

Imported notes (external_id set) are left without a version row: their text is version 1
implicitly, and the row is created when first needed (notes.living.services.current_version)."""

from __future__ import annotations

from typing import Any

from django.db import migrations


def forwards(apps: Any, schema_editor: Any) -> None:
    note_model = apps.get_model("notes", "Note")
    version_model = apps.get_model("notes", "NoteVersion")
    rating_model = apps.get_model("notes", "Rating")
    notes = note_model.objects.filter(external_id__isnull=True, current_version__isnull=True)
    for note in notes.select_related("author__user").iterator(chunk_size=500):
        if note.origin == "supernote":
            producer = "supernote"
        elif note.author is not None and note.author.user is not None:
            producer = f"user:{note.author.user.username}"
        else:
            producer = "author"
        version = version_model.objects.create(
            note=note, number=1, text=note.text, evidence_urls=note.evidence_urls, producer=producer,
            reason="the text as submitted", created_at=note.created_at,
        )  # fmt: skip
        note_model.objects.filter(pk=note.pk).update(current_version=version)
        rating_model.objects.filter(note=note, version__isnull=True).update(version=version)


class Migration(migrations.Migration):
    dependencies = [("notes", "0015_living_notes_requests_versions_suggestions")]

    operations = [migrations.RunPython(forwards, migrations.RunPython.noop)]
