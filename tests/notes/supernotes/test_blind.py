"""Blind means blind on every page: while a rater has a blind comparison open (assigned, not yet
answered), no page they can reach shows either note of the pair (its id, text, rating count, date,
place in a list), so nothing but the comparison page's two texts can tell the Supernote from the
other note. Once answered, both come back everywhere."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from django.urls import reverse
from django.utils import dateformat, timezone

from notes.living import services as living_services
from notes.models import Note, Participant, Post, Rating, RatingLevel, SupernoteComparison, SupernoteRun
from notes.roles import CONTRIBUTOR, RATER
from notes.services import participant_for_user, post_create
from tests.conftest import CsrfClient
from tests.notes.supernotes.test_comparison import _answer

# Ids no other row of these tests can have, so their absence from a page means something.
SUPERNOTE_ID, OTHER_ID = 987654, 876543
SUPER_TEXT = "Merged context: trials of 2.1 million children found no autism link. https://example.org/merged"
OTHER_TEXT = "Rated context: the 1998 autism paper was retracted for fraud. https://example.org/retraction"
WEAK_TEXT = "A third note on the same post, never part of the pair."
SUPER_AT = datetime(2026, 12, 7, 18, 29, tzinfo=UTC)
OTHER_AT = datetime(2024, 3, 4, 19, 2, tzinfo=UTC)


def _shown(at: datetime) -> str:
    return dateformat.format(timezone.localtime(at), "Y-m-d H:i")


def _setup(make_user: Any) -> tuple[Post, Note, Note, Any]:
    """A post with a rated note (the pair's other note), a third note, and a proposed Supernote;
    a rater (with the contributor role too, as signing up gives) who rated the other note earlier
    and suggested a change with that rating."""
    author = Participant.objects.create(external_id="ext-author-1")
    post = post_create(text="Vaccines cause autism, a new report shows.")
    other = Note.objects.create(pk=OTHER_ID, post=post, author=author, text=OTHER_TEXT, intercept=0.31, factor=0.1,
                                num_ratings=14, created_at=OTHER_AT)  # fmt: skip
    Note.objects.create(post=post, author=Participant.objects.create(external_id="ext-author-2"), text=WEAK_TEXT,
                        intercept=0.05, factor=0.0, num_ratings=9)  # fmt: skip
    supernote = Note.objects.create(pk=SUPERNOTE_ID, post=post, author=None, text=SUPER_TEXT,
                                    origin=Note.Origin.SUPERNOTE, created_at=SUPER_AT)  # fmt: skip
    SupernoteRun.objects.create(post=post, state=SupernoteRun.State.DONE, proposed_note=supernote)
    user = make_user("blind-rater", CONTRIBUTOR, RATER)
    rating = Rating.objects.create(note=other, rater=participant_for_user(user=user), level=RatingLevel.HELPFUL)
    living_services.suggestion_add(rating=rating, text="Name the journal that retracted it.")
    return post, supernote, other, user


def _pages(post: Post) -> list[str]:
    """Every page a contributor-rater reaches from the nav and the pages it links to."""
    return [
        reverse("home"),
        reverse("home") + "?text=all",
        reverse("post_detail", args=[post.pk]),
        reverse("rating_queue"),
        reverse("rating_queue") + "?text=all",
        reverse("my_suggestions"),
        reverse("my_notes"),
        reverse("request_queue"),
        reverse("spiking_posts"),
        reverse("contribute") + f"?post={post.pk}",
        reverse("xnotes:queue"),
        reverse("xnotes:post", args=[post.pk]),
    ]


def _note_pages(note_id: int) -> list[str]:
    return [reverse("rate_note", args=[note_id]), reverse("note_versions", args=[note_id])]


def _leaks(html: str, *, texts: bool = True) -> list[str]:
    """What on a page could single out either note of the pair."""
    found = [s for s in (str(SUPERNOTE_ID), str(OTHER_ID), _shown(SUPER_AT), _shown(OTHER_AT)) if s in html]
    found += [m for m in re.findall(r"\b(?:0|14) ratings?\b", html)]
    if texts:
        found += [t[:40] for t in (SUPER_TEXT, OTHER_TEXT) if t[:40] in html]
    return found


def _client(user: Any) -> CsrfClient:
    client = CsrfClient()
    client.force_login(user)
    return client


def test_it_hides_both_notes_of_an_open_comparison_from_every_page(make_user: Any, anon_client: Any) -> None:
    post, supernote, other, user = _setup(make_user)
    client = _client(user)
    # Without a comparison the rater sees the Supernote like any note.
    assert SUPER_TEXT in client.get(reverse("post_detail", args=[post.pk])).content.decode()
    # The home page's list is cached by its content: one shown to another visitor first must not be served.
    assert SUPER_TEXT[:40] in anon_client.get(reverse("home")).content.decode()

    started = client.post(reverse("comparison_start", args=[post.pk]))
    assert started.status_code == 302
    item = SupernoteComparison.objects.get(rater__user=user)
    assert str(SUPERNOTE_ID) not in started["Location"] and str(OTHER_ID) not in started["Location"]

    for url in _pages(post):
        response = client.get(url)
        assert response.status_code == 200, url
        assert _leaks(response.content.decode()) == [], url
    for url in _note_pages(supernote.pk) + _note_pages(other.pk):
        response = client.get(url)
        assert response.status_code == 404, url
        # The 404 page repeats the address asked for, nothing of the note.
        assert _leaks(response.content.decode().replace(url, "")) == [], url
    # The third note and the post stay in view; the post page says two notes wait for the comparison.
    page = client.get(reverse("post_detail", args=[post.pk])).content.decode()
    assert WEAK_TEXT in page and "9 ratings" in page
    assert reverse("comparison", args=[item.pk]) in page

    # The comparison page: both texts, nothing else that tells them apart, the same order on a reload.
    compare = client.get(started["Location"]).content.decode()
    assert SUPER_TEXT in compare and OTHER_TEXT in compare and WEAK_TEXT not in compare
    assert _leaks(compare, texts=False) == []
    again = client.get(started["Location"]).content.decode()
    first = compare.index(SUPER_TEXT) < compare.index(OTHER_TEXT)
    assert first == (again.index(SUPER_TEXT) < again.index(OTHER_TEXT)) == item.supernote_first

    # Other visitors are not affected.
    assert SUPER_TEXT[:40] in anon_client.get(reverse("home")).content.decode()
    assert SUPER_TEXT in anon_client.get(reverse("post_detail", args=[post.pk])).content.decode()

    assert client.post(started["Location"], _answer()).status_code == 302
    page = client.get(reverse("post_detail", args=[post.pk])).content.decode()
    assert SUPER_TEXT in page and OTHER_TEXT in page
    assert f'id="note-{SUPERNOTE_ID}"' in page and f"0 ratings · {_shown(SUPER_AT)}" in page
    assert f"14 ratings · {_shown(OTHER_AT)}" in page and '<span class="origin">Supernote</span>' in page
    queue = client.get(reverse("rating_queue")).content.decode()
    assert reverse("rate_note", args=[SUPERNOTE_ID]) in queue and SUPER_TEXT[:40] in queue
    assert SUPER_TEXT[:40] in client.get(reverse("home")).content.decode()
    assert reverse("note_versions", args=[OTHER_ID]) in client.get(reverse("my_suggestions")).content.decode()
    for url in _note_pages(supernote.pk) + _note_pages(other.pk):
        assert client.get(url).status_code == 200, url


def test_it_hides_nothing_from_a_rater_who_answered_or_has_no_comparison(make_user: Any) -> None:
    from notes.supernotes import selectors

    _, supernote, other, user = _setup(make_user)
    participant = participant_for_user(user=user)
    assert selectors.hidden_note_ids(user=user) == frozenset()
    SupernoteComparison.objects.create(rater=participant, supernote=supernote, other_note=other, supernote_first=True)
    assert selectors.hidden_note_ids(user=user) == {SUPERNOTE_ID, OTHER_ID}
    assert selectors.hidden_note_ids(user=make_user("another-rater", RATER)) == frozenset()
    SupernoteComparison.objects.filter(rater=participant).update(answered_at=timezone.now())
    assert selectors.hidden_note_ids(user=user) == frozenset()
