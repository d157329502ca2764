from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Count, Prefetch, QuerySet

from evidence.models import Snippet
from notes.models import DraftJob, Note, Post


def posts_for_home(*, limit: int = 50) -> QuerySet[Post]:
    notes = Note.objects.select_related("author__user").order_by("-created_at")
    return (
        Post.objects.annotate(n_notes=Count("notes"))
        .prefetch_related(Prefetch("notes", queryset=notes))
        .order_by("-created_at")[:limit]
    )


@dataclass(frozen=True)
class DraftGate:
    """Whether a draft may be requested (and a note submitted), and if not, why not."""

    can_draft: bool
    reasons: list[str]
    confirmed: list[Snippet]
    pending_review: list[Snippet]
    processing: list[Snippet]


def snippet_is_confirmed(snippet: Snippet) -> bool:
    """Confirmed, and the passage is still the one the contributor read."""
    from notes.services import passage_hash

    return (
        snippet.confirmation == Snippet.Confirmation.CONFIRMED
        and snippet.passage is not None
        and snippet.confirmed_text_hash == passage_hash(snippet.passage.text)
    )


def draft_gate(*, job: DraftJob) -> DraftGate:
    snippets = list(job.snippets.select_related("passage", "source"))
    processing = [s for s in snippets if s.state not in (Snippet.State.READY, Snippet.State.FAILED)]
    ready = [s for s in snippets if s.state == Snippet.State.READY]
    confirmed = [s for s in ready if snippet_is_confirmed(s)]
    rejected = [s for s in ready if s.confirmation == Snippet.Confirmation.REJECTED]
    pending = [s for s in ready if s not in confirmed and s not in rejected]
    reasons: list[str] = []
    if processing:
        reasons.append(f"{len(processing)} source(s) are still being processed: wait for them or remove them.")
    if pending:
        reasons.append(f"Review every snippet first: {len(pending)} still need your confirm or reject.")
    if not confirmed:
        reasons.append("Confirm at least one snippet that supports the context you want to add.")
    return DraftGate(not reasons, reasons, confirmed, pending, processing)


def drafts_for_user(*, user: AbstractBaseUser) -> QuerySet[DraftJob]:
    return (
        DraftJob.objects.filter(contributor=user)
        .exclude(state=DraftJob.State.SUBMITTED)
        .select_related("post")
        .order_by("-updated_at")
    )


def notes_for_user(*, user: AbstractBaseUser) -> QuerySet[Note]:
    return Note.objects.filter(author__user=user).select_related("post").order_by("-created_at")


def snippet_in_context(*, snippet: Snippet, margin: int = 2000) -> dict[str, object]:
    """The chosen passage with the source text around it (by the passage's character offsets)."""
    source, passage = snippet.source, snippet.passage
    before = after = ""
    if source is not None and passage is not None:
        text = source.cleaned_text
        before = text[max(passage.char_start - margin, 0) : passage.char_start]
        after = text[passage.char_end : passage.char_end + margin]
    return {"snippet": snippet, "source": source, "before": before, "after": after}
