"""Queue judge runs (Celery, queue "llm") for existing notes, e.g. imported or demo notes."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from django.core.management.base import BaseCommand, CommandParser
from django.db import transaction

from judging.models import JudgeRun
from judging.services import judge_run_request

if TYPE_CHECKING:
    from notes.models import Note  # type hints only: notes sits above judging


class Command(BaseCommand):
    help = "Queue the relevance -> correctness -> helpfulness judges for notes (once per note version)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("note_ids", nargs="*", type=int, help="note ids (default: every note)")
        parser.add_argument("--status", help="only notes with this status, e.g. CURRENTLY_RATED_HELPFUL")

    def handle(self, *args: Any, **opts: Any) -> None:
        note_model = cast("type[Note]", JudgeRun._meta.get_field("note").related_model)  # notes sits above judging
        notes = note_model._default_manager.select_related("post").order_by("pk")
        if opts["note_ids"]:
            notes = notes.filter(pk__in=opts["note_ids"])
        if opts["status"]:
            notes = notes.filter(status=opts["status"])
        # Imported posts without text: their placeholder is not the post, so never judged.
        skipped = notes.filter(post__text_available=False).count()
        with transaction.atomic():
            runs = [judge_run_request(note=note) for note in notes.filter(post__text_available=True)]
        queued = sum(1 for r in runs if r.state == "queued")
        self.stdout.write(
            f"{len(runs)} notes: {queued} runs queued or waiting, {len(runs) - queued} already judged/running"
            + (f"; {skipped} skipped (imported post without text)" if skipped else "")
        )
