"""Connect to X in headless Chromium, the whole way, with a real worker (evidence, drafting,
judges and the X tasks), the loopback LLM, the loopback web server (the evidence page) and the
loopback fake X API: an admin fetches from X, the post appears in "From X" with its media and
suggested source, the suggested source is reviewed (its snippet confirmed), the LLM drafts, the
pre-flight shows the judges and X's ClaimOpinion score (polled in, no reload), the note is
submitted and judged, proposed to X with the classification and reasons pre-filled from the
judges, and X's evaluator outcomes show on the note page and the "X writer" page.

The topic classifier is off in tests, so the test sets the post's topic. Screenshots of each step: docs/images/x-*.png (tests/support/screenshots.py)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from playwright.sync_api import expect

from notes.models import Note, Post, Topic
from tests.judging.llm_answers import answers, stage_of
from tests.support import x_server
from tests.support.screenshots import docs_image_path
from tests.support.web_server import WebServer
from tests.support.worker import Worker
from tests.support.x_server import FakeX
from tests.xnotes.conftest import _x_session, x_api  # noqa: F401  (fixtures)
from tests.xnotes.factories import tweet
from xnotes.models import XPost

X_ID = "1930672414444372186"
POST = "The MMR vaccine causes autism in children. Share before they delete this!"
PAGE = """<!doctype html><html><head><title>Vaccines and autism</title></head><body>
<nav>Home | Vaccine safety | Contact</nav>
<article><h1>Autism and vaccines</h1>
<p>Our vaccine safety office monitors every licensed vaccine and publishes what the studies find. This page is
reviewed each year by the office's physicians and lists the studies it relies on at the end.</p>
<p>Many studies have looked at whether there is a relationship between the MMR vaccine and autism. Large
studies of more than 650,000 children found no link between the MMR vaccine and autism, including in children
with a sibling with autism.</p>
<p>Parents who have questions about the measles, mumps and rubella vaccine should talk with their child's
doctor, who can explain the benefits and the known side effects, such as a mild fever or a rash.</p></article>
<footer>Vaccine safety office</footer></body></html>"""
DRAFT = "Studies of more than 650,000 children found no link between the MMR vaccine and autism."
RELEVANCE = "The snippet contradicts the post: large studies found the claim that MMR causes autism is false."
HELPFULNESS = "Clear and sourced; it gives the important context the post leaves out."


def _login(page: Any, live_server: Any, user: Any) -> None:
    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("#id_username", user.username)
    page.fill("#id_password", "pw-for-tests-123")
    page.click("button[type=submit]")


def _shot(page: Any, name: str) -> None:
    page.screenshot(path=str(docs_image_path(f"x-{name}.png")), full_page=True)


@pytest.mark.browser
@pytest.mark.worker
def test_from_x_to_a_proposed_note_and_back(page: Any, live_server: Any, worker_factory: Callable[..., Worker],
                                            x_api: FakeX, llm_server: Any, web_server: WebServer,  # noqa: F811
                                            admin_user: Any) -> None:  # fmt: skip
    worker_factory(extra_env={
        "X_API_BASE_URL": x_api.base_url, "X_API_KEY": x_server.CONSUMER_KEY,
        "X_API_KEY_SECRET": x_server.CONSUMER_SECRET, "X_ACCESS_TOKEN": x_server.ACCESS_TOKEN,
        "X_ACCESS_TOKEN_SECRET": x_server.ACCESS_TOKEN_SECRET, "X_BEARER_TOKEN": x_server.BEARER_TOKEN,
        "X_API_BACKOFF_S": "0.05", "TOPICS_CLASSIFY_NEW_POSTS": "0",
    })  # fmt: skip  # one worker on every queue (default: the X tasks; cpu: evidence; llm: draft and judges)
    source = web_server.add("/vaccines/autism.html", PAGE)
    judge = answers(
        relevance=f"{RELEVANCE}\nFinal decision: yes",
        correctness="Every claim of the note is in the snippet.\nFinal decision: yes",
        helpfulness=f"{HELPFULNESS}\nFinal decision: yes",
    )
    llm_server.respond_with(lambda messages: DRAFT if stage_of(messages) == "other" else judge(messages))
    x_api.evaluator_score = 0.72
    x_api.eligible_pages = [[tweet(X_ID, POST, author_id="42", lang="en", created_at="2026-11-24T09:30:00Z",
                                   attachments={"media_keys": ["3_1"]}, suggested_source_links=[source])]]  # fmt: skip
    x_api.eligible_includes = {"media": [{"media_key": "3_1", "type": "photo", "url": "https://pbs.twimg.com/media/mmr.jpg",
                                          "alt_text": "A chart of autism diagnoses by year"}]}  # fmt: skip
    base = live_server.url

    # 1. Fetch from X (the admin's button; the worker pulls the page).
    _login(page, live_server, admin_user)
    page.click("nav >> text=X writer")
    assert "test mode" in page.inner_text("#x-mode")
    page.click("button:has-text('Fetch from X now')")
    page.wait_for_selector("#x-runs tr[data-state=done]", timeout=60_000)
    assert "1 (1 / 0)" in page.inner_text("#x-runs")
    _shot(page, "fetch")
    post = XPost.objects.get(x_id=X_ID).post
    Post.objects.filter(pk=post.pk).update(topic=Topic.TREATMENTS)  # stands in for the topic classifier

    # 2. The post in the queue "From X", with its media and the source X suggests.
    page.click("nav >> text=From X")
    page.wait_for_url(re.compile(r".*/x/queue/$"))
    assert POST in page.inner_text(f"#xpost-{X_ID}")
    _shot(page, "queue")
    page.click(f"#xpost-{X_ID} >> text=Open and write a note")
    assert "A chart of autism diagnoses by year" in page.inner_text("#x-media")
    assert source in page.inner_text("#x-suggested")
    _shot(page, "post")

    # 3. The suggested source is fetched and offered for review, never confirmed for the person.
    page.click("#x-start-note")
    page.wait_for_url(re.compile(r".*/drafts/\d+/$"))
    ready = page.locator(".snippet.state-ready")
    expect(ready).to_have_count(1, timeout=90_000)
    assert ready.locator(".review-state").get_attribute("data-state") == "pending"
    assert "650,000 children" in ready.locator("blockquote.passage").inner_text()
    assert page.locator("#request-draft").count() == 0  # nothing to draft before the review
    ready.locator("button:has-text('This passage supports my note')").click()
    page.wait_for_selector(".snippet.state-ready .review-state[data-state=confirmed]")

    # 4. The LLM drafts from the confirmed passage.
    page.click("#request-draft")
    expect(page.locator("#id_text")).to_have_value(DRAFT, timeout=60_000)
    assert "the LLM scripted-model" in page.inner_text(".draft-method")
    _shot(page, "evidence-draft")

    # 5. Pre-flight: the judges and X's ClaimOpinion score arrive by polling (no reload), then it stops.
    page.click("#preflight")
    # Post/redirect/get: the verdicts are shown on the draft page, so a reload never queues the judges again.
    page.wait_for_url(re.compile(r".*/drafts/\d+/\?check=\d+.*"))
    page.evaluate("window.notReloaded = true")
    expect(page.locator("#x-claim-opinion-score")).to_have_text("0.72", timeout=90_000)
    page.wait_for_selector("#result-section:not([hx-get])", timeout=90_000)
    assert page.evaluate("window.notReloaded === true")
    result = page.inner_text("#result-section")
    assert "Relevance: yes" in result and "Correctness: yes" in result and "Helpfulness: yes" in result
    assert "all three judges pass" in result
    assert "test mode" in page.inner_text("#x-preflight #x-mode")
    evaluated = x_api.of("/2/evaluate_note", "POST")
    assert len(evaluated) == 1 and evaluated[0].body == {"post_id": X_ID, "note_text": DRAFT}
    _shot(page, "preflight")

    # 6. Submit; the judges run on the note.
    page.click("#submit-note")
    page.wait_for_url(re.compile(r".*/me/notes/\d+/$"))
    page.evaluate("window.notReloaded = true")
    note = Note.objects.get(post=post)
    assert note.text == DRAFT and note.evidence_urls == [source]
    page.wait_for_selector("[data-stage=helpfulness][data-state=yes]", timeout=120_000)
    page.wait_for_selector("#live:not([hx-get])", timeout=60_000)
    _shot(page, "note")

    # 7. Propose to X: the X panel came with the poll that saw the judges finish (no reload);
    # classification and reasons pre-filled from the judges' reasoning.
    assert page.evaluate("window.notReloaded === true")
    page.click("#x-propose-link")
    expect(page.locator("input[value=misinformed_or_potentially_misleading]")).to_be_checked()
    ticked = page.locator("input[name=tags]:checked")
    expect(ticked).to_have_count(2)
    assert [ticked.nth(i).get_attribute("value") for i in range(2)] == ["factual_error", "missing_important_context"]
    prefill = page.inner_text("#x-prefill")
    assert "the relevance judge wrote" in prefill and "the helpfulness judge wrote" in prefill
    assert "0.72" in page.inner_text("#x-claim-opinion")  # the pre-flight's answer, cached for this text
    _shot(page, "propose")
    page.click("button:has-text('Propose to X')")
    page.wait_for_selector("#x-proposal[data-state=sent]", timeout=60_000)
    _shot(page, "proposed")
    assert len(x_api.of("/2/notes", "POST")) == 1
    sent = x_api.notes[0]["info"]
    assert sent["misleading_tags"] == ["factual_error", "missing_important_context"]
    assert sent["text"] == f"{DRAFT} {source}" and sent["classification"] == "misinformed_or_potentially_misleading"

    # 8. Follow back: the admin's "Follow notes back now" (the hourly sync, run now by the worker);
    # X's evaluator outcomes on the note page.
    page.click("nav >> text=X writer")
    page.click("#x-sync-now")
    page.wait_for_selector("#x-sync-runs tr[data-state=done]", timeout=60_000)
    assert page.locator("#x-sync-progress").count() == 0  # the poll ended with the run
    assert page.locator("#x-sync-runs tr[data-state=done] td").nth(4).inner_text() == "1"  # notes stored
    page.goto(f"{base}/me/notes/{note.pk}/")
    outcomes = page.inner_text("#x-outcomes")
    assert "UrlValidity" in outcomes and "ClaimOpinion" in outcomes and "HarassmentAbuse" in outcomes
    _shot(page, "note-outcomes")

    # 9. The admin's "X writer" page: admission over the test-mode notes and today's writing limit.
    page.click("nav >> text=X writer")
    row = page.inner_text("#x-admission tr[data-criterion=claim_opinion_high]")
    assert "100% (1 of 1)" in row and "≥ 30%" in row
    assert "Not yet: 1 of the 50" in page.inner_text("#x-eligible")
    assert "Writing limit: 10" in page.inner_text("#x-writing-limit")
    _shot(page, "writer")
