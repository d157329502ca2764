"""What a moderation team meets on day one, in headless Chromium: queues that show
only posts a person can read (and a filter that brings the others back), and a contributor's
edited note that survives every way back to the draft."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import expect

from evidence.models import Snippet
from notes.models import DraftJob, Note, Post
from notes.roles import ADMIN, CONTRIBUTOR, RATER
from notes.services import post_create
from tests.notes.factories import make_job, make_ready_snippet

PASSAGE = "Controlled trials found that vitamin C supplements do not prevent the flu in the general population."


def _login(page: Any, base: str, username: str) -> None:
    page.goto(f"{base}/accounts/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", "pw-for-tests-123")
    page.click("button:has-text('Log in')")
    page.wait_for_url(f"{base}/")


def _imported(n: int) -> list[Post]:
    return [
        Post.objects.create(text="[imported]", text_hash=f"imp{i}", external_id=str(9000 + i), text_available=False)
        for i in range(n)
    ]


@pytest.mark.browser
def test_an_edited_draft_survives_back_to_your_draft_reload_and_the_back_button(
    page: Any, live_server: Any, make_user: Any, transactional_db: None
) -> None:
    carla = make_user("carla", CONTRIBUTOR)
    job = make_job(carla)
    snippet = make_ready_snippet(job, "https://a.example/1", PASSAGE)
    Snippet.objects.filter(pk=snippet.pk).update(confirmation=Snippet.Confirmation.CONFIRMED, confirmed_by=carla)
    DraftJob.objects.filter(pk=job.pk).update(state=DraftJob.State.DRAFTED, draft_text="The machine's draft.")
    base = live_server.url
    _login(page, base, "carla")
    page.goto(f"{base}/drafts/{job.pk}/")
    expect(page.locator("#id_text")).to_have_value("The machine's draft.")

    edit = "Trials show vitamin C does not prevent flu in most adults."
    page.fill("#id_text", edit)
    expect(page.locator("#autosave-status")).to_contain_text("last at", timeout=10_000)  # saved, no click
    page.click("#preflight")  # "Check with the judges first": post/redirect/get back to the draft
    page.wait_for_url(re.compile(rf".*/drafts/{job.pk}/\?check=\d+"))
    expect(page.locator("#id_text")).to_have_value(edit)
    check = re.search(r"check=(\d+)", page.url)
    assert check is not None
    page.goto(f"{base}/judging/preflight/{check.group(1)}/")
    page.click("text=Back to your draft")
    page.wait_for_url(f"{base}/drafts/{job.pk}/#editor")
    expect(page.locator("#id_text")).to_have_value(edit)

    later = edit + " Vaccination protects best."
    page.fill("#id_text", later)
    expect(page.locator("#autosave-status")).to_contain_text("last at", timeout=10_000)
    page.wait_for_timeout(1500)  # the debounced autosave of the last keystrokes has answered
    page.reload()
    expect(page.locator("#id_text")).to_have_value(later)

    final = "Vitamin C does not prevent flu, large trials show."
    page.fill("#id_text", final)
    page.wait_for_timeout(1500)
    page.goto(f"{base}/")
    page.go_back()
    expect(page.locator("#id_text")).to_have_value(final)
    assert DraftJob.objects.get(pk=job.pk).edited_text == final


@pytest.mark.browser
def test_a_reload_after_fetch_evidence_sends_nothing(
    page: Any, live_server: Any, make_user: Any, web_server: Any, transactional_db: None
) -> None:
    make_user("carla", CONTRIBUTOR)
    source = web_server.add("/flu.html", f"<html><body><article><p>{PASSAGE}</p></article></body></html>")
    base = live_server.url
    _login(page, base, "carla")
    page.goto(f"{base}/contribute/")
    page.fill("#id_text", "Taking vitamin C every day means you will never catch the flu!")
    page.fill("#id_urls", source)
    page.click("button:has-text('Fetch evidence')")
    page.wait_for_url(re.compile(r".*/drafts/\d+/$"))  # the address left /contribute/
    posts: list[str] = []
    page.on("request", lambda r: posts.append(r.url) if r.method == "POST" and r.resource_type == "document" else None)
    page.reload()
    page.wait_for_load_state()
    assert posts == []
    assert DraftJob.objects.count() == 1 and Snippet.objects.count() == 1


@pytest.mark.browser
def test_home_rating_queue_and_stuck_posts_show_posts_with_text_and_the_filter_brings_the_others_back(
    page: Any, live_server: Any, make_user: Any, transactional_db: None
) -> None:
    make_user("ada", ADMIN, RATER, staff=True)
    readable = post_create(text="Garlic cures the flu overnight.")
    imported = _imported(3)
    for post in [readable, *imported]:
        for k in range(2):  # two misleading notes needing ratings: stuck, and in the rating queue
            Note.objects.create(post=post, text=f"Context {k} on post {post.pk}: garlic does not cure flu.")
    base = live_server.url
    _login(page, base, "ada")

    expect(page.locator("article.post")).to_have_count(1)
    expect(page.locator("article.post")).to_contain_text("Garlic cures the flu overnight.")
    expect(page.locator("#text-hidden")).to_contain_text("3 imported posts without text are hidden")
    expect(page.locator("#text-hidden a:has-text('fill their text from X')")).to_have_count(1)
    page.click("#text-hidden >> text=show them")
    expect(page.locator("article.post")).to_have_count(4)
    expect(page.locator("select[name=text]")).to_have_value("all")

    page.goto(f"{base}/rate/")
    expect(page.locator("article.note")).to_have_count(2)
    expect(page.locator("#text-hidden")).to_contain_text("6 notes on imported posts without text are hidden")
    page.select_option("select[name=text]", "all")
    page.click("button:has-text('Show')")
    expect(page.locator("article.note")).to_have_count(8)

    page.goto(f"{base}/supernotes/stuck/")
    expect(page.locator("section.stuck-post")).to_have_count(1)
    expect(page.locator("#text-hidden")).to_contain_text("3 stuck imported posts without text are hidden")
    page.click("#text-hidden >> text=show them")
    expect(page.locator("section.stuck-post")).to_have_count(4)
    # Only the post with text offers a Supernote run.
    expect(page.locator("button:has-text('Generate Supernote')")).to_have_count(1)


@pytest.mark.browser
def test_the_relevance_decision_page_shows_the_note_judged(
    page: Any, live_server: Any, make_user: Any, settings: Any, transactional_db: None
) -> None:
    from judging import services
    from judging.models import JudgeDecision
    from tests.judging.factories import NOTE, SNIPPET, note_with_evidence

    settings.LLM_BASE_URL = ""
    settings.JUDGE_BASELINE_SIMILARITY = "lexical"
    settings.HELPFULNESS_CLASSIFIER_DIR = "/nonexistent"
    make_user("ada", ADMIN, staff=True)
    run = services.judge_run_request(note=note_with_evidence())
    while services.judge_run_step(run_id=run.pk):
        pass
    relevance = JudgeDecision.objects.get(note=run.note, stage="relevance")
    base = live_server.url
    _login(page, base, "ada")
    page.goto(f"{base}/judging/audit/{relevance.pk}/")
    expect(page.locator("#judged-note")).to_contain_text("Note as judged")
    expect(page.locator("#judged-note")).to_contain_text(NOTE)
    expect(page.locator("#judged-snippets")).to_contain_text(SNIPPET)


@pytest.mark.browser
def test_spikes_opens_on_a_range_with_data(page: Any, live_server: Any, make_user: Any, transactional_db: None) -> None:
    import datetime as dt

    from django.utils import timezone

    make_user("ada", ADMIN, staff=True)
    post = post_create(text="Masks cause harm.")
    start = dt.date(2021, 1, 1)
    notes = []
    for i in range(300):  # 2021 with a spike in the autumn, then one note today (as the demo adds)
        when = timezone.make_aware(dt.datetime.combine(start + dt.timedelta(days=i), dt.time(12)))
        notes += [
            Note(post=post, text=f"Note {i} {k} on masks", created_at=when)
            for k in range(40 if i == 250 else 1 + i % 3)
        ]
    notes.append(Note(post=post, text="A note of today on masks"))
    Note.objects.bulk_create(notes)
    base = live_server.url
    _login(page, base, "ada")
    page.goto(f"{base}/analytics/spikes/")
    expect(page.locator("table.spikes caption")).to_have_text("1 spike")
    expect(page.locator("svg.chart circle[fill='#c53030']")).to_have_count(1)
    expect(page.locator("table.spikes")).to_contain_text("2021-09-08")
    expect(page.locator("#shown-range")).to_contain_text("2021-10-08")
    page.click("#shown-range >> text=show it all")
    expect(page.locator("table.spikes caption")).to_have_text("1 spike")
