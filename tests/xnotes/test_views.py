"""The X pages and the X sections of the note, post, My notes and pre-flight pages."""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

from django.contrib.auth.models import Group
from django.test import override_settings
from django.utils import timezone

from crowdnotes_site.lib.hashing import sha256_hex
from crowdnotes_site.models import OutboxMessage
from judging.models import JudgeDecision, JudgeRun, PreflightCheck
from judging.services import preflight_request
from notes.models import DraftJob, Post, Rating, Topic
from notes.roles import X_WRITER
from notes.services import participant_for_user
from tests.conftest import CsrfClient
from tests.support.x_server import FakeX
from tests.xnotes.factories import proposable_note
from xnotes.client import XClient
from xnotes.models import XEvaluation, XFetchRun, XPost, XProposal, XTaskRun, XWrittenNote
from xnotes.panels import PREFLIGHT_WAIT_S
from xnotes.services import proposals
from xnotes.services import written as written_notes
from xnotes.tasks import x_preflight_evaluate


def _xpost(x_id: str, text: str, topic: str = Topic.TREATMENTS, **kw: Any) -> XPost:
    post = Post.objects.create(text=text, text_hash=x_id, external_id=x_id, topic=topic)
    return XPost.objects.create(post=post, x_id=x_id, eligible=True, **kw)


def _x_preflight(contributor: Any, note_text: str) -> tuple[XPost, PreflightCheck]:
    """A contributor's pre-flight of `note_text` on an X post (a draft job on it, as the draft page asks)."""
    xp = _xpost("1900000000000000001", "Ivermectin cures COVID.")
    job = DraftJob.objects.create(post=xp.post, contributor=contributor)
    return xp, preflight_request(user=contributor, post_text=xp.post.text, note_text=note_text, draft_job_id=job.pk)


def test_pages_say_how_to_turn_x_on_without_credentials(no_x_credentials: None, admin_client: CsrfClient) -> None:
    for url in ("/x/queue/", "/x/writer/"):
        page = admin_client.get(url).content.decode()
        assert "X is not connected" in page and "X_ACCESS_TOKEN_SECRET" in page
    assert "Fetch from X now" not in admin_client.get("/x/writer/").content.decode()
    response = admin_client.post("/x/writer/fetch/")
    assert response.status_code == 302 and not XFetchRun.objects.exists()


def test_queue_lists_health_posts_without_a_note(x_api: FakeX, contributor_client: CsrfClient) -> None:
    _xpost("1900000000000000001", "Ivermectin cures COVID.", suggested_source_links=["https://www.fda.gov/x"])
    _xpost("1900000000000000002", "My cat is cute.", topic=Topic.NOT_HEALTH)
    _xpost("1900000000000000003", "Unclassified yet.", topic="")
    page = contributor_client.get("/x/queue/").content.decode()
    assert "Ivermectin cures COVID." in page and "My cat is cute." not in page
    assert "1 more X post is waiting for topic classification" in page
    assert "test mode" in page and "1 suggested source" in page


def test_starting_a_note_offers_the_suggested_sources_for_review(
    x_api: FakeX, contributor: Any, contributor_client: CsrfClient
) -> None:
    xp = _xpost("1900000000000000001", "Ivermectin cures COVID.", suggested_source_links=["https://www.fda.gov/ivermectin"],
                media=[{"type": "photo", "url": "https://pbs.twimg.com/media/a.jpg", "alt_text": "A pill bottle"}],
                context=[{"relation": "quoted", "id": "5", "text": "Doctors say so."}])  # fmt: skip
    page = contributor_client.get(f"/x/posts/{xp.post_id}/").content.decode()
    assert "A pill bottle" in page and "Doctors say so." in page and "https://www.fda.gov/ivermectin" in page
    response = contributor_client.post(f"/x/posts/{xp.post_id}/")
    job = DraftJob.objects.get(post=xp.post, contributor=contributor)
    assert response.status_code == 302 and response["Location"] == f"/drafts/{job.pk}/"
    snippet = job.snippets.get()
    assert snippet.url == "https://www.fda.gov/ivermectin" and snippet.confirmation == "pending"
    # The post page shows the X data too.
    assert "A pill bottle" in contributor_client.get(f"/posts/{xp.post_id}/").content.decode()


def test_writer_page_is_for_admins_and_fetch_now_queues_one_run(x_api: FakeX, admin_client: CsrfClient,
                                                                 contributor_client: CsrfClient) -> None:  # fmt: skip
    assert contributor_client.get("/x/writer/").status_code == 403
    page = admin_client.get("/x/writer/").content.decode()
    assert (
        "ClaimOpinion high" in page
        and "Writing limit: <strong>10</strong>" in page
        and "T &lt; 20 (new writer)" in page
    )
    admin_client.post("/x/writer/fetch/")
    admin_client.post("/x/writer/fetch/")
    run = XFetchRun.objects.get()
    assert OutboxMessage.objects.filter(task_name="xnotes.tasks.x_fetch_eligible", args=[run.pk]).count() == 1
    page = admin_client.get("/x/writer/").content.decode()
    assert 'id="x-fetch-progress"' in page and 'hx-trigger="every 2s"' in page


def test_only_admins_and_x_writers_propose(x_api: FakeX, make_user: Any, contributor_client: CsrfClient) -> None:
    note = proposable_note()
    assert contributor_client.get(f"/x/notes/{note.pk}/propose/").status_code == 403
    writer = make_user("wendy", "Contributor")
    writer.groups.add(Group.objects.get(name=X_WRITER))
    client = CsrfClient()
    client.force_login(writer)
    page = client.get(f"/x/notes/{note.pk}/propose/").content.decode()
    # No ratings and no judge reasoning: the note's classification, no reason ticked for the person.
    assert re.search(r'value="misinformed_or_potentially_misleading"[^>]*checked', page)
    assert not re.search(r'name="tags"[^>]*checked', page)
    assert "neither the ratings' tags nor the judges' reasoning name one of X's reasons" in page
    response = client.post(f"/x/notes/{note.pk}/propose/", {"classification": "misinformed_or_potentially_misleading",
                                                           "tags": ["factual_error"]})  # fmt: skip
    assert response.status_code == 302
    proposal = XProposal.objects.get()
    assert (proposal.requested_by, proposal.misleading_tags, proposal.test_mode) == (writer, ["factual_error"], True)
    assert OutboxMessage.objects.filter(task_name="xnotes.tasks.x_propose_note", args=[proposal.pk]).exists()
    proposals.proposal_send(proposal_id=proposal.pk, client=XClient())
    written_notes.sync_written(client=XClient())
    page = client.get(f"/x/notes/{note.pk}/propose/").content.decode()
    assert "Proposed to X" in page and XProposal.objects.get().x_note_id in page and "UrlValidity" in page


def test_propose_form_is_prefilled_from_the_judges_and_the_ratings_tags(
    x_api: FakeX, make_user: Any, admin_client: CsrfClient
) -> None:
    note = proposable_note()
    run = JudgeRun.objects.get(note=note)
    for stage, verdict, reasoning in [
        ("relevance", "yes", "The evidence contradicts the post's claim that the vaccine causes autism."),
        ("correctness", "yes", "Nothing in the note is false."),
        ("helpfulness", "no", "The post leaves out important context."),  # failed: not used
    ]:
        JudgeDecision.objects.create(run=run, note=note, content_hash="c", stage=stage, verdict=verdict,
                                     reasoning=reasoning, judge_kind="llm", judge_name="m")  # fmt: skip
    for i, tags in enumerate([["helpfulImportantContext"], ["helpfulClear"]]):
        rater = participant_for_user(user=make_user(f"r{i}", "Rater"))
        Rating.objects.create(note=note, rater=rater, level="HELPFUL", tags=tags)
    page = admin_client.get(f"/x/notes/{note.pk}/propose/").content.decode()
    ticked = re.findall(r'name="tags" value="([a-z_]+)"[^>]*checked', page)
    assert ticked == ["factual_error", "missing_important_context"]
    prefill = page[page.index('id="x-prefill"') :]
    assert "1 of 2 ratings say the note provides important context" in prefill
    assert "the relevance judge wrote" in prefill and "contradicts the post" in prefill
    assert "correctness" not in prefill.split("</div>")[0] and "leaves out" not in prefill
    # A judge's verdict overridden to "no" by an admin no longer counts.
    JudgeDecision.objects.filter(stage="relevance").update(override_verdict="no")
    page = admin_client.get(f"/x/notes/{note.pk}/propose/").content.decode()
    assert re.findall(r'name="tags" value="([a-z_]+)"[^>]*checked', page) == ["missing_important_context"]


def test_note_page_and_my_notes_show_the_proposal(
    x_api: FakeX, contributor: Any, contributor_client: CsrfClient
) -> None:
    note = proposable_note()
    note.author = participant_for_user(user=contributor)
    note.save()
    page = contributor_client.get(f"/me/notes/{note.pk}/").content.decode()
    assert "Admins and X writers can propose" in page
    proposal, _ = proposals.proposal_request(note=note, user=None, classification="not_misleading", tags=[])
    proposals.proposal_send(proposal_id=proposal.pk, client=XClient())
    written_notes.sync_written(client=XClient())
    written = XWrittenNote.objects.get()
    page = contributor_client.get(f"/me/notes/{note.pk}/").content.decode()
    assert written.x_note_id in page and "HarassmentAbuse" in page and "test mode" in page
    mine = contributor_client.get("/me/notes/").content.decode()
    assert f"note {written.x_note_id}" in mine and "ClaimOpinion High" in mine


def test_preflight_on_an_x_post_asks_xs_evaluator(
    x_api: FakeX, contributor: Any, contributor_client: CsrfClient
) -> None:
    xp, check = _x_preflight(contributor, "No: https://www.fda.gov/x")
    # judging queues xnotes' task by name (the upward call); the task queues X's evaluator.
    assert OutboxMessage.objects.filter(task_name="xnotes.tasks.x_preflight_evaluate", args=[check.pk]).exists()
    evaluate = OutboxMessage.objects.filter(
        task_name="xnotes.tasks.x_evaluate", args=[xp.post_id, "No: https://www.fda.gov/x"]
    )
    assert not evaluate.exists()
    x_preflight_evaluate(check.pk)
    assert evaluate.exists()
    url = f"/judging/preflight/{check.pk}/"
    poll = f'hx-get="{url}" hx-trigger="every 1s"'
    refresh = '<noscript><meta http-equiv="refresh" content="3"></noscript>'
    # The judges are done but X has not answered: the page keeps polling (htmx) and refreshing (no JS).
    PreflightCheck.objects.filter(pk=check.pk).update(state="done", result={"stages": [], "helpful": True})
    page = contributor_client.get(url).content.decode()
    assert "Asked X's evaluator" in page and poll in page and refresh in page
    fragment = contributor_client.get(url, headers={"HX-Request": "true"}).content.decode()
    assert poll in fragment and 'data-state="waiting"' in fragment
    XEvaluation.objects.create(post=xp.post, text_hash=sha256_hex("No: https://www.fda.gov/x"),
                               note_text="No: https://www.fda.gov/x", claim_opinion_score=0.81)  # fmt: skip
    # X's score is in and so are the judges: the fragment carries the score and stops polling.
    fragment = contributor_client.get(url, headers={"HX-Request": "true"}).content.decode()
    assert 'id="x-claim-opinion-score">0.81<' in fragment and "hx-get" not in fragment
    page = contributor_client.get(url).content.decode()
    assert 'id="x-claim-opinion-score">0.81<' in page and poll not in page and refresh not in page


def test_preflight_evaluate_queues_nothing_off_x_without_credentials_or_when_answered(
    x_api: FakeX, contributor: Any
) -> None:
    evaluate = OutboxMessage.objects.filter(task_name="xnotes.tasks.x_evaluate")
    plain = Post.objects.create(text="Ivermectin cures COVID.", text_hash="plain")  # not on X
    off_x = preflight_request(user=contributor, post_text=plain.text, note_text="No.",
                              draft_job_id=DraftJob.objects.create(post=plain, contributor=contributor).pk)  # fmt: skip
    x_preflight_evaluate(off_x.pk)
    no_draft = preflight_request(user=contributor, post_text=plain.text, note_text="No.")
    assert not OutboxMessage.objects.filter(task_name="xnotes.tasks.x_preflight_evaluate", args=[no_draft.pk]).exists()
    xp, answered = _x_preflight(contributor, "No: https://x.org/")
    XEvaluation.objects.create(post=xp.post, text_hash=sha256_hex("No: https://x.org/"),
                               note_text="No: https://x.org/", claim_opinion_score=0.5)  # fmt: skip
    x_preflight_evaluate(answered.pk)
    assert not evaluate.exists()
    fresh = preflight_request(user=contributor, post_text=xp.post.text, note_text="No: https://www.fda.gov/y",
                              draft_job_id=answered.draft_job_id)  # fmt: skip
    with override_settings(X_ACCESS_TOKEN_SECRET=""):
        x_preflight_evaluate(fresh.pk)
    assert not evaluate.exists()
    x_preflight_evaluate(fresh.pk)
    assert list(evaluate.values_list("args", flat=True)) == [[xp.post_id, "No: https://www.fda.gov/y"]]


def test_preflight_polls_while_the_judges_work_and_shows_xs_score_meanwhile(
    x_api: FakeX, contributor: Any, contributor_client: CsrfClient
) -> None:
    text = "No: https://www.fda.gov/x"
    xp, check = _x_preflight(contributor, text)
    XEvaluation.objects.create(post=xp.post, text_hash=sha256_hex(text), note_text=text, claim_opinion_score=0.4)
    fragment = contributor_client.get(
        f"/judging/preflight/{check.pk}/", headers={"HX-Request": "true"}
    ).content.decode()
    assert "hx-get" in fragment and "Queued" in fragment  # the judges have not run yet
    assert 'id="x-claim-opinion-score">0.40<' in fragment


def test_preflight_stops_polling_when_x_never_answers(
    x_api: FakeX, contributor: Any, contributor_client: CsrfClient
) -> None:
    _, check = _x_preflight(contributor, "No: https://x.org/")
    asked = timezone.now() - dt.timedelta(seconds=PREFLIGHT_WAIT_S + 60)
    PreflightCheck.objects.filter(pk=check.pk).update(
        state="done", result={"stages": [], "helpful": True}, created_at=asked
    )
    page = contributor_client.get(f"/judging/preflight/{check.pk}/").content.decode()
    assert "hx-get" not in page and 'http-equiv="refresh"' not in page
    assert f"has not answered within {PREFLIGHT_WAIT_S // 60} minutes" in page


def test_preflight_without_x_credentials_does_not_wait_for_x(
    x_api: FakeX, no_x_credentials: None, contributor: Any, contributor_client: CsrfClient
) -> None:
    _, check = _x_preflight(contributor, "No: https://x.org/")
    PreflightCheck.objects.filter(pk=check.pk).update(state="done", result={"stages": [], "helpful": True})
    page = contributor_client.get(f"/judging/preflight/{check.pk}/").content.decode()
    assert "X is not connected" in page and "hx-get" not in page


def test_preflight_says_which_mode_is_on(
    x_api: FakeX, settings: Any, contributor: Any, contributor_client: CsrfClient
) -> None:
    text = "No: https://www.fda.gov/x"
    xp, check = _x_preflight(contributor, text)
    XEvaluation.objects.create(post=xp.post, text_hash=sha256_hex(text), note_text=text, claim_opinion_score=0.6)
    url = f"/judging/preflight/{check.pk}/"

    def panel(page: str) -> str:
        return page[page.index('id="x-preflight"') :].split("</div>")[0]

    shown = panel(contributor_client.get(url).content.decode())
    assert 'id="x-mode"' in shown and "<strong>test mode</strong>" in shown and "0.60" in shown
    settings.X_TEST_MODE = False
    shown = panel(contributor_client.get(url, headers={"HX-Request": "true"}).content.decode())
    assert "<strong>live mode</strong>" in shown and "test mode" not in shown


def test_live_mode_sync_stores_status_and_ratings_and_pages_say_live(
    x_api: FakeX, settings: Any, contributor: Any, contributor_client: CsrfClient, admin_client: CsrfClient
) -> None:
    settings.X_TEST_MODE = False
    x_api.live_allowed = True
    note = proposable_note()
    note.author = participant_for_user(user=contributor)
    note.save()
    proposal, _ = proposals.proposal_request(note=note, user=None, classification="not_misleading", tags=[])
    sent = proposals.proposal_send(proposal_id=proposal.pk, client=XClient())
    assert x_api.of("/2/notes", "POST")[0].body["test_mode"] is False
    counts = {"helpful": 12, "somewhat_helpful": 3, "not_helpful": 1}
    x_api.rate_note(sent.x_note_id, status="currently_rated_helpful", ratings=counts)
    x_api.notes.insert(0, {"id": "1940000000000000000", "info": {"post_id": "1800000000000000000"},
                           "status": "needs_more_ratings", "test_result": {"evaluation_outcome": x_api.outcomes}})  # fmt: skip
    stats = written_notes.sync_written(client=XClient())
    assert x_api.of("/2/notes/search/notes_written")[-1].params["test_mode"] == "false"
    assert stats.notes == 1  # the test-mode note is not listed in live mode
    written = XWrittenNote.objects.get()
    assert (written.x_note_id, written.test_mode, written.status) == (sent.x_note_id, False, "currently_rated_helpful")
    assert written.ratings == counts and written.outcomes == []
    page = contributor_client.get(f"/me/notes/{note.pk}/").content.decode()
    assert "Status on X: <strong>currently_rated_helpful</strong>" in page
    assert all(f"{k} {v}" in page for k, v in counts.items())
    assert "<strong>live mode</strong>" in page and "live (shown to contributors on X)" in page
    assert "status on X: currently_rated_helpful" in contributor_client.get("/me/notes/").content.decode()
    for url in ("/x/queue/", "/x/writer/"):
        shown = admin_client.get(url).content.decode()
        assert "<strong>live mode</strong>" in shown and "<strong>test mode</strong>" not in shown


def test_from_x_pages_newest_first_by_the_posts_time_on_x(x_api: FakeX, contributor_client: CsrfClient) -> None:
    import datetime as dt

    from django.utils import timezone

    from xnotes import views

    base = timezone.now() - dt.timedelta(days=30)
    for i in range(views.QUEUE_PAGE + 5):  # one fetch: the same first_seen_at for every post
        xp = _xpost(f"19000000000000{i:05d}", f"Claim number {i:03d} about ivermectin.")
        Post.objects.filter(pk=xp.post_id).update(posted_at=base + dt.timedelta(hours=i))
    first = contributor_client.get("/x/queue/")
    shown = [xp.post.text for xp in first.context["posts"]]
    newest = views.QUEUE_PAGE + 4
    assert shown[0] == f"Claim number {newest:03d} about ivermectin." and len(shown) == views.QUEUE_PAGE
    assert 'href="?page=2">Older posts' in first.content.decode()
    second = contributor_client.get("/x/queue/", {"page": "2"})
    assert [xp.post.text for xp in second.context["posts"]][-1] == "Claim number 000 about ivermectin."
    assert 'href="?page=1">Newer posts' in second.content.decode()


def test_hydrate_and_sync_buttons_queue_one_run_each_for_admins_and_show_progress(
    x_api: FakeX, admin_client: CsrfClient, contributor_client: CsrfClient
) -> None:
    """Filling imported posts' text and following notes back have buttons. The web request only
    records a run and queues its task (no X request); the page polls while it runs."""
    assert contributor_client.post("/x/writer/hydrate/").status_code == 403
    assert contributor_client.post("/x/writer/sync/").status_code == 403
    for url, task in (("/x/writer/hydrate/", "x_hydrate_posts"), ("/x/writer/sync/", "x_sync_written")):
        admin_client.post(url)
        admin_client.post(url)  # a second press while it runs: the same run
        run = XTaskRun.objects.get(kind=url.split("/")[-2])
        assert run.state == XTaskRun.State.QUEUED
        assert OutboxMessage.objects.filter(task_name=f"xnotes.tasks.{task}", args=[run.pk]).count() == 1
    assert x_api.requests == []
    page = admin_client.get("/x/writer/").content.decode()
    assert 'id="x-hydrate-progress"' in page and 'id="x-sync-progress"' in page
    assert 'hx-trigger="every 2s"' in page  # htmx polls the runs' progress …
    assert '<noscript><meta http-equiv="refresh"' in page and ">Refresh</a>" in page  # … and without JS
    assert re.search(r'<button type="submit" id="x-hydrate-now"\s+disabled', page)
    fragment = admin_client.get("/x/writer/", headers={"HX-Request": "true"}).content.decode()
    assert fragment.lstrip().startswith('<div id="x-live"') and "x-sync-runs" in fragment


def test_hydrate_and_sync_buttons_do_nothing_without_credentials(
    no_x_credentials: None, admin_client: CsrfClient
) -> None:
    page = admin_client.get("/x/writer/").content.decode()
    assert "Fill imported posts' text now" not in page and "Follow notes back now" not in page
    assert admin_client.post("/x/writer/hydrate/").status_code == 302
    assert admin_client.post("/x/writer/sync/").status_code == 302
    assert not XTaskRun.objects.exists()


def test_the_note_pages_x_panel_polls_with_the_judges_and_offers_the_proposal_when_they_finish(
    x_api: FakeX, admin_user: Any, admin_client: CsrfClient
) -> None:
    """The X panel is part of the note page's polled section, so the poll that sees the judges
    finish brings the propose link with it (no "judges have not finished" until a reload)."""
    note = proposable_note(judged=False)
    note.author = participant_for_user(user=admin_user)
    note.save()
    run = JudgeRun.objects.create(note=note, content_hash="c", state=JudgeRun.State.RUNNING)
    live = admin_client.get(f"/me/notes/{note.pk}/", headers={"HX-Request": "true"}).content.decode()
    assert 'id="live" hx-get=' in live and 'id="x-note-panel"' in live
    assert "The judges have not finished on this note." in live and "x-propose-link" not in live
    JudgeRun.objects.filter(pk=run.pk).update(state=JudgeRun.State.DONE, helpful=True)
    live = admin_client.get(f"/me/notes/{note.pk}/", headers={"HX-Request": "true"}).content.decode()
    assert 'id="x-propose-link"' in live and "The judges have not finished" not in live


def test_the_writer_pages_polled_section_shows_what_a_finished_sync_stored(
    x_api: FakeX, admin_client: CsrfClient, django_capture_on_commit_callbacks: Any
) -> None:
    """The figures read from stored notes and runs are in the section the page re-reads while a run
    works: when the sync ends, its last poll replaces the "never synced" the page opened with."""
    from xnotes.tasks import x_sync_written

    for i in range(60):
        x_api.notes.insert(0, {"id": str(1940000000000000000 + (i << 22)), "info": {"post_id": str(1800000000000000000 + i)},
                               "status": "needs_more_ratings", "test_result": {"evaluation_outcome": x_api.outcomes}})  # fmt: skip
    for i in range(3):  # imported posts with an X id and no text
        Post.objects.create(
            text="", text_available=False, text_hash=f"imported-{i}", external_id=str(1700000000000000000 + i)
        )
    opened = admin_client.get("/x/writer/").content.decode()
    assert "never synced" in opened and 'id="x-admission-n">0<' in opened
    with django_capture_on_commit_callbacks(execute=False):
        admin_client.post("/x/writer/sync/")
    x_sync_written(XTaskRun.objects.get(kind="sync").pk)  # what the worker runs
    fragment = admin_client.get("/x/writer/", headers={"HX-Request": "true"}).content.decode()
    assert fragment.lstrip().startswith('<div id="x-live"')
    assert "never synced" not in fragment and "last synced" in fragment
    assert 'id="x-admission-n">50<' in fragment and "60 test-mode and 0 live notes stored" in fragment
    # Both "without text" figures are the one count of the same moment.
    assert fragment.count("3 without text now") == 1 and "the posts that have an X id but no text: 3 now" in fragment
