"""Living notes in a real browser (Chromium), with real Celery workers, the loopback LLM stand-in
and evidence pages served on loopback:

- request a note (on the post page, and by the post's link on X), rate with a suggestion (the htmx
  re-render on picking a level keeps the suggestion typed before), and see it on My suggestions;
- the whole loop: requests past the threshold start a draft with "find evidence for me" through
  the queue; its writer confirms a proposed passage and submits the note; two raters rate it with
  suggestions, one with a new source whose passage they confirm; the revision is proposed (checks
  and judges pass, jury margin beaten), and its author accepts it in the browser; the suggesters see
  what became of theirs; a third rater, invited, rates the new version;
- a revision the judges reject: the suggesters and the revision audit show why."""

from __future__ import annotations

import io
import re
import shutil
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.utils import timezone
from playwright.sync_api import expect

from crowdnotes_site.lib.communitynotes.supernotes import phm
from crowdnotes_site.lib.llm.steps.common import split_data_block
from evidence.models import Snippet
from evidence.snippets import snippet_review
from notes.living import services as living
from notes.models import DraftJob, Note, NoteRequest, NoteVersion, Post, Rating, RevisionRun, Suggestion, Topic
from notes.roles import ADMIN, CONTRIBUTOR, RATER
from notes.services import participant_for_user, post_create, post_text_hash
from notes.supernotes import services as supernote_services
from tests.conftest import wait_for
from tests.notes.factories import make_job, make_ready_snippet
from tests.notes.supernotes.test_runs import _stuck_post
from tests.support.browser import after_htmx_swap, sign_in
from tests.support.screenshots import artifact_path, docs_image_path

PAGES = [
    "health/cdc.gov__about-sids.html",
    "health/safetosleep.nichd.nih.gov__home.html",
    "health/mayoclinic.org__symptoms-causes-syc-20371444.html",
    "health/webmd.com__diet-health-benefits-green-tea.html",
]
POST = "Vaccines cause SIDS! The CDC finally admits babies die right after their shots."
X_ID = "1790000000000000042"
DRAFT = "CDC: studies found no link between vaccines and sudden infant death syndrome (SIDS); infants get shots at the age SIDS peaks."
WITH_SOURCE = "Add that placing babies on their backs to sleep lowers the risk of SIDS."
WORDING = "Shorter sentences would read better."
# Takes up words of the sourced suggestion, none of the wording one ("used" is a lexical check).
REVISED = (
    "CDC: studies found no link between vaccines and SIDS; infants get shots at the age SIDS peaks, and "
    "placing babies on their backs to sleep lowers the risk."
)


def _answer(verdict: str) -> Any:
    """The scripted LLM: search queries, a pick (the CDC page), a draft, a revision, suggestion kinds,
    and every judge's verdict."""

    def respond(messages: list[dict[str, Any]]) -> str:
        system, user = messages[0]["content"], messages[-1]["content"]
        if "plan web searches" in system:
            return "vaccines SIDS CDC\nsudden infant death syndrome vaccine safety"
        if "select evidence" in system:
            urls = [r["url"] for r in split_data_block(user)[1]["search_results"]]
            pick = next((i for i, u in enumerate(urls) if "cdc.gov" in u), 0)
            return f"The CDC page reviews the studies on vaccines and SIDS.\nIndex: {pick}"
        if "You write Community Notes" in system:
            return DRAFT
        if "Revise the current note" in user:
            return REVISED
        if "Which kind is the suggestion" in user:
            return "wording" if "Shorter" in split_data_block(user)[1]["suggestion"] else "context"
        return f"Checked against the evidence.\nFinal decision: {verdict}"

    return respond


def _rate(page: Any, base: str, note: Note, *, level: str, suggestion: str = "", source: str = "") -> None:
    page.goto(f"{base}/rate/{note.pk}/")
    page.get_by_label(level, exact=True).check()
    # htmx re-renders the form for the level picked; typing or saving during that swap can be lost.
    if level == "Helpful":
        page.locator(".tags-not-helpful").wait_for(state="detached")
    else:
        page.wait_for_load_state("networkidle")
    if suggestion:
        page.get_by_label("Suggest a change to this note (optional)").fill(suggestion)
    if source:
        page.get_by_label("A source for your suggestion (optional)").fill(source)
    page.get_by_role("button", name="Save rating").click()
    page.get_by_text("your rating is saved").wait_for()


def _revise(timeout: float = 120) -> RevisionRun:
    """What the beat's revisions_start_due does, then wait for the worker's decision."""
    started = living.revisions_start_due()
    assert len(started) == 1, started
    wait_for(lambda: RevisionRun.objects.filter(pk=started[0], state=RevisionRun.State.DONE).exists(), timeout)
    return RevisionRun.objects.get(pk=started[0])


@pytest.mark.browser
def test_request_then_rate_with_a_suggestion_and_see_it(
    live_server: Any, page: Any, make_user: Any, transactional_db: None
) -> None:
    author = make_user("writer", CONTRIBUTOR)
    rater = make_user("reader", RATER)
    post = post_create(text="Cold water cures fevers.", flagged_by=author)
    note = Note.objects.create(post=post, author=participant_for_user(user=author), text="It does not; see WHO.")
    sign_in(page, live_server, rater)

    page.goto(f"{live_server.url}/posts/{post.pk}/")
    page.get_by_label("Why does this post need a note? (optional)").fill("My family shares it")
    page.get_by_role("button", name="Request a note").click()
    page.get_by_text("Your request is counted: 1 request(s)").wait_for()
    assert NoteRequest.objects.get(post=post).reason == "My family shares it"

    page.goto(f"{live_server.url}/rate/{note.pk}/")
    page.get_by_label("Suggest a change to this note (optional)").fill("Add that cold water can cause shivering.")
    # htmx re-renders the form; both tag groups are on the page before and after, so wait for the swap
    after_htmx_swap(page, page.get_by_label("Somewhat helpful").check)
    field = page.get_by_label("Suggest a change to this note (optional)")
    assert field.input_value() == "Add that cold water can cause shivering."
    page.get_by_role("button", name="Save rating").click()
    page.get_by_text("your rating is saved").wait_for()
    suggestion = Suggestion.objects.get()
    assert (suggestion.text, suggestion.kind, suggestion.state) == (
        "Add that cold water can cause shivering.", "context", Suggestion.State.PENDING,
    )  # fmt: skip

    page.goto(f"{live_server.url}/me/suggestions/")
    page.get_by_text("Waiting for a revision").wait_for()
    assert page.get_by_text("Added context").is_visible()


@pytest.mark.browser
@pytest.mark.worker
def test_from_a_request_to_a_published_revision_and_a_rating_of_the_new_version(
    live_server: Any, page: Any, worker_factory: Any, llm_server: Any, web_server: Any, shared_data: Path,
    make_user: Any, tmp_path: Path, settings: Any,
) -> None:  # fmt: skip
    settings.PHM_DIR = tmp_path / "phm"
    settings.NOTE_REQUEST_AUTO_DRAFT_THRESHOLD = 1  # the second request starts a draft
    settings.REVISION_QUIET_SECONDS = 0
    # The jury: raters with scorer parameters and a PHM trained on their ratings.
    _stuck_post()
    supernote_services.phm_train_from_db(embedder_name=phm.HASHING, epochs=5)
    corpus = tmp_path / "webpages"
    for name in PAGES:
        (corpus / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(shared_data / "webpages" / name, corpus / name)
        web_server.add("/" + name, (corpus / name).read_bytes())
    call_command("index_documents", str(corpus), "--manifest", str(shared_data / "webpages" / "manifest.tsv"),
                 "--base-url", web_server.url(""), stdout=io.StringIO())  # fmt: skip
    safe_sleep = web_server.add("/rater-source.html", (corpus / PAGES[1]).read_bytes())
    llm_server.respond_with(_answer("yes"))
    worker_factory(extra_env={"PHM_DIR": str(settings.PHM_DIR), "REVISION_JURY_MARGIN": "-10"})
    # Health posts flagged day after day, then a spike yesterday: today's post is in a current spike.
    now = timezone.now()
    Post.objects.bulk_create(
        [Post(text=f"Claim {d}-{i}", text_hash=f"c{d}-{i}", topic=Topic.TREATMENTS, posted_at=now - timedelta(days=d))
         for d in range(1, 31) for i in range(2 if d > 1 else 8)]
    )  # fmt: skip
    post = Post.objects.create(text=POST, text_hash=post_text_hash(POST), topic=Topic.TREATMENTS, external_id=X_ID,
                               source_url=f"https://x.com/i/status/{X_ID}")  # fmt: skip
    base = live_server.url
    asker, writer = make_user("asker", RATER), make_user("writer", CONTRIBUTOR)
    raters = [make_user(f"rater{k}", RATER) for k in (1, 2, 3)]

    # 1. Two requests: one on the post page, one by the post's link on X; the second crosses the threshold.
    sign_in(page, live_server, asker)
    page.goto(f"{base}/posts/{post.pk}/")
    page.get_by_label("Why does this post need a note? (optional)").fill("Parents in my group believe it")
    page.get_by_role("button", name="Request a note").click()
    page.get_by_text("Your request is counted: 1 request(s)").wait_for()
    sign_in(page, live_server, writer)
    page.goto(f"{base}/requested/")
    page.get_by_label("Link or ID of the post on X").fill("not a link")
    page.get_by_role("button", name="Request a note").click()
    page.get_by_text("This is not a post on X").wait_for()
    page.get_by_label("Link or ID of the post on X").fill(f"https://twitter.com/someone/status/{X_ID}?s=20")
    page.get_by_role("button", name="Request a note").click()
    page.get_by_text("Enough people asked: a draft with an evidence search was started.").wait_for()
    job = DraftJob.objects.get(post=post)
    assert job.contributor == writer and NoteRequest.objects.filter(post=post, started_draft=job).count() == 1
    page.goto(f"{base}/requested/")
    row = page.locator(".request-queue tr.in-spike")
    expect(row).to_contain_text("In a spike")
    assert "Vaccines cause SIDS" in row.inner_text() and row.locator(".n-requests").inner_text() == "2"
    page.screenshot(path=str(docs_image_path("living-requested.png")), full_page=True)

    # 2. The automatic draft: the evidence search ran through the queue; the writer confirms and submits.
    page.goto(f"{base}/me/notes/")
    page.locator(f"a[href='/drafts/{job.pk}/']").first.click()
    page.wait_for_url(re.compile(rf".*/drafts/{job.pk}/$"))
    proposed = page.locator(".snippet.proposed.state-ready").first
    proposed.wait_for(timeout=180_000)
    proposed.locator("button:has-text('This passage supports my note')").click()
    page.wait_for_selector(".snippet.proposed .review-state[data-state=confirmed]")
    page.click("#request-draft")
    expect(page.locator("#id_text")).to_have_value(DRAFT, timeout=60_000)
    page.click("#submit-note")
    page.wait_for_url(re.compile(r".*/me/notes/\d+/$"))
    note = Note.objects.get(post=post)
    assert note.text == DRAFT and note.author is not None and note.author.user == writer

    # 3. Two raters rate with suggestions; one adds a source and confirms its passage. A third rates only.
    sign_in(page, live_server, raters[0])
    _rate(page, base, note, level="Somewhat helpful", suggestion=WITH_SOURCE, source=safe_sleep)
    page.goto(f"{base}/me/suggestions/")
    confirm = page.get_by_role("button", name="This passage supports my suggestion")
    deadline = time.monotonic() + 180
    while not confirm.is_visible():  # the page shows the passage once a worker fetched and matched it
        assert time.monotonic() < deadline, page.inner_text("main")
        time.sleep(1)
        page.reload()
    page.screenshot(path=str(docs_image_path("living-suggestion-source.png")), full_page=True)
    confirm.click()
    page.locator("li.success", has_text="Passage confirmed.").wait_for()
    sign_in(page, live_server, raters[1])
    _rate(page, base, note, level="Helpful", suggestion=WORDING)
    sign_in(page, live_server, raters[2])
    _rate(page, base, note, level="Helpful")

    # 4. The revision: the checks and the judges pass it and the jury's margin is beaten, so it is
    # proposed; nothing changes until the note's author accepts it.
    run = _revise()
    assert run.outcome == RevisionRun.Outcome.PROPOSED, (run.reasons, run.checks, run.judge_log, run.error)
    note.refresh_from_db()
    assert note.text == DRAFT and Suggestion.objects.get(text=WITH_SOURCE).state == Suggestion.State.IN_PROPOSAL
    sign_in(page, live_server, writer)
    page.goto(f"{base}/me/notes/")
    page.get_by_text("Revisions waiting for your decision").wait_for()
    page.locator("#proposals a").first.click()
    page.wait_for_url(re.compile(rf".*/revisions/{run.pk}/$"))
    assert page.locator(".diff ins").count() >= 1 and "keeps the note's point" in page.inner_text("main")
    page.get_by_role("button", name="Decline").click()  # a decline needs a reason
    page.get_by_text("Say why you decline this revision").wait_for()
    page.screenshot(path=str(docs_image_path("living-proposal.png")), full_page=True)
    page.get_by_role("button", name="Accept this revision").click()
    page.wait_for_url(re.compile(rf".*/notes/{note.pk}/versions/$"))
    page.get_by_text("Version 2 is now the note's text").wait_for()
    run.refresh_from_db()
    assert run.outcome == RevisionRun.Outcome.PUBLISHED and run.decided_by == writer
    note.refresh_from_db()
    assert note.text == REVISED and note.current_version is not None and note.current_version.number == 2
    sourced = Suggestion.objects.get(text=WITH_SOURCE)
    assert sourced.state == Suggestion.State.USED_PUBLISHED and sourced.snippet is not None
    assert sourced.snippet.url in note.evidence_urls  # the suggester's confirmed source joined the note
    assert Suggestion.objects.get(text=WORDING).state == Suggestion.State.NOT_USED

    # 5. Each suggester sees what became of theirs.
    sign_in(page, live_server, raters[0])
    page.goto(f"{base}/me/suggestions/")
    page.get_by_text("Used in a published version").wait_for()
    assert "Published as version 2" in page.inner_text("main")
    page.screenshot(path=str(docs_image_path("living-my-suggestions.png")), full_page=True)
    sign_in(page, live_server, raters[1])
    page.goto(f"{base}/me/suggestions/")
    page.get_by_text("Not used", exact=True).wait_for()
    assert "the revision did not take up its words" in page.inner_text("main")

    # 6. The third rater is invited to rate the new version, and rates it.
    sign_in(page, live_server, raters[2])
    page.goto(f"{base}/rate/")
    page.get_by_text("Notes you rated have a new version").wait_for()
    page.get_by_role("link", name="Rate version 2").click()
    page.get_by_text("placing babies on their backs").first.wait_for()
    page.get_by_label("Helpful", exact=True).check()
    page.locator(".tags-not-helpful").wait_for(state="detached")
    page.get_by_role("button", name="Save rating").click()
    page.get_by_text("your rating is saved").wait_for()
    rating = Rating.objects.get(note=note, rater__user=raters[2])
    assert rating.version_id == note.current_version_id
    page.goto(f"{base}/notes/{note.pk}/versions/")
    page.get_by_text("Current version (2)").wait_for()
    assert "1 rating of this version" in page.inner_text("main")
    assert page.locator(".diff ins").count() >= 1
    page.screenshot(path=str(docs_image_path("living-versions.png")), full_page=True)
    sign_in(page, live_server, make_user("auditor", ADMIN, staff=True))
    page.goto(f"{base}/revisions/")
    page.get_by_text("Accepted by a person and published by writer").wait_for()
    page.screenshot(path=str(artifact_path("living-revision-published.png")), full_page=True)


@pytest.mark.browser
@pytest.mark.worker
def test_a_revision_the_judges_reject_is_not_published_and_the_reason_is_shown(
    live_server: Any, page: Any, worker_factory: Any, llm_server: Any, make_user: Any, tmp_path: Path, settings: Any
) -> None:
    settings.PHM_DIR = tmp_path / "phm"
    settings.REVISION_QUIET_SECONDS = 0
    _stuck_post()
    supernote_services.phm_train_from_db(embedder_name=phm.HASHING, epochs=5)
    llm_server.respond_with(_answer("no"))
    worker_factory(queues="default,llm", extra_env={"PHM_DIR": str(settings.PHM_DIR), "REVISION_JURY_MARGIN": "-10"})
    writer = make_user("writer", CONTRIBUTOR)
    post = post_create(text=POST, flagged_by=writer)
    note = Note.objects.create(post=post, author=participant_for_user(user=writer), text=DRAFT)
    job = make_job(writer, post)
    snippet = make_ready_snippet(job, "https://www.cdc.gov/vaccine-safety/about/sids.html",
                                 "Studies have found no link between vaccines and SIDS.")  # fmt: skip
    snippet_review(snippet=snippet, user=writer, confirmed=True)
    Snippet.objects.filter(pk=snippet.pk).update(note=note)
    living.current_version(note)
    raters = [make_user(f"rater{k}", RATER) for k in (1, 2)]
    base = live_server.url
    sign_in(page, live_server, raters[0])
    _rate(page, base, note, level="Somewhat helpful", suggestion=WITH_SOURCE)
    sign_in(page, live_server, raters[1])
    _rate(page, base, note, level="Helpful", suggestion=WORDING)

    run = _revise()
    assert run.outcome == RevisionRun.Outcome.REJECTED and "the judges did not pass it" in run.reasons, run.reasons
    note.refresh_from_db()
    assert note.text == DRAFT and NoteVersion.objects.filter(note=note).count() == 1
    assert Rating.objects.filter(note=note).count() == 2  # the ratings of the current version stay

    sign_in(page, live_server, raters[0])
    page.goto(f"{base}/me/suggestions/")
    page.get_by_text("Used in a revision that was rejected").wait_for()
    assert "the judges did not pass it" in page.inner_text(".suggestion .outcome")
    page.screenshot(path=str(docs_image_path("living-rejected-suggestion.png")), full_page=True)
    sign_in(page, live_server, make_user("auditor", ADMIN, staff=True))
    page.goto(f"{base}/revisions/?note={note.pk}")
    page.get_by_text("Rejected: the judges did not pass it").wait_for()
    assert REVISED in page.inner_text(".revision-run")  # the candidate is kept, with the judges' verdicts
    assert "relevance: no (llm" in page.inner_text(".revision-run .judges")
    page.screenshot(path=str(docs_image_path("living-revision-rejected.png")), full_page=True)
