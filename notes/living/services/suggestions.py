"""Suggestions attached to ratings: a rater suggests a change to the version they rated, with an
optional source that goes through the evidence pipeline; its kind is tagged offline, then by the LLM."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from django.conf import settings
from django.db import transaction
from django.db.models import F

from crowdnotes_site.lib.llm.client import LLMError
from crowdnotes_site.lib.llm.steps import revision as revision_step
from crowdnotes_site.llm import llm_client
from crowdnotes_site.queue import enqueue_on_commit
from evidence import snippets as evidence_snippets
from evidence.models import Snippet
from notes.living.services.errors import LivingError, StaleSuggestionError
from notes.living.services.versions import current_version
from notes.models import Note, Participant, Rating, Suggestion

if TYPE_CHECKING:
    from django.contrib.auth.models import User


logger = logging.getLogger(__name__)


def suggestion_kind(*, note_text: str, text: str) -> tuple[str, str]:
    """(kind, method) by the offline keyword rule; the LLM re-tags it in a task when configured."""
    return revision_step.kind_offline(text), revision_step.OFFLINE_RULE


def suggestions_withdraw(*, note: Note, rater: Participant, reason: str) -> int:
    return Suggestion.objects.filter(note=note, rater=rater, state=Suggestion.State.PENDING).update(
        state=Suggestion.State.WITHDRAWN, outcome_reason=reason
    )


def suggestion_source_refusal(*, user: User) -> str | None:
    """The per-user cap on evidence pages waiting for the CPU queue, counting suggestion sources
    with the user's drafts' pages; None when one more fits."""
    cap = settings.MAX_QUEUED_EVIDENCE_PER_USER
    waiting = (
        evidence_snippets.snippets_waiting_count(user=user)
        + Suggestion.objects.filter(rater__user=user, snippet__state__in=evidence_snippets.WAITING_STATES).count()
    )
    if waiting < cap:
        return None
    return (f"You already have {waiting} evidence pages waiting to be processed (at most {cap} at once): "
            "add the source once those are done.")  # fmt: skip


@transaction.atomic
def suggestion_add(*, rating: Rating, text: str, source_url: str = "") -> Suggestion:
    """Attach a suggestion to the rater's rating of the note's current version (replacing a pending
    one of theirs). A source URL goes through the evidence pipeline (SSRF-guarded fetch, passage
    match) and counts only once the suggester confirms the passage."""
    text = text.strip()
    if not text:
        raise LivingError("A suggestion needs some text.")
    if len(text) > settings.SUGGESTION_MAX_CHARS:
        raise LivingError(f"A suggestion may have at most {settings.SUGGESTION_MAX_CHARS} characters.")
    note = rating.note
    # Suggestions on one note serialize on its row, as ratings do (rating_submit), so the same
    # suggestion sent again (a double click, a retried POST) finds the first and is answered with
    # it, never a second pending one (one_pending_suggestion_per_rater_note); another replaces it.
    Note.objects.select_for_update(no_key=True).filter(pk=note.pk).first()
    version = current_version(note)
    if rating.version_id is not None and rating.version_id != version.pk:
        raise StaleSuggestionError(
            f"This note has a new text (version {version.number}) since you rated it: your suggestion was not "
            "saved. Read the text below, rate it and suggest again."
        )
    pending = Suggestion.objects.filter(note=note, rater=rating.rater, state=Suggestion.State.PENDING).first()
    if pending is not None and (pending.rating_id, pending.version_id, pending.text, pending.source_url) == (
        rating.pk, version.pk, text, source_url
    ):  # fmt: skip
        return pending
    suggestions_withdraw(note=note, rater=rating.rater, reason="replaced by a newer suggestion")
    snippet = None
    if source_url:
        owner = rating.rater.user_id
        snippet = evidence_snippets.snippet_add_for_post(post=note.post, url=source_url, owner=owner)
    kind, method = suggestion_kind(note_text=version.text, text=text)
    suggestion = Suggestion.objects.create(
        note=note, version=version, rater=rating.rater, rating=rating, text=text, source_url=source_url,
        snippet=snippet, kind=kind, kind_method=method,
    )  # fmt: skip
    if settings.LLM_BASE_URL:
        enqueue_on_commit("notes.tasks.suggestion_tag_kind", suggestion.pk, owner=rating.rater.user_id)
    return suggestion


def suggestion_tag_kind(*, suggestion_id: int) -> Suggestion | None:
    """Re-tag a suggestion's kind by the LLM (worker); the offline rule's tag stays when it fails."""
    suggestion = Suggestion.objects.select_related("version", "rater").filter(pk=suggestion_id).first()
    if suggestion is None:
        return None
    client = llm_client(owner=suggestion.rater.user_id)
    if client is None:
        return suggestion
    try:
        result = revision_step.kind_llm(client, note=suggestion.version.text, suggestion=suggestion.text)
    except LLMError as exc:
        logger.info("suggestion %s: LLM kind failed (%s); the offline rule's tag stays", suggestion_id, exc)
        return suggestion
    if result.value is not None:
        Suggestion.objects.filter(pk=suggestion_id).update(kind=result.value, kind_method=result.producer.label)
        suggestion.refresh_from_db()
    return suggestion


@transaction.atomic
def rating_withdraw(*, rater: Participant, note: Note) -> bool:
    """Delete the rater's rating of the note; its suggestion is withdrawn with it."""
    rating = Rating.objects.filter(note=note, rater=rater).first()
    if rating is None:
        return False
    rating.delete()
    counters: dict[str, object] = {"num_ratings": F("num_ratings") - 1}
    if rater.rater_factor is not None:
        side = "neg_side_ratings" if rater.rater_factor < 0 else "pos_side_ratings"
        counters[side] = F(side) - 1
    Note.objects.filter(pk=note.pk, num_ratings__gt=0).update(**counters)
    suggestions_withdraw(note=note, rater=rater, reason="the rating was withdrawn")
    return True


def suggestion_snippet_review(
    *, suggestion: Suggestion, user: User, confirmed: bool, passage_id: int | None
) -> Snippet:
    """The suggester confirms (or rejects) the passage matched in their source."""
    if suggestion.snippet is None:
        raise LivingError("This suggestion has no source.")
    try:
        return evidence_snippets.snippet_review(
            snippet=suggestion.snippet, user=user, confirmed=confirmed, passage_id=passage_id
        )
    except evidence_snippets.SnippetError as exc:
        raise LivingError(str(exc)) from exc
