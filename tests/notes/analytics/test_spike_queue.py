"""Spikes in flagged health posts feed the contributors' queue ("Posts in a spike")."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from notes.analytics.selectors import spike_queue
from notes.models import Note, NoteStatus, Post, Topic

pytestmark = pytest.mark.django_db

START = dt.datetime(2026, 3, 1, 12, tzinfo=dt.UTC)


def _post(day: int, text: str, topic: str = Topic.TREATMENTS) -> Post:
    return Post.objects.create(text=text, text_hash=text, topic=topic, posted_at=START + dt.timedelta(days=day))


def _flat(days: int = 30) -> None:
    for d in range(days):
        _post(d, f"Routine claim {d}")
        _post(d, f"Other claim {d}", topic=Topic.WELLNESS)


def test_posts_of_a_planted_spike_are_queued_and_helpful_or_non_health_ones_are_not() -> None:
    _flat()
    spike_posts = [_post(20, f"Raw milk cures measles, post {i}") for i in range(9)]
    covered = spike_posts[0]
    Note.objects.create(post=covered, text="Context.", status=NoteStatus.HELPFUL)
    Note.objects.create(post=spike_posts[1], text="Draft context.", status=NoteStatus.NEEDS_MORE_RATINGS)
    for i in range(20):  # many non-health posts that day: neither counted nor listed
        _post(20, f"Celebrity gossip {i}", topic=Topic.NOT_HEALTH)
    Post.objects.create(text="Unclassified", text_hash="u", posted_at=START + dt.timedelta(days=20))

    queue = spike_queue()
    assert [sp.day for sp, _ in queue.groups] == [(START + dt.timedelta(days=20)).date()]
    spike, posts = queue.groups[0]
    assert spike.count == 2 + 9  # two routine health posts that day + the nine planted
    listed = {p.pk for p in posts}
    assert covered.pk not in listed  # already has a Helpful note
    assert {p.pk for p in spike_posts[1:]} <= listed
    assert not any(p.topic == Topic.NOT_HEALTH or p.topic == "" for p in posts)
    # The day before and after belong to the spike's window; days further away do not.
    window = {p.posted_at.date() for p in posts if p.posted_at is not None}
    assert window == {(START + dt.timedelta(days=d)).date() for d in (19, 20, 21)}
    assert posts[0].n_notes == 0 and posts[-1].n_notes == 1  # type: ignore[attr-defined]  # annotated; fewest first
    assert (queue.n_health_posts, queue.n_unclassified) == (60 + 9, 1)


def test_a_flat_noisy_series_queues_nothing() -> None:
    for d in range(40):
        for i in range(3 + (d * 7) % 3):  # 3..5 posts a day, no outlier
            _post(d, f"Claim {d}-{i}")
    assert spike_queue().groups == []


def test_the_page_is_for_contributors_and_its_query_count_does_not_grow(
    contributor_client: Any, rater_client: Any
) -> None:
    _flat()
    for i in range(6):
        _post(20, f"Raw milk cures measles, post {i}")
    assert rater_client.get("/posts/spiking/").status_code == 403
    with CaptureQueriesContext(connection) as small:
        html = contributor_client.get("/posts/spiking/").content.decode()
    assert "Raw milk cures measles, post 5" in html and "Write a note" in html
    for i in range(6, 30):
        _post(20, f"Raw milk cures measles, post {i}")
    with CaptureQueriesContext(connection) as large:
        html = contributor_client.get("/posts/spiking/").content.decode()
    assert "Raw milk cures measles, post 29" in html
    assert len(small) == len(large)
    assert 'href="/posts/spiking/"' in contributor_client.get("/").content.decode()
