"""The transactional outbox: with the broker down, a contribution answers with
its draft page (never a 500), its work waits in the outbox, a retry does not double it, and the
dispatcher delivers it to the real broker once Redis is reachable again."""

from __future__ import annotations

import json
from typing import Any

import pytest
import redis
from django.conf import settings

from crowdnotes_site import queue
from crowdnotes_site.models import OutboxMessage
from evidence.models import Snippet
from notes.models import DraftJob, Post

pytestmark = pytest.mark.django_db(transaction=True)

DATA = {"text": "Cinnamon cures diabetes.", "urls": "https://www.cdc.gov/diabetes/"}


def _broker_messages(queue_name: str) -> list[dict[str, Any]]:
    raw = redis.Redis.from_url(settings.CELERY_BROKER_URL).lrange(queue_name, 0, -1)
    return [json.loads(item)["headers"] for item in raw]


def test_a_contribution_with_the_broker_down_is_kept_and_delivered_when_it_is_back(
    contributor_client: Any, broker_down: Any, settings: Any
) -> None:
    redis.Redis.from_url(settings.CELERY_BROKER_URL).delete("cpu")
    settings.OUTBOX_GRACE_S = 0
    response = contributor_client.post("/contribute/", DATA)
    assert response.status_code == 302  # before the outbox: a 500 after the rows were saved
    job = DraftJob.objects.get()
    snippet = Snippet.objects.get()
    message = OutboxMessage.objects.get()
    assert (message.task_name, message.args, message.delivered_at) == (
        "evidence.tasks.snippet_process",
        [snippet.pk],
        None,
    )
    assert message.attempts == 1 and message.last_error  # the on-commit attempt failed and said why

    page = contributor_client.get(response["Location"]).content.decode()
    assert "Queued: this work will start when the worker queue is reachable" in page

    # The contributor retries: same post, same draft, same source, still one pending message.
    assert contributor_client.post("/contribute/", DATA).status_code == 302
    assert (Post.objects.count(), DraftJob.objects.count(), Snippet.objects.count()) == (1, 1, 1)
    assert OutboxMessage.objects.count() == 1

    # The dispatcher cannot deliver while the broker is down, and loses nothing.
    assert queue.outbox_dispatch() == {"sent": 0, "pending": 1}

    broker_down.restore()
    assert queue.outbox_dispatch() == {"sent": 1, "pending": 0}
    assert queue.outbox_dispatch() == {"sent": 0, "pending": 0}  # delivered once, not again
    delivered = _broker_messages("cpu")
    assert [(h["task"], h["argsrepr"]) for h in delivered] == [("evidence.tasks.snippet_process", f"[{snippet.pk}]")]
    page = contributor_client.get(f"/drafts/{job.pk}/").content.decode()
    assert "worker queue is reachable" not in page


def test_a_reachable_broker_gets_the_message_at_commit(contributor_client: Any) -> None:
    redis.Redis.from_url(settings.CELERY_BROKER_URL).delete("cpu")
    contributor_client.post("/contribute/", DATA)
    message = OutboxMessage.objects.get()
    assert message.delivered_at is not None and message.attempts == 1
    assert [h["task"] for h in _broker_messages("cpu")] == ["evidence.tasks.snippet_process"]


def test_a_rolled_back_transaction_leaves_nothing_in_the_outbox() -> None:
    from django.db import transaction

    seen: list[int] = []

    def enqueue_then_fail() -> None:
        with transaction.atomic():
            queue.enqueue_on_commit("notes.tasks.draft_generate", 123)
            seen.append(OutboxMessage.objects.count())
            raise RuntimeError("rolled back")

    with pytest.raises(RuntimeError):
        enqueue_then_fail()
    assert seen == [1]
    assert OutboxMessage.objects.count() == 0


def test_a_preflight_with_the_broker_down_says_it_waits_for_the_queue(
    contributor_client: Any, broker_down: Any
) -> None:
    data = {"post_text": "Garlic cures flu", "note_text": "No trial shows that.", "urls": "", "snippets": "Weather."}
    response = contributor_client.post("/judging/preflight/", data)
    assert response.status_code == 302
    page = contributor_client.get(response["Location"]).content.decode()
    assert "Queued: this check will start when the worker queue is reachable" in page
    broker_down.restore()
    assert queue.outbox_dispatch()["sent"] == 0  # younger than the grace period: left to its own attempt
