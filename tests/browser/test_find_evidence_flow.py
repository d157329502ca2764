""" "Find evidence for me" in headless Chromium, on pages of the demo corpus (../shared/data/webpages):
queries, pool, chosen sources with reasons, the snippet review (a proposal rejected, one confirmed,
an own URL added), the draft, and a note whose origin says the evidence was mixed."""

from __future__ import annotations

import io
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from playwright.sync_api import expect

from crowdnotes_site.lib.llm.steps.common import split_data_block
from notes.models import Note
from notes.roles import CONTRIBUTOR
from tests.support.screenshots import artifact_path, docs_image_path

PAGES = [
    "health/cdc.gov__about-sids.html",
    "health/safetosleep.nichd.nih.gov__home.html",
    "health/mayoclinic.org__symptoms-causes-syc-20371444.html",
    "health/webmd.com__diet-health-benefits-green-tea.html",
    "health/livescience.com__feather-duvet-lung.html",
    "health/healthline.com__nutrition-intermittent-fasting-guide.html",
]
POST = "Vaccines cause SIDS! The CDC finally admits babies die right after their shots."
CDC = "https://www.cdc.gov/vaccine-safety/about/sids.html"
DRAFT = "CDC: studies found no link between vaccines and sudden infant death syndrome (SIDS); infants get shots at the age SIDS peaks."


def _shot(page: Any, name: str) -> None:
    page.screenshot(path=str(artifact_path(f"find-evidence-{name}.png")), full_page=True)


def _answer(messages: list[dict[str, str]]) -> str:
    """The scripted LLM: queries, a utility pick with its reason (the CDC page when shown), a draft."""
    system, user = messages[0]["content"], messages[-1]["content"]
    if "plan web searches" in system:
        return "vaccines SIDS CDC\nsudden infant death syndrome vaccine safety\nsafe sleep babies"
    if "select evidence" in system:
        urls = [r["url"] for r in split_data_block(user)[1]["search_results"]]
        pick = next((i for i, u in enumerate(urls) if "cdc.gov" in u), 0)
        why = (
            "The CDC page reviews the studies on vaccines and SIDS."
            if "cdc.gov" in urls[pick]
            else "Next most relevant."
        )
        return f"{why}\nIndex: {pick}"
    return DRAFT


@pytest.mark.browser
@pytest.mark.worker
def test_it_finds_evidence_for_a_post_and_drafts_from_the_confirmed_proposal(
    page: Any, live_server: Any, celery_worker: Any, llm_server: Any, web_server: Any, shared_data: Path,
    make_user: Any, tmp_path: Path,
) -> None:  # fmt: skip
    corpus = tmp_path / "webpages"
    for name in PAGES:
        (corpus / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(shared_data / "webpages" / name, corpus / name)
        web_server.add("/" + name, (corpus / name).read_bytes())  # the demo serves the corpus like this
    call_command("index_documents", str(corpus), "--manifest", str(shared_data / "webpages" / "manifest.tsv"),
                 "--base-url", web_server.url(""), stdout=io.StringIO())  # fmt: skip
    own = web_server.add("/own.html", (corpus / PAGES[1]).read_bytes())
    llm_server.respond_with(_answer)
    make_user("fiona", CONTRIBUTOR)
    base = live_server.url

    page.goto(f"{base}/accounts/login/")
    page.fill("#id_username", "fiona")
    page.fill("#id_password", "pw-for-tests-123")
    page.click("button:has-text('Log in')")
    page.goto(f"{base}/contribute/")
    page.fill("#id_text", POST)
    page.click("#find-evidence")
    page.wait_for_url(re.compile(r".*/drafts/\d+/$"))
    _shot(page, "1-progress")

    page.wait_for_selector("text=source(s) proposed for your review", timeout=120_000)
    page.click("summary:has-text('The pool')")
    assert "vaccines SIDS CDC" in page.inner_text(".queries")
    assert "the LLM scripted-model" in page.inner_text(".queries summary")
    pool = page.inner_text(".pool")
    assert "Sudden Infant Death Syndrome (SIDS) and Vaccines" in pool and "Health authority" in pool
    chosen = page.inner_text(".chosen-sources")
    assert "Why: The CDC page reviews the studies on vaccines and SIDS." in chosen
    _shot(page, "2-queries-pool-chosen")
    page.screenshot(path=str(docs_image_path("find-evidence.png")), full_page=True)

    # Only the CDC vaccines-and-SIDS page is proposed: fewer than τ (3). None of the off-topic pages
    # of the index (diabetes, green tea, duvets, fasting) clears the floor, and the NICHD safe-sleep
    # page, on SIDS but not on vaccines, lies more than the margin below the CDC page.
    expect(page.locator(".snippet.proposed.state-ready")).to_have_count(1, timeout=120_000)
    proposed = " ".join(page.locator(".snippet.proposed .meta strong").all_inner_texts()).lower()
    assert "sids" in proposed and "green tea" not in proposed and "fasting" not in proposed
    assert "within 0.05 of the best source's" in page.inner_text("#automation")
    cdc = page.locator(".snippet.proposed", has_text="Sudden Infant Death Syndrome (SIDS) and Vaccines")
    assert "Proposed by CrowdNotes" in cdc.inner_text() and "open the indexed copy" in cdc.inner_text()
    _shot(page, "3-review")
    cdc.locator("button:has-text('This passage supports my note')").click()
    page.wait_for_selector(".snippet.proposed .review-state[data-state=confirmed]")

    page.click("summary:has-text('Add more evidence')")
    page.fill("#id_urls", own)
    page.click("button:has-text('Add')")
    own_card = page.locator(".snippet:not(.proposed)")
    own_card.locator("button:has-text('This passage supports my note')").wait_for(timeout=120_000)
    own_card.locator("button:has-text('This passage supports my note')").click()
    page.wait_for_selector(".snippet:not(.proposed) .review-state[data-state=confirmed]")

    page.click("#request-draft")
    # Locator waits, not wait_for_function: the page's CSP forbids the eval that one needs.
    expect(page.locator("#id_text")).not_to_have_value("", timeout=60_000)
    assert page.input_value("#id_text") == DRAFT
    _shot(page, "4-draft")
    page.click("#submit-note")
    page.wait_for_url(re.compile(r".*/me/notes/\d+/$"))
    note = Note.objects.get()
    assert note.origin == Note.Origin.MIXED
    assert note.evidence_urls == [CDC, own]
    _shot(page, "5-posted")
