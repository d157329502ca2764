from __future__ import annotations

from celery import shared_task


@shared_task(acks_late=True)
def snippet_process(snippet_id: int) -> None:
    """Fetch, extract, chunk, embed and match one evidence source."""
    from evidence import services

    services.snippet_process(snippet_id=snippet_id)
