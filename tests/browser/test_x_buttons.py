"""The X writer's buttons in headless Chromium with a real worker and the loopback fake X API:
"Fill imported posts' text now" gives imported posts their text, "Follow notes back now" stores
the notes X lists; each shows its progress by polling and ends in its table."""

from __future__ import annotations

import re
from typing import Any

import pytest

from crowdnotes_site.lib.hashing import sha256_hex
from notes.models import Post
from tests.support.worker import Worker
from tests.support.x_server import FakeX
from tests.xnotes.conftest import _x_session, x_api, x_worker  # noqa: F401  (fixtures)
from tests.xnotes.factories import tweet
from xnotes.models import XWrittenNote


def _login(page: Any, live_server: Any, user: Any) -> None:
    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("#id_username", user.username)
    page.fill("#id_password", "pw-for-tests-123")
    page.click("button[type=submit]")


@pytest.mark.browser
@pytest.mark.worker
def test_the_hydrate_and_sync_buttons_run_in_the_worker_and_show_their_result(
    page: Any, live_server: Any, x_worker: Worker, x_api: FakeX, admin_user: Any  # noqa: F811
) -> None:  # fmt: skip
    posts = [Post.objects.create(text="[imported]", text_hash=sha256_hex(f"b{i}"), external_id=str(1700000000000000000 + i),
                                 text_available=False) for i in range(3)]  # fmt: skip
    x_api.tweets[posts[0].external_id] = tweet(posts[0].external_id, "Raw milk cures asthma, doctors hide it.")
    x_api.tweets[posts[1].external_id] = tweet(posts[1].external_id, "Vitamin D megadoses replace the flu shot.")
    x_api.notes.append({"id": "1940000000000000000", "info": {"post_id": "1800000000000000000"},
                        "status": "needs_more_ratings", "test_result": {"evaluation_outcome": x_api.outcomes}})  # fmt: skip
    _login(page, live_server, admin_user)
    page.goto(f"{live_server.url}/x/writer/")
    assert "no text: 3 now" in page.inner_text("#x-hydrate")

    page.evaluate("window.notReloaded = true")
    page.click("#x-hydrate-now")
    row = page.locator("#x-hydrate-runs tr[data-state=done]")
    row.wait_for(timeout=60_000)
    cells = [row.locator("td").nth(i).inner_text() for i in range(7)]
    assert re.match(r"\d+ \(ada\)", cells[0]) and cells[2:7] == ["1", "3 of 3", "2", "1", "0"]
    assert page.evaluate("window.notReloaded === true")  # polled in, no reload
    posts[0].refresh_from_db()
    assert posts[0].text == "Raw milk cures asthma, doctors hide it." and posts[0].text_available

    page.click("#x-sync-now")
    page.locator("#x-sync-runs tr[data-state=done]").wait_for(timeout=60_000)
    assert page.locator("#x-sync-runs tr[data-state=done] td").nth(4).inner_text() == "1"
    assert XWrittenNote.objects.filter(x_note_id="1940000000000000000").exists()
    # Both used the shared budget: the page shows what X's answers left of each window.
    budget = page.inner_text("#x-budget")
    assert "requests left" in budget and "no answer seen" not in budget
    assert x_api.violations == []
