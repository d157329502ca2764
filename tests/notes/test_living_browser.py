"""Living notes in a real browser: request a note on a post, rate with a suggestion (the htmx
re-render on picking a level keeps the suggestion typed before), and see it on My suggestions."""

from __future__ import annotations

from typing import Any

import pytest
from django.conf import settings
from django.test import Client

from notes.models import Note, NoteRequest, Suggestion
from notes.roles import CONTRIBUTOR, RATER
from notes.services import participant_for_user, post_create


@pytest.mark.browser
def test_request_then_rate_with_a_suggestion_and_see_it(
    live_server: Any, page: Any, make_user: Any, transactional_db: None
) -> None:
    author = make_user("writer", CONTRIBUTOR)
    rater = make_user("reader", RATER)
    post = post_create(text="Cold water cures fevers.", flagged_by=author)
    note = Note.objects.create(post=post, author=participant_for_user(user=author), text="It does not; see WHO.")
    client = Client()
    client.force_login(rater)
    session = client.cookies[settings.SESSION_COOKIE_NAME].value
    page.context.add_cookies([{"name": settings.SESSION_COOKIE_NAME, "value": session, "url": live_server.url}])

    page.goto(f"{live_server.url}/posts/{post.pk}/")
    page.get_by_label("Why does this post need a note? (optional)").fill("My family shares it")
    page.get_by_role("button", name="Request a note").click()
    page.get_by_text("Your request is counted: 1 request(s)").wait_for()
    assert NoteRequest.objects.get(post=post).reason == "My family shares it"

    page.goto(f"{live_server.url}/rate/{note.pk}/")
    page.get_by_label("Suggest a change to this note (optional)").fill("Add that cold water can cause shivering.")
    page.get_by_label("Somewhat helpful").check()  # htmx re-renders the form
    page.locator(".tags-helpful").wait_for()
    field = page.get_by_label("Suggest a change to this note (optional)")
    assert field.input_value() == "Add that cold water can cause shivering."
    page.get_by_role("button", name="Save rating").click()
    page.get_by_text("your rating is saved").wait_for()
    suggestion = Suggestion.objects.get()
    assert (suggestion.text, suggestion.kind, suggestion.state) == (
        "Add that cold water can cause shivering.", "context", Suggestion.State.PENDING,
    )  # fmt: skip

    page.goto(f"{live_server.url}/me/suggestions/")
    page.get_by_text("Waiting for a revision").wait_for()
    assert page.get_by_text("Added context").is_visible()
