"""Builders for X tests: posts as X returns them, notes ready to be proposed."""

from __future__ import annotations

from typing import Any

from crowdnotes_site.lib.hashing import sha256_hex
from evidence.models import EvidenceSource, Passage, Snippet
from judging.models import JudgeRun
from notes.models import Note, Post

POST_TEXT = "The MMR vaccine causes autism in children."
SNIPPET = "Large studies of over 650,000 children found no link between the MMR vaccine and autism."
NOTE = "Studies of more than 650,000 children found no link between the MMR vaccine and autism."
URL = "https://www.cdc.gov/vaccine-safety/concerns/autism.html"


def tweet(x_id: str, text: str, **extra: Any) -> dict[str, Any]:
    return {"id": x_id, "text": text, "edit_history_tweet_ids": [x_id], **extra}


def proposable_note(*, x_id: str = "1930672414444372186", text: str = NOTE, confirmed: bool = True,
                    judged: bool = True, urls: tuple[str, ...] = (URL,)) -> Note:  # fmt: skip
    post = Post.objects.create(text=POST_TEXT, text_hash=sha256_hex(POST_TEXT + x_id), external_id=x_id)
    note = Note.objects.create(post=post, text=text, evidence_urls=list(urls))
    source = EvidenceSource.objects.create(
        url=urls[0] if urls else "https://x.test/", url_hash=sha256_hex(x_id), cleaned_text=SNIPPET
    )
    passage = Passage.objects.create(
        source=source, embedding_model="m", chunk_index=0, text=SNIPPET, char_start=0, char_end=len(SNIPPET)
    )
    Snippet.objects.create(
        post=post, note=note, url=source.url, source=source, passage=passage, state=Snippet.State.READY,
        confirmation=Snippet.Confirmation.CONFIRMED if confirmed else Snippet.Confirmation.PENDING,
        confirmed_text_hash=sha256_hex(SNIPPET) if confirmed else "",
    )  # fmt: skip
    if judged:
        JudgeRun.objects.create(note=note, content_hash="c", state=JudgeRun.State.DONE, helpful=True)
    return note
