from __future__ import annotations

import io
from typing import Any

import pytest
from django.core.management import call_command

from crowdnotes_site.lib.llm.steps.topics import TOPIC_LABELS
from notes.analytics import topics
from notes.models import Post, Topic
from tests.support.llm_server import Reply, ScriptedLLM

pytestmark = pytest.mark.django_db


def test_every_step_label_maps_onto_a_post_topic_choice() -> None:
    mapped = [topics.topic_value(label) for label in TOPIC_LABELS]
    assert mapped == [
        Topic.DISEASES, Topic.TREATMENTS, Topic.GUIDANCE, Topic.WELLNESS,
        Topic.PROFESSIONALS, Topic.CONCEPTS, Topic.CONSPIRACIES, Topic.NOT_HEALTH,
    ]  # fmt: skip
    assert topics.topic_value(None) is None and topics.topic_value("sports") is None


def test_the_offline_baseline_stores_labelled_topics(settings: Any) -> None:
    settings.LLM_BASE_URL = ""
    booster = Post.objects.create(text="New booster vaccine dose approved", text_hash="a")
    football = Post.objects.create(text="Great football match tonight", text_hash="b")
    imported = Post.objects.create(text="Post 1 (imported ...)", text_hash="c", text_available=False)
    out = io.StringIO()
    call_command("classify_topics", stdout=out)
    assert "classified: 2" in out.getvalue() and "no text: 1" in out.getvalue()
    booster.refresh_from_db()
    football.refresh_from_db()
    imported.refresh_from_db()
    assert (booster.topic, booster.topic_method) == (Topic.TREATMENTS, "baseline:keywords-v1")
    assert football.topic == Topic.NOT_HEALTH
    assert imported.topic == ""


def test_the_llm_label_is_stored_with_its_model(llm_server: ScriptedLLM) -> None:
    llm_server.script(Reply("7"))
    post = Post.objects.create(text="The plandemic was planned", text_hash="p")
    assert topics.post_classify_topic(post=post) == Topic.CONSPIRACIES
    post.refresh_from_db()
    assert post.topic == Topic.CONSPIRACIES and post.topic_method == "llm:scripted-model"


def test_the_home_page_filters_posts_by_topic(anon_client: Any) -> None:
    Post.objects.create(text="Vitamin D cures everything", text_hash="w", topic=Topic.WELLNESS)
    Post.objects.create(text="Nurses strike at the hospital", text_hash="h", topic=Topic.PROFESSIONALS)
    html = anon_client.get("/", {"topic": Topic.WELLNESS}).content.decode()
    assert "Vitamin D cures everything" in html and "Nurses strike" not in html
    assert "Nurses strike" in anon_client.get("/").content.decode()


def test_the_flaggers_topic_call_counts_against_their_llm_budget(
    llm_server: ScriptedLLM, settings: Any, contributor: Any
) -> None:
    from crowdnotes_site.models import LlmUsage
    from notes.tasks import topic_classify_post

    settings.LLM_DAILY_CALLS_PER_USER = 1
    llm_server.respond_with(lambda messages: "7")
    first = Post.objects.create(text="The plandemic was planned", text_hash="p1", flagged_by=contributor)
    assert topic_classify_post.apply(args=[first.pk]).get() == Topic.CONSPIRACIES
    assert LlmUsage.objects.get(user=contributor).calls == 1
    assert len(llm_server.requests) == 1
    # Past the budget the call is refused before anything is sent: the keyword baseline labels it.
    second = Post.objects.create(text="New booster vaccine dose approved", text_hash="p2", flagged_by=contributor)
    assert topic_classify_post.apply(args=[second.pk]).get() == Topic.TREATMENTS
    second.refresh_from_db()
    assert second.topic_method == "baseline:keywords-v1"
    assert len(llm_server.requests) == 1 and LlmUsage.objects.get(user=contributor).calls == 1
    # A post nobody flagged (an import) charges nobody.
    imported = Post.objects.create(text="The plandemic was planned again", text_hash="p3")
    assert topic_classify_post.apply(args=[imported.pk]).get() == Topic.CONSPIRACIES
    assert LlmUsage.objects.count() == 1 and LlmUsage.objects.get(user=contributor).calls == 1
