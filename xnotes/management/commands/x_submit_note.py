"""`manage.py x_submit_note NOTE_ID [--classification C] [--tag T ...] --json`"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from notes.models import Note
from xnotes import budget, rules, selectors
from xnotes.budget import RateLimited
from xnotes.client import XApiError
from xnotes.management.commands._common import client_or_error, emit, x_answers_checked
from xnotes.models import XProposal
from xnotes.services import XFlowError, proposals


class Command(BaseCommand):
    help = (
        "Propose a submitted note to X (once per post: a second call reports the first proposal). Prints one JSON "
        "object: x_note_id, created, test_mode, state."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("note_id", type=int)
        parser.add_argument("--classification", default=None, choices=sorted(rules.CLASSIFICATIONS),
                            help="default: the pre-fill of the note's propose page")  # fmt: skip
        parser.add_argument("--tag", action="append", default=None, choices=sorted(rules.MISLEADING_TAGS),
                            help="misleading tag (repeatable; default: the tags the propose page pre-fills from the "
                                 "note's ratings and judges)")  # fmt: skip
        parser.add_argument("--json", action="store_true", help="print the JSON object (the only output format)")

    def handle(self, *args: Any, **options: Any) -> None:
        note = Note.objects.select_related("post").filter(pk=options["note_id"]).first()
        if note is None:
            raise CommandError(f"no note with id {options['note_id']}")
        client = client_or_error()
        suggestion = selectors.suggested_choice(note)
        classification = options["classification"] or suggestion.classification
        tags = options["tag"] or (suggestion.tags if classification == rules.MISLEADING else [])
        try:
            proposal, created = proposals.proposal_request(
                note=note, user=None, classification=classification, tags=tags, enqueue=False
            )
        except XFlowError as exc:
            hint = ""
            if classification == rules.MISLEADING and not tags:
                hint = " Neither the note's ratings nor its judges suggest a reason: pass --tag."
            raise CommandError(f"note {note.pk} cannot be proposed to X: {exc}{hint}") from None
        if proposal.state in (XProposal.State.QUEUED, XProposal.State.UNCERTAIN):
            wait = budget.ResetWaiter()
            while True:
                try:
                    proposal = proposals.proposal_send(proposal_id=proposal.pk, client=client)
                    break
                except RateLimited as limited:
                    with x_answers_checked():
                        wait(limited)
                except XApiError as exc:
                    raise CommandError(f"X did not answer: {exc}; run the command again (it checks X first)") from None
        if proposal.state == XProposal.State.FAILED:
            raise CommandError(f"X refused the note: {proposal.error}")
        emit(self, {"x_note_id": proposal.x_note_id, "created": created and proposal.state == XProposal.State.SENT,
                    "test_mode": proposal.test_mode, "state": proposal.state})  # fmt: skip
