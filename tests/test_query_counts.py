"""The main pages run a fixed number of queries, whatever the number of rows they show (no N+1).

Each test renders a page over a small and a larger data set and asserts the same query count,
and that count exactly, so a new per-row query (or a new query at all) is noticed."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from judging.models import JudgeDecision, JudgeKind, Stage
from notes.models import DraftJob, Note, Participant, Rating, RatingLevel
from notes.services import participant_for_user, post_create
from tests.notes.factories import make_ready_snippet

pytestmark = pytest.mark.django_db


def _queries(fetch: Callable[[], Any]) -> int:
    with CaptureQueriesContext(connection) as captured:
        response = fetch()
    assert response.status_code in (200, 302), response.status_code
    return len(captured)


def _counts(grow: Callable[[int], None], fetch: Callable[[], Any], sizes: tuple[int, int] = (2, 9)) -> list[int]:
    counts = []
    done = 0
    for size in sizes:
        grow(size - done)
        done = size
        fetch()  # warm: sessions, content types and the like are cached after the first request
        counts.append(_queries(fetch))
    return counts


def _authors(n: int) -> list[Participant]:
    start = Participant.objects.count()
    return [Participant.objects.create(external_id=f"author-{start + i}") for i in range(n)]


def _grow_home(n: int) -> None:
    for i, author in enumerate(_authors(n)):
        post = post_create(text=f"Claim number {author.pk} {i}")
        for j in range(3):
            Note.objects.create(post=post, author=author, text=f"Context {j}")


def test_home(anon_client: Any) -> None:
    assert _counts(_grow_home, lambda: anon_client.get("/")) == [3, 3]  # posts, their notes, the hidden count


def test_home_signed_in_with_every_role(make_user: Any) -> None:
    from notes.roles import ADMIN, CONTRIBUTOR, RATER
    from tests.conftest import _client_for

    client = _client_for(make_user("rolf", ADMIN, CONTRIBUTOR, RATER))
    # session, user, the permissions (the nav; one query: crowdnotes_site/permissions.py), the notes their
    # open blind comparisons hide, posts, their notes, the count of imported posts without text the
    # default filter hides
    assert _counts(_grow_home, lambda: client.get("/")) == [7, 7]


def test_home_rendering_its_list_afresh(anon_client: Any) -> None:
    """The list's cached rendering cleared before each request: still no query per post or note."""

    def fetch() -> Any:
        from notes import views

        views._HOME_LISTS.clear()
        return anon_client.get("/")

    assert _counts(_grow_home, fetch) == [3, 3]


def test_post_page(rater_client: Any) -> None:
    post = post_create(text="Vitamin C cures colds.")

    def grow(n: int) -> None:
        for author in _authors(n):
            Note.objects.create(post=post, author=author, text=f"Context by {author.pk}")

    assert _counts(grow, lambda: rater_client.get(f"/posts/{post.pk}/")) == [
        9,
        9,
    ]  # with the Supernote proposal, the X panel and the rater's open blind comparisons


def test_rating_queue(rater_client: Any, rater: Any) -> None:
    participant_for_user(user=rater)

    def grow(n: int) -> None:
        for author in _authors(n):
            post = post_create(text=f"Claim {author.pk}")
            note = Note.objects.create(post=post, author=author, text="Context.")
            Rating.objects.create(note=note, rater=author, level=RatingLevel.HELPFUL)
            # A proposed Supernote beside it: the post is offered for a blind comparison.
            Note.objects.create(post=post, text="Merged context.", origin=Note.Origin.SUPERNOTE)

    # 9: with the blind-comparison offers (posts, their notes, the rater's answered pairs) and the
    # count of notes on imported posts without text the default filter hides; + 1 (living notes):
    # the invitations to rate new versions of notes this rater rated, one query; + 1: the notes the
    # rater's open blind comparisons hide.
    assert _counts(grow, lambda: rater_client.get("/rate/")) == [11, 11]


def test_posting_a_rating(rater_client: Any, rater: Any) -> None:
    participant_for_user(user=rater)
    post = post_create(text="Claim")
    note = Note.objects.create(post=post, author=_authors(1)[0], text="Context.")

    def grow(n: int) -> None:
        for author in _authors(n):
            Rating.objects.create(note=note, rater=author, level=RatingLevel.HELPFUL)

    levels = iter(["HELPFUL", "NOT_HELPFUL"] * 4)
    counts = _counts(grow, lambda: rater_client.post(f"/rate/{note.pk}/", {"level": next(levels)}))
    # 12 + 3: the rating before the change is read, a changed rating withdraws its suggestion,
    # and the version rated is read under the note's row lock (a revision may be publishing); + 1: the
    # notes the rater's open blind comparisons hide (not to be rated until it is answered).
    assert counts == [16, 16]


def test_draft_page_poll(contributor_client: Any, contributor: Any) -> None:
    job = DraftJob.objects.create(post=post_create(text="Bleach cures flu"), contributor=contributor)

    def grow(n: int) -> None:
        start = job.snippets.count()
        for i in range(n):
            make_ready_snippet(job, f"https://example.org/{start + i}", f"Passage {start + i} about bleach and flu.")

    poll = lambda: contributor_client.get(f"/drafts/{job.pk}/?was=collecting", HTTP_HX_REQUEST="true")  # noqa: E731
    assert _counts(grow, poll) == [7, 7]


def _grow_audit(n: int) -> None:
    for author in _authors(n):
        note = Note.objects.create(post=post_create(text=f"Claim {author.pk}"), author=author, text="Context.")
        for stage in (Stage.RELEVANCE, Stage.CORRECTNESS):
            JudgeDecision.objects.create(
                note=note, stage=stage, verdict="yes", judge_kind=JudgeKind.BASELINE, judge_name="lexical",
                content_hash=f"h{note.pk}",
            )  # fmt: skip


def test_audit_list(admin_client: Any) -> None:
    # 6: session, user, permissions (one query), the aggregates' version (newest decision, override, run),
    # the page's decisions, the listed versions' verdicts (a stage an override gated out shows
    # "not reached"). The funnel, agreement, judge names and count come from the worker's cache.
    assert _counts(_grow_audit, lambda: admin_client.get("/judging/audit/")) == [6, 6]


def test_audit_list_computing_its_aggregates(admin_client: Any) -> None:
    """The aggregates' cache cleared before each request: a fixed count too (no query per decision)."""

    def fetch() -> Any:
        from judging import selectors

        selectors._AUDIT_SUMMARIES.clear()
        return admin_client.get("/judging/audit/")

    # The 6 above plus 7 for the aggregates (funnel, crowd agreement, judge names, count of
    # decisions): 13, whatever the number of decisions.
    assert _counts(_grow_audit, fetch) == [13, 13]
