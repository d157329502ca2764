"""The blind comparison in Chromium: a rater opens "Compare two notes" from the rating queue, sees
two unlabelled notes, picks one and rates both; an admin then sees the Supernote's win rate."""

from __future__ import annotations

from typing import Any

import pytest

from crowdnotes_site.lib.communitynotes.supernotes import comparison
from notes.models import SupernoteComparison
from notes.roles import ADMIN, RATER
from tests.notes.supernotes.test_comparison import HUMAN_TEXT, SUPER_TEXT, _pair
from tests.support.browser import sign_in
from tests.support.screenshots import docs_image_path


@pytest.mark.browser
def test_rater_compares_two_notes_and_admin_sees_the_win_rate(page: Any, live_server: Any, make_user: Any) -> None:
    _pair(make_user)
    rater = make_user("comparing-rater", RATER)
    sign_in(page, live_server, rater)
    page.goto(f"{live_server.url}/rate/")
    page.locator("#compare").get_by_role("button", name="Compare two notes").click()
    page.get_by_role("heading", name="Note A").wait_for()
    html = page.content()
    assert "supernote" not in html.lower() and "alice-author" not in html
    assert SUPER_TEXT in html and HUMAN_TEXT in html
    item = SupernoteComparison.objects.get(rater__user=rater)
    sn, other = ("a", "b") if item.supernote_first else ("b", "a")
    # (Submitting with answers missing: the browser's own `required` check stops it; without it the
    # server answers 400 with the errors, tests/notes/supernotes/test_comparison.py.)
    page.check(f"input[name=preferred][value={sn.upper()}]")
    for key in comparison.STATEMENT_KEYS:
        page.check(f"input[name={sn}_{key}][value='5']")
        page.check(f"input[name={other}_{key}][value='3']")
    page.screenshot(path=str(docs_image_path("supernotes-comparison.png")), full_page=True)
    page.get_by_role("button", name="Save comparison").click()
    page.get_by_text("your comparison is saved").wait_for()
    item.refresh_from_db()
    assert item.supernote_preferred is True and item.supernote_scores["clear"] == 5

    sign_in(page, live_server, make_user("results-admin", ADMIN, staff=True))
    page.goto(f"{live_server.url}/supernotes/stuck/")
    page.get_by_role("link", name="Blind comparison by raters").click()
    page.get_by_text("Supernote preferred in 1 of 1 comparisons: 100.0%").wait_for()
    assert "Wilson" in page.inner_text("main") and "75.2%" in page.inner_text("main")
    page.screenshot(path=str(docs_image_path("supernotes-comparison-results.png")), full_page=True)
