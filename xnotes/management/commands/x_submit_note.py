"""`manage.py x_submit_note NOTE_ID [--classification C] [--tag T ...] --json`"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from notes.models import Note
from xnotes import rules, services
from xnotes.budget import RateLimited
from xnotes.client import XApiError
from xnotes.management.commands._common import client_or_error, emit
from xnotes.models import XProposal


class Command(BaseCommand):
    help = (
        "Propose a submitted note to X (once per post: a second call reports the first proposal). Prints one JSON "
        "object: x_note_id, created, test_mode, state."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("note_id", type=int)
        parser.add_argument("--classification", default=rules.MISLEADING, choices=sorted(rules.CLASSIFICATIONS))
        parser.add_argument("--tag", action="append", default=None, choices=sorted(rules.MISLEADING_TAGS),
                            help="misleading tag (repeatable; default missing_important_context when misleading)")  # fmt: skip
        parser.add_argument("--json", action="store_true", help="print the JSON object (the only output format)")

    def handle(self, *args: Any, **options: Any) -> None:
        note = Note.objects.select_related("post").filter(pk=options["note_id"]).first()
        if note is None:
            raise CommandError(f"no note with id {options['note_id']}")
        client = client_or_error()
        classification = options["classification"]
        tags = options["tag"] or (["missing_important_context"] if classification == rules.MISLEADING else [])
        try:
            proposal, created = services.proposal_request(
                note=note, user=None, classification=classification, tags=tags, enqueue=False
            )
        except services.XFlowError as exc:
            raise CommandError(f"note {note.pk} cannot be proposed to X: {exc}") from None
        if proposal.state in (XProposal.State.QUEUED, XProposal.State.UNCERTAIN):
            while True:
                try:
                    proposal = services.proposal_send(proposal_id=proposal.pk, client=client)
                    break
                except RateLimited as limited:
                    services.sleep_until_reset(limited)
                except XApiError as exc:
                    raise CommandError(f"X did not answer: {exc}; run the command again (it checks X first)") from None
        if proposal.state == XProposal.State.FAILED:
            raise CommandError(f"X refused the note: {proposal.error}")
        emit(self, {"x_note_id": proposal.x_note_id, "created": created and proposal.state == XProposal.State.SENT,
                    "test_mode": proposal.test_mode, "state": proposal.state})  # fmt: skip
