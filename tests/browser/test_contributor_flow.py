"""The contributor's whole path in headless Chromium, as a new user would walk it."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import expect

from notes.models import Note
from tests.judging.llm_answers import answers, stage_of
from tests.support.screenshots import artifact_path, docs_image_path

PAGE = """<!doctype html><html><head><title>Vitamin C and the common cold</title></head><body>
<nav>Home | Topics | Contact</nav>
<article><h1>Vitamin C and the common cold</h1>
<p>This article was written by our editorial team and reviewed by two physicians before publication. We update
our health pages when major new studies appear, and we list the reviewers and the date of the last review at
the top of each page. Our editors have no financial ties to supplement makers, and the portal carries no
advertising for any product mentioned here.</p>
<p>Readers often ask how we choose the research we describe. We prefer systematic reviews of randomized trials
over single studies, and large trials over small ones. When the evidence is mixed we say so, and we explain
what the studies measured, how long they lasted and who took part, so that you can judge how well the results
apply to you and your family.</p>
<p>Many people take vitamin C hoping to prevent colds and flu. Large reviews of randomized controlled trials
found that regular vitamin C supplements do not reduce how often adults in the general population catch colds.</p>
<p>In trials, taking vitamin C after symptoms began did not shorten colds consistently. Very high doses can cause
stomach upset and kidney stones in some people. Vaccination remains the best protection against influenza.</p>
<p>Researchers reviewed 29 trials with more than 11,000 participants before reaching these conclusions about
vitamin C, colds and influenza prevention in adults and children.</p></article>
<footer>Copyright Health Portal</footer></body></html>"""


def _shot(page: Any, name: str) -> None:
    page.screenshot(path=str(artifact_path(f"contributor-{name}.png")), full_page=True)


@pytest.mark.browser
@pytest.mark.worker
def test_it_walks_from_signup_to_a_submitted_note(
    page: Any, live_server: Any, celery_worker: Any, llm_server: Any, web_server: Any
) -> None:
    good = web_server.add("/vitamin-c.html", PAGE)
    broken = web_server.url("/missing-page.html")  # 404
    draft = "Randomized trials found vitamin C supplements do not prevent colds or flu in most adults; vaccination protects best."
    judge = answers(
        relevance="The snippet is about vitamin C and colds, the post's claim.\nFinal decision: yes",
        correctness="Every claim of the note is in the snippet.\nFinal decision: yes",
        helpfulness="Clear, sourced and on point.\nFinal decision: yes",
    )
    llm_server.respond_with(lambda messages: draft if stage_of(messages) == "other" else judge(messages))
    base = live_server.url

    page.goto(f"{base}/accounts/signup/")
    page.fill("#id_username", "newcontrib")
    page.fill("#id_password1", "a-long-Passphrase-42")
    page.fill("#id_password2", "a-long-Passphrase-42")
    page.uncheck("input[value=Rater]")
    page.click("button[type=submit]")
    page.wait_for_url(f"{base}/")

    # A phone-sized screen: the passage box is shorter than the passage, so the sentence that
    # matches the post sits below the box's fold unless the page scrolls the box to it.
    desktop = page.viewport_size
    page.set_viewport_size({"width": 390, "height": 844})
    page.click("text=Flag a post")
    page.fill("#id_text", "Taking vitamin C every day means you will never catch the flu!")
    page.fill("#id_urls", f"{good}\n{broken}")
    _shot(page, "1-flag")
    page.click("button:has-text('Fetch evidence')")
    page.wait_for_url(re.compile(r".*/drafts/\d+/$"))
    _shot(page, "2-progress")

    # Live progress: both sources settle without reloading the page by hand.
    page.wait_for_selector(".snippet.state-failed", timeout=90_000)
    page.wait_for_selector(".snippet.state-ready", timeout=90_000)
    failed = page.locator(".snippet.state-failed")
    assert "The site answered with an error" in failed.inner_text()
    ready = page.locator(".snippet.state-ready")
    assert "vitamin" in ready.locator("blockquote mark").first.inner_text().lower()
    assert page.locator("#request-draft").count() == 0  # nothing to draft before review
    # The sentence closest to the post: quoted first on the card, highlighted in the passage, and
    # in view, the box scrolled to it (it lies below the editorial paragraphs).
    sentence = ready.locator("blockquote.passage mark.sentence")
    expect(sentence).to_have_count(1)
    assert "vitamin c" in sentence.inner_text().lower()
    assert ready.locator(".best-sentence q").inner_text() == sentence.inner_text()
    box = ready.locator("blockquote.passage")
    box.scroll_into_view_if_needed()  # the page scrolls to the box; the box's own scroll is the script's
    expect(sentence).to_be_in_viewport()
    assert box.evaluate("el => el.scrollHeight > el.clientHeight")  # the passage overflows its box
    # (polling may swap the card in meanwhile: the script scrolls the new box after each swap)
    assert any(box.evaluate("el => el.scrollTop") > 0 or page.wait_for_timeout(250) for _ in range(20))
    _shot(page, "3-evidence")
    page.set_viewport_size(desktop)
    page.screenshot(path=str(docs_image_path("evidence-review.png")), full_page=True)

    ready.locator("button:has-text('This passage supports my note')").click()
    page.wait_for_selector(".snippet.state-ready .review-state[data-state=confirmed]")
    page.click("#request-draft")
    # Locator waits, not wait_for_function: the page's CSP forbids the eval that one needs.
    expect(page.locator("#id_text")).not_to_have_value("", timeout=60_000)
    assert page.input_value("#id_text") == draft
    assert "the LLM scripted-model" in page.inner_text(".draft-method")
    _shot(page, "4-draft")

    page.fill("#id_text", draft + " " + "Extra words that push this note well past the limit. " * 4)
    assert page.is_disabled("#submit-note")
    assert "Too long" in page.inner_text("#note-over")
    _shot(page, "5-too-long")

    page.fill("#id_text", draft)
    assert page.is_enabled("#submit-note")
    page.click("#submit-note")
    page.wait_for_url(re.compile(r".*/me/notes/\d+/$"))
    note = Note.objects.get()
    assert note.text == draft
    assert note.evidence_urls == [good]
    assert note.origin == Note.Origin.AUGMENTED and note.draft_survival == 1.0
    assert draft in page.inner_text(f"#note-{note.pk}")
    _shot(page, "6-posted")

    # The three verdicts arrive on this page without a reload (htmx polling swaps them in).
    page.evaluate("window.notReloaded = true")
    page.wait_for_selector("[data-stage=helpfulness][data-state=yes]", timeout=120_000)
    assert page.evaluate("window.notReloaded === true")
    live = page.inner_text("#live")
    assert "The snippet is about vitamin C and colds" in live
    assert "Every claim of the note is in the snippet." in live
    assert "Clear, sourced and on point." in live
    assert live.count("· LLM (") == 3  # judge kind and name on each stage
    # Then the crowd status, with what it still needs.
    assert "Needs More Ratings" in live
    assert "0 ratings so far; a status needs at least 5: 5 more." in live
    page.wait_for_selector("#live:not([hx-get])")  # judging over: the page stops polling
    page.screenshot(path=str(docs_image_path("contributor-verdicts.png")), full_page=True)

    page.click("text=My notes")
    assert draft[:60] in page.inner_text("main")
    page.set_viewport_size({"width": 390, "height": 844})
    _shot(page, "7-my-notes-phone")
