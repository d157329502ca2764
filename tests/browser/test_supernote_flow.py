"""From "Stuck posts" to a proposed Supernote rated by a rater, in Chromium with a real worker."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from crowdnotes_site.lib.communitynotes.supernotes import phm
from crowdnotes_site.lib.llm.steps.common import split_data_block
from notes.models import Note, Rating, SupernoteRun
from notes.roles import ADMIN, RATER
from notes.supernotes import services
from tests.notes.supernotes.test_runs import NOTE_TEXTS, _stuck_post
from tests.support.browser import sign_in
from tests.support.screenshots import docs_image_path

MERGED = (
    "Large studies of millions of children found no link between vaccines and autism, and the 1998 paper "
    "claiming a link was retracted for fraud. https://cdc.gov/autism https://thelancet.com/retraction"
)


@pytest.mark.browser
@pytest.mark.worker
def test_stuck_post_to_rated_supernote(
    page: Any,
    live_server: Any,
    worker_factory: Any,
    llm_server: Any,
    make_user: Any,
    tmp_path: Path,
    settings: Any,
) -> None:
    settings.PHM_DIR = tmp_path
    # One fixed run: the fresh-draw score of this post's merge is near the 0.40 line, so a random
    # seed proposes on some runs only.
    settings.SUPERNOTE_SEED = 1
    post, _notes, _ = _stuck_post()
    services.phm_train_from_db(embedder_name=phm.HASHING, epochs=30)
    worker_factory(extra_env={"PHM_DIR": str(tmp_path), "SUPERNOTE_CANDIDATES": "6", "SUPERNOTE_JURY_SIZE": "200"})

    def answer(messages: list[dict[str, Any]]) -> str:
        content = messages[-1]["content"]
        if "Instructions:" not in content:
            return "Fine.\nFinal decision: yes"
        # A merge of the two notes every rater likes when both are shown; otherwise a copy of one note,
        # which is no merge and is dropped before the jury.
        shown = {n["text"] for n in split_data_block(content)[1].get("existing_notes", [])}
        return MERGED if {NOTE_TEXTS[0], NOTE_TEXTS[1]} <= shown else sorted(shown)[0]

    llm_server.respond_with(answer)
    # Supernote runs are admins' by default (hundreds of LLM calls a click).
    sign_in(page, live_server, make_user("stuckwatch", ADMIN, staff=True))
    page.goto(f"{live_server.url}/supernotes/stuck/")
    page.get_by_text("39 ratings").first.wait_for()
    page.screenshot(path=str(docs_image_path("supernotes-stuck-posts.png")), full_page=True)
    page.get_by_role("button", name="Generate Supernote").click()
    try:
        page.get_by_text("Proposed Supernote").wait_for(timeout=120_000)
    except Exception as exc:  # say what the run did, not only that the text never came
        runs = list(SupernoteRun.objects.filter(post=post).values("state", "stage", "progress", "error"))
        raise AssertionError(f"no proposal within 120 s: runs {runs}; page: {page.inner_text('main')[:1500]}") from exc
    page.screenshot(path=str(docs_image_path("supernotes-run.png")), full_page=True)
    run = SupernoteRun.objects.get(post=post)
    note = run.proposed_note
    assert note is not None and note.origin == Note.Origin.SUPERNOTE

    # The run's details (jury score, merged notes) are shown to admins and the run's starter.
    page.goto(f"{live_server.url}/posts/{post.pk}/")
    page.get_by_text("simulated jury intercept").wait_for()
    page.screenshot(path=str(docs_image_path("supernotes-post.png")), full_page=True)
    rater = make_user("juror", RATER)
    sign_in(page, live_server, rater)
    page.goto(f"{live_server.url}/rate/{note.pk}/")
    page.get_by_label("Helpful", exact=True).check()
    # htmx re-renders the form for the level picked; clicking Save during that swap can be lost.
    page.locator(".tags-not-helpful").wait_for(state="detached")
    page.get_by_role("button", name="Save rating").click()
    page.get_by_text("your rating is saved").wait_for()
    assert Rating.objects.get(note=note).rater.user == rater
