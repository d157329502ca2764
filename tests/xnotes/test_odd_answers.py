"""X answering what cannot be read (JSON of the wrong shape, an HTML page,
garbage) or 429 to every request. Each X command ends with a non-zero exit and a message naming
what X sent, within the stated cap on its total wait (X_API_MAX_TOTAL_WAIT_S); nothing crashes,
nothing hangs, nothing reports "fetched: 0" as a success."""

from __future__ import annotations

import io
import re
import time
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from notes.models import Post
from tests.support.x_server import FakeX, Scripted
from xnotes.models import XFetchRun

ELIGIBLE = "/2/notes/search/posts_eligible_for_notes"

pytestmark = pytest.mark.django_db


def _fetch() -> str:
    out = io.StringIO()
    call_command("x_fetch_eligible", "--max-results", "2", "--json", stdout=out)
    return out.getvalue()


@pytest.mark.parametrize(
    ("answer", "named"),
    [
        # The reported crash: `includes` an int (xnotes/rules.py: 'int' object has no attribute 'get').
        (Scripted(200, {"data": [{"id": "1790000000000000001", "text": "x"}], "includes": 7}), "includes = int 7"),
        (
            Scripted(200, {"data": [{"id": "1790000000000000001", "text": "x"}], "includes": {"tweets": 3}}),
            "includes.tweets = int 3",
        ),
        (Scripted(200, {"data": 12}), "data = int 12"),
        (Scripted(200, {"data": ["just a string"]}), "an item of data = 'just a string'"),
        (Scripted(200, raw=b"5", content_type="application/json"), "JSON int, not an object"),
        (Scripted(200, raw=b"<html><body>Down for maintenance</body></html>"), "text/html"),
        (Scripted(200, raw=b"\x8f\x01garbage{", content_type="application/octet-stream"), "application/octet-stream"),
    ],
)
def test_an_answer_of_the_wrong_shape_ends_the_fetch_with_its_message(
    x_api: FakeX, answer: Scripted, named: str
) -> None:
    x_api.script(ELIGIBLE, answer)
    with pytest.raises(CommandError) as refused:
        _fetch()
    message = str(refused.value)
    assert named in message
    if answer.raw is not None and b"html" in answer.raw:
        assert "Down for maintenance" in message  # the start of what X sent
    assert not Post.objects.exists()
    assert XFetchRun.objects.get().state == XFetchRun.State.FAILED


def test_endless_429s_end_the_command_within_the_cap(x_api: FakeX, settings: Any) -> None:
    settings.X_API_MAX_TOTAL_WAIT_S = 3
    for _ in range(20):
        x_api.rate_limit_next(ELIGIBLE, reset_in_s=0.5)
    with pytest.raises(CommandError) as refused:
        _fetch()
    message = str(refused.value)
    assert "X answered 429 Too Many Requests" in message
    assert "X_API_MAX_TOTAL_WAIT_S = 3 s" in message
    waited = re.search(r"waited (\d+) s in all", message)
    assert waited is not None and int(waited.group(1)) <= 3  # within the cap (what it slept, not a clock)
    assert len(x_api.of(ELIGIBLE)) >= 2  # it did wait for a reset before giving up


def test_the_hydrate_command_names_an_html_answer(x_api: FakeX) -> None:
    from notes.services import post_create

    Post.objects.filter(pk=post_create(text="placeholder").pk).update(
        external_id="1790000000000000009", text_available=False
    )
    x_api.script("/2/tweets", Scripted(200, raw=b"<!doctype html><title>Bad gateway</title>"))
    with pytest.raises(CommandError) as refused:
        call_command("x_hydrate_posts", "--json", stdout=io.StringIO())
    assert "text/html" in str(refused.value) and "Bad gateway" in str(refused.value)


def test_the_writer_page_shows_the_time_the_window_closes_until(x_api: FakeX, admin_client: Any) -> None:
    import datetime as dt

    from xnotes import budget

    until = time.time() + 600
    budget.observe("notes", 429, {"x-rate-limit-reset": f"{until:.0f}"}, window_s=900)
    page = admin_client.get("/x/writer/").content.decode()
    shown = dt.datetime.fromtimestamp(float(f"{until:.0f}"), tz=dt.UTC).strftime("%H:%M:%S")
    assert f"closed until {shown} UTC" in page
    # A reset already past: no "closed until" line (never an empty "closed until  UTC").
    budget.clear()
    budget.observe("notes", 429, {"x-rate-limit-reset": f"{time.time() - 5:.0f}"}, window_s=900)
    budget._cache().set(budget._key("notes", "blocked_until"), time.time() - 5, 60)
    page = admin_client.get("/x/writer/").content.decode()
    assert "closed until" not in page


def _submit() -> str:
    from tests.xnotes.factories import proposable_note

    note = proposable_note()
    out = io.StringIO()
    call_command("x_submit_note", str(note.pk), "--classification", "not_misleading", "--json", stdout=out)
    return out.getvalue()


def _sync() -> str:
    out = io.StringIO()
    call_command("x_sync_written", "--json", stdout=out)
    return out.getvalue()


@pytest.mark.parametrize(("command", "path"), [(_sync, "/2/notes/search/notes_written"), (_submit, "/2/notes")])
@pytest.mark.parametrize("odd", ["html", "endless 429"])
def test_the_sync_and_submit_commands_end_with_what_x_sent(
    x_api: FakeX, settings: Any, command: Any, path: str, odd: str
) -> None:
    """The other two commands that ask X: the same non-zero exit naming what X sent, within the cap."""
    settings.X_API_MAX_TOTAL_WAIT_S = 1
    if odd == "html":
        x_api.script(path, Scripted(200, raw=b"<html><body>Down for maintenance</body></html>"))
    else:
        for _ in range(20):
            x_api.rate_limit_next(path, reset_in_s=0.5)
    with pytest.raises(CommandError) as refused:
        command()
    message = str(refused.value)
    if odd == "html":
        assert "text/html" in message and "Down for maintenance" in message
        if command is _submit:  # whether X created the note is unknown: checked with X before any resend
            from xnotes.models import XProposal

            assert XProposal.objects.get().state == XProposal.State.UNCERTAIN
    else:
        assert "X answered 429 Too Many Requests" in message and "X_API_MAX_TOTAL_WAIT_S = 1 s" in message


WRITTEN = "/2/notes/search/notes_written"
NOTE_ID = "1790000000000000101"


@pytest.mark.parametrize(
    ("answer", "named"),
    [
        ({"data": 12}, "data = int 12"),
        ({"data": ["just a string"]}, "an item of data = 'just a string'"),
        ({"data": [{"id": NOTE_ID, "info": "a note"}]}, "data[].info = str 'a note'"),
        ({"data": [{"id": NOTE_ID, "test_result": [1]}]}, "data[].test_result = list [1]"),
        ({"data": [], "meta": "next"}, "meta = str 'next'"),
    ],
)
def test_an_answer_of_the_wrong_shape_ends_the_sync_with_its_message(
    x_api: FakeX, answer: dict[str, Any], named: str
) -> None:
    from xnotes.models import XWrittenNote

    x_api.script(WRITTEN, Scripted(200, answer))
    with pytest.raises(CommandError) as refused:
        _sync()
    message = str(refused.value)
    assert message.startswith("X's answer could not be read: ") and named in message
    assert not XWrittenNote.objects.exists()
