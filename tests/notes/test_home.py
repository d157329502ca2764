"""The home page: newest posts first, in pages, each with its note count."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from notes.models import TEXT_WITH, Note, Post, Topic, filter_by_text
from notes.selectors import HOME_PAGE_SIZE

pytestmark = pytest.mark.django_db


def _posts(n: int, topic: str = "") -> list[Post]:
    now = timezone.now()
    return [
        Post.objects.create(
            text=f"Claim {i:03d}", text_hash=f"h{topic}{i}", topic=topic, created_at=now - timedelta(minutes=i)
        )
        for i in range(n)
    ]


def test_it_pages_the_posts_newest_first_with_links_both_ways(anon_client: Any) -> None:
    _posts(HOME_PAGE_SIZE + 5)
    first = anon_client.get("/")
    shown = [p.text for p in first.context["home"].posts]
    assert shown == [f"Claim {i:03d}" for i in range(HOME_PAGE_SIZE)]
    html = first.content.decode()
    assert 'href="?page=2"' in html and "Older posts" in html and "Newer posts" not in html
    second = anon_client.get("/", {"page": "2"})
    assert [p.text for p in second.context["home"].posts] == [
        f"Claim {i:03d}" for i in range(HOME_PAGE_SIZE, HOME_PAGE_SIZE + 5)
    ]
    html = second.content.decode()
    assert 'href="?page=1"' in html and "Older posts" not in html


def test_a_single_page_shows_no_pager(anon_client: Any) -> None:
    _posts(3)
    assert "Older posts" not in anon_client.get("/").content.decode()


@pytest.mark.parametrize("page", ["0", "-1", "abc", "99999999999"])
def test_a_page_number_out_of_range_shows_the_first_page(anon_client: Any, page: str) -> None:
    _posts(2)
    response = anon_client.get("/", {"page": page})
    assert response.status_code == 200 and response.context["home"].page == 1
    assert len(response.context["home"].posts) == 2


def test_a_page_past_the_end_says_so_and_links_to_the_newest(anon_client: Any) -> None:
    _posts(2)
    html = anon_client.get("/", {"page": "3"}).content.decode()
    assert "No posts on this page." in html and "Newest posts" in html


def test_the_pager_keeps_the_topic(anon_client: Any) -> None:
    _posts(HOME_PAGE_SIZE + 1, topic=Topic.WELLNESS)
    _posts(3, topic=Topic.PROFESSIONALS)
    html = anon_client.get("/", {"topic": Topic.WELLNESS}).content.decode()
    assert f"?page=2&amp;topic={Topic.WELLNESS}" in html


def test_each_post_shows_how_many_notes_it_has(anon_client: Any) -> None:
    one, two = _posts(2)
    for i in range(3):
        Note.objects.create(post=two, text=f"Context {i}")
    Note.objects.create(post=one, text="Context")
    html = anon_client.get("/").content.decode()
    assert ">1 note<" in html and ">3 notes<" in html


def test_home_reads_only_what_it_shows_of_each_note(anon_client: Any) -> None:
    """The home page (20 posts, all their notes prefetched) reads neither the scorer's stored
    explanation and rules of every note, nor each note's author."""
    from notes.selectors import posts_for_home

    (post,) = _posts(1)
    Note.objects.create(post=post, text="Context", score_explanation="x" * 5000, score_rules=["a"] * 50)
    note = posts_for_home().posts[0].notes.all()[0]
    assert {"score_explanation", "score_rules", "author_id", "draft_text"} <= note.get_deferred_fields()
    assert "Context" in anon_client.get("/").content.decode()


def test_the_default_list_reads_the_newest_posts_with_text_through_its_partial_index() -> None:
    """With the whole public download imported, 2 M posts without text are newer than the few with
    text: the plain created_at index would walk all of them before the first row it may show."""
    from tests.support.plans import index_plan

    plan = index_plan(filter_by_text(Post.objects.all(), TEXT_WITH).order_by("-created_at", "-pk")[:21])
    assert "post_with_text_newest" in plan and "Sort" not in plan, plan
