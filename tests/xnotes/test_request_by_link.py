"""A note requested by the link of a post on X that CrowdNotes does not know: the request asks X
nothing; the post waits without its text until X's post lookup (x_hydrate_posts) fills it in."""

from __future__ import annotations

from typing import Any

from django.urls import reverse

from notes.models import NoteRequest, Post
from tests.support.x_server import FakeX
from tests.xnotes.factories import tweet
from xnotes.client import XClient
from xnotes.services import hydrate

X_ID = "1790000000000000001"


def test_a_request_by_link_asks_x_nothing_and_the_lookup_fills_the_text(x_api: FakeX, contributor_client: Any) -> None:
    response = contributor_client.post(
        reverse("request_note_by_link"), {"reference": f"https://twitter.com/someone/status/{X_ID}/photo/1"}
    )
    post = Post.objects.get(external_id=X_ID)
    assert response.status_code == 302 and NoteRequest.objects.filter(post=post).count() == 1
    assert x_api.requests == []
    assert not post.text_available and "requested by its link" in (post.text_missing_reason() or "")
    x_api.tweets[X_ID] = tweet(X_ID, "Raw garlic cures measles in two days.")
    assert hydrate.hydrate_posts(client=XClient(), limit=10).hydrated == 1
    post.refresh_from_db()
    assert post.text_available and post.text == "Raw garlic cures measles in two days."
    page = contributor_client.get(reverse("post_detail", args=[post.pk])).content.decode()
    assert "Raw garlic cures measles" in page and "does not have this post's text" not in page
