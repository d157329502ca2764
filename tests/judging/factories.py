"""Small builders for judging tests (posts, notes with evidence snippets)."""

from __future__ import annotations

from typing import Any

from evidence.models import EvidenceSource, Passage, Snippet
from notes.models import Note, Post

POST = "The MMR vaccine causes autism in children."
SNIPPET = "Large studies of over 650,000 children found no link between the MMR vaccine and autism."
NOTE = "Studies of more than 650,000 children found no link between the MMR vaccine and autism."
URL = "https://example.org/mmr-autism"


def note_with_evidence(*, text: str = NOTE, snippet: str = SNIPPET, status: str | None = None, **kw: Any) -> Note:
    post = Post.objects.create(text=kw.pop("post_text", POST), text_hash="h")
    note = Note.objects.create(post=post, text=text, evidence_urls=[URL], **({"status": status} if status else {}))
    source = EvidenceSource.objects.create(url=URL, url_hash="u", cleaned_text=snippet)
    passage = Passage.objects.create(
        source=source, embedding_model="m", chunk_index=0, text=snippet, char_start=0, char_end=len(snippet)
    )
    Snippet.objects.create(post=post, note=note, url=URL, source=source, passage=passage, state=Snippet.State.READY)
    return note


def stage_of(messages: list[dict[str, Any]]) -> str:
    user = messages[-1]["content"]
    if "is at least one snippet relevant" in user:
        return "relevance"
    if "faithful to the snippets" in user:
        return "correctness"
    if "find this note helpful" in user:
        return "helpfulness"
    return "other"


def answers(**by_stage: str) -> Any:
    """A responder for the shared scripted LLM: answer per judge stage."""
    return lambda messages: by_stage[stage_of(messages)]
