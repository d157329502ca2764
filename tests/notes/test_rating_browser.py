"""The rating form in a real browser: htmx swaps the form in place (CSRF header from <body>)."""

from __future__ import annotations

from typing import Any

import pytest

from notes.models import Note, Rating, RatingLevel
from notes.roles import CONTRIBUTOR, RATER
from notes.services import participant_for_user, post_create
from tests.support.browser import sign_in


@pytest.mark.browser
def test_it_rates_in_place_with_htmx(live_server: Any, page: Any, make_user: Any, transactional_db: None) -> None:
    author = make_user("writer", CONTRIBUTOR)
    rater = make_user("reader", RATER)
    post = post_create(text="Cold water cures fevers.", flagged_by=author)
    note = Note.objects.create(post=post, author=participant_for_user(user=author), text="It does not; see WHO.")
    sign_in(page, live_server, rater)

    page.goto(f"{live_server.url}/rate/{note.pk}/")
    page.get_by_label("Not helpful", exact=True).check()
    page.locator(".tags-helpful").wait_for(state="detached")  # only the not-helpful reasons remain
    assert page.get_by_label("Incorrect information").is_visible()
    page.get_by_label("Somewhat helpful").check()
    page.locator(".tags-helpful").wait_for()
    page.get_by_label("Clear and well-written").check()
    page.get_by_label("Misses key points or irrelevant").check()
    page.get_by_role("button", name="Save rating").click()
    page.get_by_text("your rating is saved").wait_for()
    assert page.url.endswith(f"/rate/{note.pk}/")  # swapped in place, no navigation
    rating = Rating.objects.get(note=note)
    assert rating.level == RatingLevel.SOMEWHAT_HELPFUL
    assert rating.tags == ["helpfulClear", "notHelpfulMissingKeyPoints"]
