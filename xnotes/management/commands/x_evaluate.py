"""`manage.py x_evaluate --post-id ID --text TEXT --json`"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from crowdnotes_site.lib import xids
from notes.models import Post
from xnotes.management.commands._common import client_or_error, emit
from xnotes.models import XPost
from xnotes.services import evaluator


class Command(BaseCommand):
    help = "Ask X's evaluator (ClaimOpinion) about a note text on a post; prints one JSON object: claim_opinion_score."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--post-id", required=True, help="the post's X id (or the CrowdNotes post id)")
        parser.add_argument("--text", required=True, help="the note text")
        parser.add_argument("--json", action="store_true", help="print the JSON object (the only output format)")

    def handle(self, *args: Any, **options: Any) -> None:
        post_id, text = str(options["post_id"]).strip(), (options["text"] or "").strip()
        if not text:
            raise CommandError("--text must not be empty")
        if not xids.X_ID.match(post_id):
            raise CommandError(f"--post-id must be a numeric X post id, got {post_id!r}")
        client = client_or_error()
        xpost = XPost.objects.select_related("post").filter(x_id=post_id).first()
        post = xpost.post if xpost else Post.objects.filter(external_id=post_id).first()
        if post is None:
            # A post CrowdNotes does not know: ask X directly, nothing cached.
            answer = client.evaluate_note(post_id=post_id, note_text=text)
            score = (answer.get("data") or {}).get("claim_opinion_score")
            emit(self, {"claim_opinion_score": score, "cached": False})
            return
        evaluation = evaluator.evaluate(post=post, text=text, client=client)
        if evaluation.claim_opinion_score is None:
            raise CommandError(evaluation.error or "X gave no score")
        emit(self, {"claim_opinion_score": evaluation.claim_opinion_score, "cached": client.requests == 0})
