"""Idempotent contributor actions: one open draft job per (contributor, post),
one draft task per request round, no review buttons on submitted drafts, discarding orphans."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import connection

from crowdnotes_site.models import OutboxMessage
from evidence.models import Snippet
from notes import services
from notes.models import DraftJob, Post
from tests.notes.factories import make_job, make_post, make_ready_snippet

FIRST = {"text": "Vitamin C cures the flu.", "urls": "https://www.cdc.gov/flu/"}
AGAIN = {"text": "Vitamin C cures the flu.", "urls": "https://www.cdc.gov/flu/\nhttps://www.who.int/flu"}


@pytest.mark.django_db
def test_flagging_the_same_post_again_adds_to_the_open_draft_and_says_so(contributor_client: Any) -> None:
    contributor_client.post("/contribute/", FIRST)
    response = contributor_client.post("/contribute/", AGAIN, follow=True)
    job = DraftJob.objects.get()  # not a second draft job
    assert response.redirect_chain[-1][0] == f"/drafts/{job.pk}/"
    assert sorted(job.snippets.values_list("url", flat=True)) == ["https://www.cdc.gov/flu/", "https://www.who.int/flu"]
    page = response.content.decode()
    assert "You already have an open draft on this post: 1 new source added to it (1 it already had)." in page
    assert "your evidence was added" not in page


@pytest.mark.django_db
def test_another_contributor_flagging_a_known_post_starts_their_own_draft(
    contributor_client: Any, make_user: Any
) -> None:
    from notes.roles import CONTRIBUTOR
    from tests.conftest import _client_for

    contributor_client.post("/contribute/", FIRST)
    other = _client_for(make_user("otto", CONTRIBUTOR))
    response = other.post("/contribute/", FIRST, follow=True)
    assert Post.objects.count() == 1
    assert DraftJob.objects.count() == 2
    assert "This post was already flagged; a new draft of your note on it was started." in response.content.decode()


@pytest.mark.django_db
def test_a_submitted_draft_does_not_open_a_second_time_and_a_new_flag_starts_afresh(contributor: Any) -> None:
    job = make_job(contributor)
    DraftJob.objects.filter(pk=job.pk).update(state=DraftJob.State.SUBMITTED)
    done = services.contribution_submit(text=job.post.text, user=contributor, urls=["https://a.org/1"])
    assert done.job_created and done.job.pk != job.pk and not done.post_created


@pytest.mark.django_db(transaction=True)
def test_concurrent_identical_contributions_make_one_post_and_one_draft_job(contributor: Any) -> None:
    barrier = threading.Barrier(4)
    errors: list[BaseException] = []

    def contribute() -> None:
        try:
            barrier.wait()
            services.contribution_submit(text="Garlic cures measles.", user=contributor, urls=["https://a.org/x"])
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=contribute) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert Post.objects.count() == 1
    job = DraftJob.objects.get()
    assert list(job.snippets.values_list("url", flat=True)) == ["https://a.org/x"]


def _ready_job(user: Any) -> DraftJob:
    job = make_job(user, make_post("Onions in socks cure colds."))
    snippet = make_ready_snippet(job, "https://a.org/onion", "Onions do not cure colds.")
    from evidence.snippets import snippet_review

    snippet_review(snippet=snippet, user=user, confirmed=True)
    return job


@pytest.mark.django_db
def test_two_draft_requests_from_the_same_page_queue_one_task(contributor_client: Any, contributor: Any) -> None:
    job = _ready_job(contributor)
    first = contributor_client.post(f"/drafts/{job.pk}/draft/", {"round": "0"})
    assert first.status_code == 302
    services.draft_job_generate(job_id=job.pk)  # the task ran (offline baseline): the job is drafted again
    second = contributor_client.post(f"/drafts/{job.pk}/draft/", {"round": "0"}, follow=True)
    job.refresh_from_db()
    assert job.draft_round == 1
    assert job.state == DraftJob.State.DRAFTED
    assert OutboxMessage.objects.filter(task_name="notes.tasks.draft_generate").count() == 1
    assert "This draft was already requested" in second.content.decode()
    # The page now carries round 1: asking again from it is a new, deliberate request.
    assert 'name="round" value="1"' in second.content.decode()
    services.draft_job_generate(job_id=job.pk)
    contributor_client.post(f"/drafts/{job.pk}/draft/", {"round": "1"})
    job.refresh_from_db()
    assert (job.draft_round, job.state) == (2, DraftJob.State.DRAFTING)


@pytest.mark.django_db(transaction=True)
def test_concurrent_draft_requests_queue_one_task(contributor: Any) -> None:
    job = _ready_job(contributor)
    barrier = threading.Barrier(3)
    outcomes: list[str] = []

    def request() -> None:
        try:
            barrier.wait()
            services.draft_job_request_draft(job=DraftJob.objects.get(pk=job.pk), seen_round=0)
            outcomes.append("queued")
        except services.FlowError:
            outcomes.append("refused")
        finally:
            connection.close()

    threads = [threading.Thread(target=request) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes) == ["queued", "refused", "refused"]
    assert OutboxMessage.objects.filter(task_name="notes.tasks.draft_generate").count() == 1


@pytest.mark.django_db
def test_a_submitted_draft_shows_no_confirm_or_reject(contributor_client: Any, contributor: Any) -> None:
    job = make_job(contributor)
    make_ready_snippet(job, "https://a.org/1", "A passage.")
    page = contributor_client.get(f"/drafts/{job.pk}/").content.decode()
    assert "This passage supports my note" in page  # open: the review buttons are there
    DraftJob.objects.filter(pk=job.pk).update(state=DraftJob.State.SUBMITTED)
    page = contributor_client.get(f"/drafts/{job.pk}/").content.decode()
    assert "This passage supports my note" not in page
    assert ">Reject<" not in page


@pytest.mark.django_db
def test_the_owner_can_discard_an_orphan_draft_and_nobody_else_can(
    contributor_client: Any, contributor: Any, make_user: Any
) -> None:
    from notes.roles import CONTRIBUTOR
    from tests.conftest import _client_for

    job = make_job(contributor)
    Snippet.objects.create(post=job.post, draft_job=job, url="https://a.org/stuck")  # queued, never processed
    other = _client_for(make_user("otto", CONTRIBUTOR))
    assert other.post(f"/drafts/{job.pk}/discard/").status_code == 404
    assert "Discard" in contributor_client.get("/me/notes/").content.decode()
    response = contributor_client.post(f"/drafts/{job.pk}/discard/", follow=True)
    job.refresh_from_db()
    assert job.state == DraftJob.State.DISCARDED
    assert "Draft discarded." in response.content.decode()
    assert job.post.text[:40] not in response.content.decode()  # gone from "My notes"
    assert job.snippets.get().state == Snippet.State.FAILED
    # Flagging the post again opens a new draft.
    done = services.contribution_submit(text=job.post.text, user=contributor, urls=["https://a.org/2"])
    assert done.job_created and done.job.pk != job.pk
