"""Small builders for contributor-flow tests (evidence states set directly, no fetching)."""

from __future__ import annotations

from typing import Any

from evidence.models import EvidenceSource, Passage, Snippet
from evidence.services import url_hash
from notes.models import DraftJob, Post
from notes.services import post_create


def make_post(text: str = "Drinking bleach cures COVID-19.", **kwargs: Any) -> Post:
    return post_create(text=text, **kwargs)


def make_job(user: Any, post: Post | None = None) -> DraftJob:
    return DraftJob.objects.create(post=post or make_post(), contributor=user)


def make_ready_snippet(job: DraftJob, url: str, passage_text: str, similarity: float = 0.6) -> Snippet:
    source = EvidenceSource.objects.create(
        url=url,
        url_hash=url_hash(url),
        final_url=url,
        title=f"Page at {url}",
        cleaned_text=f"Intro text. {passage_text} Closing text.",
        content_type="text/html",
    )
    passage = Passage.objects.create(
        source=source,
        embedding_model="test",
        chunk_index=0,
        text=passage_text,
        char_start=12,
        char_end=12 + len(passage_text),
    )
    return Snippet.objects.create(
        post=job.post,
        draft_job=job,
        url=url,
        position=job.snippets.count(),
        state=Snippet.State.READY,
        source=source,
        passage=passage,
        similarity=similarity,
    )


def make_failed_snippet(job: DraftJob, url: str, code: str = "http_error") -> Snippet:
    return Snippet.objects.create(
        post=job.post, draft_job=job, url=url, state=Snippet.State.FAILED, error_code=code, error_message="HTTP 404"
    )
