"""Imported posts without text stay out of the home page, the rating queue and Stuck posts by
default; the "post text" filter brings them back, and the pages say how many are hidden."""

from __future__ import annotations

from typing import Any

import pytest
from django.urls import reverse

from notes.models import Note, Post, Topic
from notes.models import posts as post_models
from notes.services import participant_for_user, post_create
from notes.supernotes import selectors as supernote_selectors
from notes.supernotes import services as supernote_services

pytestmark = pytest.mark.django_db


def _imported(n: int, topic: str = "") -> list[Post]:
    return [
        Post.objects.create(
            text="[imported]", text_hash=f"imp{topic}{i}", external_id=str(1000 + i), text_available=False, topic=topic
        )
        for i in range(n)
    ]


def _stuck(post: Post) -> list[Note]:
    return [Note.objects.create(post=post, text=f"Context {k} on {post.pk}.") for k in range(2)]


def test_it_defines_has_text_once_on_the_post_queryset() -> None:
    readable = post_create(text="Garlic cures flu.")
    (imported,) = _imported(1)
    assert list(Post.objects.with_text()) == [readable]
    assert list(Post.objects.without_text()) == [imported]


def test_home_hides_imported_posts_without_text_and_the_filter_brings_them_back(anon_client: Any) -> None:
    readable = post_create(text="Garlic cures flu.")
    imported = _imported(3)
    default = anon_client.get("/")
    assert [p.pk for p in default.context["home"].posts] == [readable.pk]
    html = default.content.decode()
    assert "3 imported posts without text are hidden" in html and 'href="?text=all"' in html
    shown = anon_client.get("/", {"text": "all"})
    assert {p.pk for p in shown.context["home"].posts} == {readable.pk, *(p.pk for p in imported)}
    assert "are hidden" not in shown.content.decode()
    only = anon_client.get("/", {"text": "without"})
    assert {p.pk for p in only.context["home"].posts} == {p.pk for p in imported}


def test_home_counts_the_hidden_posts_of_the_chosen_topic(anon_client: Any) -> None:
    _imported(2, topic=Topic.TREATMENTS)
    _imported(1)
    html = anon_client.get("/", {"topic": Topic.TREATMENTS}).content.decode()
    assert "2 imported posts without text are hidden" in html


def test_admins_get_the_link_to_fill_the_text_from_x(admin_client: Any, anon_client: Any) -> None:
    _imported(1)
    assert "1 imported post without text is hidden" in anon_client.get("/").content.decode()
    assert "fill their text from X</a>" in admin_client.get("/").content.decode()
    assert "fill their text from X</a>" not in anon_client.get("/").content.decode()


def test_rating_queue_hides_notes_on_posts_without_text(rater_client: Any, rater: Any) -> None:
    participant_for_user(user=rater)
    readable = Note.objects.create(post=post_create(text="Garlic cures flu."), text="Readable context.")
    hidden = [Note.objects.create(post=p, text=f"Imported context {p.pk}.") for p in _imported(2)]
    default = rater_client.get(reverse("rating_queue"))
    assert [n.pk for n in default.context["notes"]] == [readable.pk]
    assert "2 notes on imported posts without text are hidden" in default.content.decode()
    everything = rater_client.get(reverse("rating_queue"), {"text": "all"})
    assert {n.pk for n in everything.context["notes"]} == {readable.pk, *(n.pk for n in hidden)}


def test_the_pages_count_hidden_rows_up_to_a_cap_and_then_say_more_than(
    rater_client: Any, rater: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    participant = participant_for_user(user=rater)
    monkeypatch.setattr(post_models, "HIDDEN_COUNT_CAP", 2)
    notes = [Note.objects.create(post=p, text=f"Imported context {p.pk}.") for p in _imported(4)]
    html = rater_client.get(reverse("rating_queue")).content.decode()
    assert "More than 2 notes on imported posts without text are hidden" in html
    # Rated or written by this rater: out of the queue, so out of the count; at the cap it is exact.
    Note.objects.filter(pk=notes[0].pk).update(author=participant)
    notes[1].ratings.create(rater=participant, level="HELPFUL")
    html = rater_client.get(reverse("rating_queue")).content.decode()
    assert "2 notes on imported posts without text are hidden" in html and "More than" not in html
    home = rater_client.get("/").content.decode()
    assert "More than 2 imported posts without text are hidden" in home


def test_stuck_posts_hide_posts_without_text_filter_by_topic_and_page(admin_client: Any) -> None:
    readable = post_create(text="Vaccines cause autism.")
    Post.objects.filter(pk=readable.pk).update(topic=Topic.TREATMENTS)
    _stuck(readable)
    imported = _imported(2)
    for post in imported:
        _stuck(post)
    default = admin_client.get(reverse("stuck_posts"))
    assert [i.post.pk for i in default.context["stuck"].items] == [readable.pk]
    assert "2 stuck imported posts without text are hidden" in default.content.decode()
    shown = admin_client.get(reverse("stuck_posts"), {"text": "all"})
    html = shown.content.decode()
    assert {i.post.pk for i in shown.context["stuck"].items} == {readable.pk, *(p.pk for p in imported)}
    # A post without text offers no "Generate Supernote" button, and says why.
    assert html.count("Generate Supernote</button>") == 1 and "imported without its text" in html
    by_topic = admin_client.get(reverse("stuck_posts"), {"topic": Topic.DISEASES, "text": "all"})
    assert by_topic.context["stuck"].items == [] and "No stuck posts under this filter." in by_topic.content.decode()
    page = supernote_selectors.stuck_page(text="all", size=2)
    assert len(page.items) == 2 and page.has_next
    second = supernote_selectors.stuck_page(text="all", size=2, page=2)
    assert len(second.items) == 1 and not second.has_next
    assert {i.post.pk for i in [*page.items, *second.items]} == {readable.pk, *(p.pk for p in imported)}
    paged = admin_client.get(reverse("stuck_posts"), {"text": "all", "page": "1"})
    assert paged.status_code == 200


def test_a_supernote_run_refuses_a_post_without_text(admin_client: Any) -> None:
    (post,) = _imported(1)
    _stuck(post)
    with pytest.raises(supernote_services.SupernoteError, match="imported from public Community Notes data"):
        supernote_services.supernote_run_start(post=post, user=None)
    response = admin_client.post(reverse("supernote_generate", args=[post.pk]), follow=True)
    assert "No Supernote for this post" in response.content.decode()
    assert not post.supernote_runs.exists()
