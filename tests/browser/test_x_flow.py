"""Connect to X in headless Chromium, with a real worker and the loopback fake X API: an admin
fetches from X, the post appears in "From X" with its media and suggested source, the admin
proposes a note to X and sees X's evaluator outcomes on the note page and the "X writer" page.

Not covered here (covered elsewhere): evidence review, drafting and the judges
(tests/browser/test_contributor_flow.py); the note is built with a confirmed snippet and a
finished judge run. The topic classifier is off in tests, so the test sets the post's topic."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from notes.models import Post, Topic
from notes.services import participant_for_user
from tests.support.worker import Worker
from tests.support.x_server import FakeX
from tests.xnotes.conftest import _x_session, x_api, x_worker  # noqa: F401  (fixtures)
from tests.xnotes.factories import NOTE, SNIPPET, URL, tweet
from xnotes.models import XPost

DOCS = Path(__file__).resolve().parents[2] / "docs"
X_ID = "1930672414444372186"


def _login(page: Any, live_server: Any, user: Any) -> None:
    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("#id_username", user.username)
    page.fill("#id_password", "pw-for-tests-123")
    page.click("button[type=submit]")


def _note_on(post: Post, author: Any) -> Any:
    from crowdnotes_site.lib.hashing import sha256_hex
    from evidence.models import EvidenceSource, Passage, Snippet
    from judging.models import JudgeRun
    from notes.models import Note

    note = Note.objects.create(post=post, text=NOTE, evidence_urls=[URL], author=participant_for_user(user=author))
    source = EvidenceSource.objects.create(url=URL, url_hash=sha256_hex(URL), cleaned_text=SNIPPET)
    passage = Passage.objects.create(
        source=source, embedding_model="m", chunk_index=0, text=SNIPPET, char_start=0, char_end=len(SNIPPET)
    )
    Snippet.objects.create(post=post, note=note, url=URL, source=source, passage=passage, state=Snippet.State.READY,
                           confirmation=Snippet.Confirmation.CONFIRMED, confirmed_text_hash=sha256_hex(SNIPPET))  # fmt: skip
    JudgeRun.objects.create(note=note, content_hash="c", state=JudgeRun.State.DONE, helpful=True)
    return note


@pytest.mark.browser
@pytest.mark.worker
def test_fetch_propose_and_follow_back_on_x(page: Any, live_server: Any, x_worker: Worker, x_api: FakeX,  # noqa: F811
                                            admin_user: Any) -> None:  # fmt: skip
    x_api.eligible_pages = [[tweet(X_ID, "The MMR vaccine causes autism in children. Share before they delete this!",
                                   author_id="42", lang="en", created_at="2026-11-24T09:30:00Z",
                                   attachments={"media_keys": ["3_1"]},
                                   suggested_source_links=["https://www.cdc.gov/vaccine-safety/concerns/autism.html"])]]  # fmt: skip
    x_api.eligible_includes = {"media": [{"media_key": "3_1", "type": "photo", "url": "https://pbs.twimg.com/media/mmr.jpg",
                                          "alt_text": "A chart of autism diagnoses by year"}]}  # fmt: skip
    _login(page, live_server, admin_user)
    page.click("nav >> text=X writer")
    assert "test mode" in page.inner_text("#x-mode")
    page.click("button:has-text('Fetch from X now')")
    page.wait_for_selector("#x-runs tr[data-state=done]", timeout=60_000)
    assert "1 (1 / 0)" in page.inner_text("#x-runs")
    post = XPost.objects.get(x_id=X_ID).post
    Post.objects.filter(pk=post.pk).update(topic=Topic.TREATMENTS)  # stands in for the topic classifier

    page.click("nav >> text=From X")
    page.click(f"#xpost-{X_ID} >> text=Open and write a note")
    assert "A chart of autism diagnoses by year" in page.inner_text("#x-media")
    assert "cdc.gov" in page.inner_text("#x-suggested")
    DOCS.mkdir(exist_ok=True)
    page.screenshot(path=str(DOCS / "x-post.png"), full_page=True)

    note = _note_on(post, admin_user)
    page.goto(f"{live_server.url}/me/notes/{note.pk}/")
    page.click("#x-propose-link")
    page.check("input[value=factual_error]")
    page.click("button:has-text('Propose to X')")
    page.wait_for_selector("#x-proposal[data-state=sent]", timeout=60_000)
    assert len(x_api.of("/2/notes", "POST")) == 1
    assert x_api.notes[0]["info"]["misleading_tags"] == ["factual_error", "missing_important_context"]

    from xnotes.tasks import x_sync_written

    x_sync_written.delay()  # the hourly beat task, run now by the worker
    page.goto(f"{live_server.url}/me/notes/{note.pk}/")
    for _ in range(60):
        if page.locator("#x-outcomes").count():
            break
        page.wait_for_timeout(500)
        page.reload()
    outcomes = page.inner_text("#x-outcomes")
    assert "UrlValidity" in outcomes and "ClaimOpinion" in outcomes and "HarassmentAbuse" in outcomes
    page.screenshot(path=str(DOCS / "x-note-outcomes.png"), full_page=True)

    page.click("nav >> text=X writer")
    row = page.inner_text("#x-admission tr[data-criterion=claim_opinion_high]")
    assert "100% (1 of 1)" in row and "≥ 30%" in row
    assert "Not yet: 1 of the 50" in page.inner_text("#x-eligible")
    assert "Writing limit: 10" in page.inner_text("#x-writing-limit")
    page.screenshot(path=str(DOCS / "x-writer.png"), full_page=True)
