"""Two tabs on one draft, in headless Chromium: the tab whose autosave lost to the other's is told
so, keeps its text, and the submit button waits for a confirmed passage."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from notes.models import DraftJob
from notes.roles import CONTRIBUTOR
from tests.browser.test_day_one import PASSAGE, _login
from tests.notes.factories import make_job, make_ready_snippet


@pytest.mark.browser
def test_the_tab_that_lost_an_autosave_says_so_and_submit_waits_for_a_confirmed_passage(
    page: Any, live_server: Any, make_user: Any, transactional_db: None
) -> None:
    carla = make_user("carla", CONTRIBUTOR)
    job = make_job(carla)
    make_ready_snippet(job, "https://a.example/1", PASSAGE)
    DraftJob.objects.filter(pk=job.pk).update(state=DraftJob.State.DRAFTED, draft_text="The machine's draft.")
    base = live_server.url
    _login(page, base, "carla")
    page.goto(f"{base}/drafts/{job.pk}/")
    other = page.context.new_page()
    other.goto(f"{base}/drafts/{job.pk}/")

    # No passage confirmed yet: Submit is disabled, with the reason beside it, whatever the text's length.
    expect(page.locator("#submit-note")).to_be_disabled()
    expect(page.locator("#submit-why")).to_contain_text("Review every snippet first")
    page.fill("#id_text", "Trials show vitamin C does not prevent flu.")
    expect(page.locator("#autosave-status")).to_contain_text("last at", timeout=10_000)
    expect(page.locator("#submit-note")).to_be_disabled()

    # The other tab still shows the text it loaded: its save loses, and it says so.
    other.fill("#id_text", "A different text from the other tab.")
    expect(other.locator("#autosave-status")).to_contain_text("changed in another tab", timeout=10_000)
    expect(other.locator("#id_text")).to_have_value("A different text from the other tab.")
    assert DraftJob.objects.get(pk=job.pk).edited_text == "Trials show vitamin C does not prevent flu."

    # The first tab keeps saving (its version went along with each save), and confirming enables Submit.
    page.fill("#id_text", "Trials show vitamin C does not prevent the flu.")
    expect(page.locator("#autosave-status")).to_contain_text("last at", timeout=10_000)
    page.locator("button:has-text('This passage supports my note')").click()
    expect(page.locator("#submit-note")).to_be_enabled(timeout=10_000)
    expect(page.locator("#submit-why")).to_have_count(0)
    page.click("#submit-note")
    page.wait_for_url(f"{base}/me/notes/**")
    page.go_back()
    expect(page.locator("#submitted-as")).to_contain_text("This draft was submitted as note")
    expect(page.locator("#unsent-text")).to_have_count(0)
