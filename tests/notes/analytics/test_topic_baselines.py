from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from crowdnotes_site.lib.llm.steps import topics as step
from crowdnotes_site.models import OutboxMessage
from notes import services
from notes.analytics.topics import topic_value
from notes.models import Post, Topic
from tests.conftest import wait_for
from tests.support.llm_server import Reply, ScriptedLLM

LABELLED = Path(__file__).resolve().parents[2] / "data" / "topics_labelled.jsonl"


def test_the_labelled_set_uses_only_post_topic_values() -> None:
    rows = [json.loads(line) for line in LABELLED.read_text().splitlines()]
    assert 40 <= len(rows) <= 60
    assert {r["label"] for r in rows} <= set(Topic.values)
    assert all(r["text"].strip() and "http" not in r["text"] for r in rows)


def test_the_embedding_baseline_picks_the_nearest_description() -> None:
    from evidence.embedding import encoder

    embed = encoder()
    vaccine = step.topic_label_embedding(text="The mRNA vaccine booster dose causes side effects", embed=embed)
    football = step.topic_label_embedding(text="The football team won the cup final last night", embed=embed)
    assert topic_value(vaccine.value) == Topic.TREATMENTS
    assert topic_value(football.value) == Topic.NOT_HEALTH
    assert vaccine.producer.label == f"baseline:{step.EMBEDDING_NAME}"
    # A threshold above every cosine sends any text to "not health".
    assert step.topic_label_embedding(text="Vaccine side effects", embed=embed, threshold=1.01).value == "not health"


@pytest.mark.django_db
def test_a_new_post_with_text_queues_its_topic_and_a_placeholder_does_not(settings: Any) -> None:
    settings.TOPICS_CLASSIFY_NEW_POSTS = True
    post = services.post_create(text="Vitamin D supplements cure everything")
    services.post_create(text="Post 9 (imported, text not available)", text_available=False)
    queued = OutboxMessage.objects.filter(task_name="notes.tasks.topic_classify_post")
    assert [m.args for m in queued] == [[post.pk]]


def test_a_worker_stores_the_topic_of_a_new_post(llm_server: ScriptedLLM, celery_worker: Any, settings: Any) -> None:
    settings.TOPICS_CLASSIFY_NEW_POSTS = True
    llm_server.script(Reply("4"))
    post = services.post_create(text="This detox tea melts fat overnight")
    wait_for(lambda: Post.objects.filter(pk=post.pk, topic=Topic.WELLNESS).exists())
    post.refresh_from_db()
    assert post.topic_method == "llm:scripted-model"
