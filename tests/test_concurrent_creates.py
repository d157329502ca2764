"""Every create a request makes is idempotent under concurrency: ten identical POSTs sent at once to
a real server (a double click, a proxy's retry) all answer as the first did, never with a 500, and
leave one row. Each test sends them from ten threads through the live server, each thread with its
own HTTP session carrying the same signed-in session cookie and CSRF token, released together by a
barrier."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import requests
from django.apps import apps as django_apps
from django.conf import settings as django_settings
from django.contrib.auth import get_user_model
from django.middleware.csrf import _get_new_csrf_string
from django.test import Client

from crowdnotes_site.models import OutboxMessage
from evidence.models import Snippet
from notes.models import DraftJob, Note, NoteRequest, Post, Rating, Suggestion, SupernoteComparison, Topic
from notes.roles import CONTRIBUTOR, RATER, X_WRITER, sync_roles
from notes.services import participant_for_user, post_create
from tests.notes.factories import make_job
from tests.notes.supernotes.test_comparison import _answer, _pair
from tests.xnotes.factories import proposable_note
from xnotes import rules
from xnotes.models import XPost, XProposal

pytestmark = pytest.mark.django_db(transaction=True)

N = 10
# A page of the shared corpus as the demo serves it on loopback, and the page it is a copy of:
# the draft stores the original address, so a repeat must be recognised by it too.
LOCAL_COPY = "health/cdc.gov__about-sids.html"
LOCAL_COPIES_URL = "http://127.0.0.1:8001/"
ORIGINAL = "https://www.cdc.gov/vaccine-safety/about/sids.html"
PLAIN = "https://www.who.int/news-room/fact-sheets/detail/sids"


def _post_at_once(live_server: Any, user: Any | None, path: str, data: dict[str, Any]) -> list[tuple[int, str]]:
    """(status, Location) of N identical POSTs of `data` to `path`, released together: one HTTP
    session per thread, all with the same sign-in (one browser, many clicks) and CSRF token."""
    cookies = {django_settings.CSRF_COOKIE_NAME: _get_new_csrf_string()}
    if user is not None:
        client = Client()
        client.force_login(user)
        cookies[django_settings.SESSION_COOKIE_NAME] = client.cookies[django_settings.SESSION_COOKIE_NAME].value
    barrier = threading.Barrier(N)

    def send(_: int) -> tuple[int, str]:
        with requests.Session() as session:
            session.cookies.update(cookies)
            session.headers["X-CSRFToken"] = cookies[django_settings.CSRF_COOKIE_NAME]
            barrier.wait(timeout=30)
            response = session.post(f"{live_server.url}{path}", data=data, allow_redirects=False, timeout=60)
            return response.status_code, response.headers.get("Location", "")

    with ThreadPoolExecutor(max_workers=N) as pool:
        return list(pool.map(send, range(N)))


def _all_answered_as_one(answers: list[tuple[int, str]], location: str) -> None:
    """Every POST was answered as the first: the same redirect (none a 500, none an error page)."""
    assert answers == [(302, location)] * N, answers


@pytest.fixture
def local_copies(settings: Any, shared_data: Path) -> str:
    """The demo's local copies of real pages (only the mapping: nothing is fetched here)."""
    settings.EVIDENCE_LOCAL_COPIES_URL = LOCAL_COPIES_URL
    settings.EVIDENCE_LOCAL_COPIES_MANIFEST = str(shared_data / "webpages" / "manifest.tsv")
    return LOCAL_COPIES_URL + LOCAL_COPY


# --- Contributor -------------------------------------------------------------------------------


def test_it_flags_a_post_once_with_one_draft_and_one_snippet_per_url(
    live_server: Any, make_user: Any, local_copies: str
) -> None:
    contributor = make_user("carla", CONTRIBUTOR)
    text = "Vaccines cause SIDS, the CDC admits it."
    answers = _post_at_once(
        live_server, contributor, "/contribute/", {"text": text, "urls": f"{local_copies}\n{PLAIN}"}
    )
    job = DraftJob.objects.get()
    _all_answered_as_one(answers, f"/drafts/{job.pk}/")
    assert Post.objects.count() == 1
    assert sorted(Snippet.objects.values_list("url", flat=True)) == sorted([ORIGINAL, PLAIN])


def test_it_adds_an_evidence_url_to_a_draft_once(live_server: Any, make_user: Any, local_copies: str) -> None:
    contributor = make_user("carla", CONTRIBUTOR)
    job = make_job(contributor)
    answers = _post_at_once(
        live_server, contributor, f"/drafts/{job.pk}/evidence/", {"urls": f"{local_copies}\n{PLAIN}"}
    )
    _all_answered_as_one(answers, f"/drafts/{job.pk}/")
    assert sorted(job.snippets.values_list("url", flat=True)) == sorted([ORIGINAL, PLAIN])


def test_a_repeat_that_arrives_after_the_first_add_committed_is_answered_as_it(
    make_user: Any, local_copies: str
) -> None:
    """The same paste again once the first add has landed (the late one of a double click): the draft
    holds the local copy's page by its original address, and the repeat is still recognised."""
    contributor = make_user("carla", CONTRIBUTOR)
    job = make_job(contributor)
    client = Client()
    client.force_login(contributor)
    data = {"urls": f"{local_copies}\n{PLAIN}"}
    answers = [client.post(f"/drafts/{job.pk}/evidence/", data) for _ in range(2)]
    assert [(a.status_code, a.headers.get("Location")) for a in answers] == [(302, f"/drafts/{job.pk}/")] * 2
    assert sorted(job.snippets.values_list("url", flat=True)) == sorted([ORIGINAL, PLAIN])


def test_it_starts_one_draft_from_an_x_post(live_server: Any, make_user: Any) -> None:
    contributor = make_user("carla", CONTRIBUTOR)
    x_id = "1900000000000000001"
    post = Post.objects.create(text="Ivermectin cures COVID.", text_hash=x_id, external_id=x_id, topic=Topic.TREATMENTS)
    XPost.objects.create(post=post, x_id=x_id, eligible=True, suggested_source_links=[PLAIN])
    answers = _post_at_once(live_server, contributor, f"/x/posts/{post.pk}/", {})
    job = DraftJob.objects.get()
    _all_answered_as_one(answers, f"/drafts/{job.pk}/")
    assert list(job.snippets.values_list("url", flat=True)) == [PLAIN]


# --- Rater -------------------------------------------------------------------------------------


def _note(make_user: Any) -> Note:
    author = make_user("carla", CONTRIBUTOR)
    post = post_create(text="Vitamin C megadoses cure sepsis.", flagged_by=author)
    return Note.objects.create(
        post=post, author=participant_for_user(user=author),
        text="Trials found no mortality benefit from high-dose vitamin C in sepsis.",
    )  # fmt: skip


def test_it_records_one_rating(live_server: Any, make_user: Any) -> None:
    note = _note(make_user)
    answers = _post_at_once(live_server, make_user("rafa", RATER), f"/rate/{note.pk}/", {"level": "HELPFUL"})
    _all_answered_as_one(answers, "/rate/")
    assert Rating.objects.count() == 1
    note.refresh_from_db()
    assert note.num_ratings == 1


def test_it_records_one_rating_and_one_suggestion_with_one_source(live_server: Any, make_user: Any) -> None:
    note = _note(make_user)
    data = {"level": "SOMEWHAT_HELPFUL", "suggestion": "The trial had 872 patients, not 87.",
            "suggestion_source": PLAIN}  # fmt: skip
    answers = _post_at_once(live_server, make_user("rafa", RATER), f"/rate/{note.pk}/", data)
    _all_answered_as_one(answers, "/me/suggestions/")
    rating = Rating.objects.get()
    suggestion = Suggestion.objects.get()  # one row: a repeat is not a new suggestion replacing the first
    assert (suggestion.rating, suggestion.state, suggestion.source_url) == (rating, Suggestion.State.PENDING, PLAIN)
    assert list(Snippet.objects.filter(draft_job=None).values_list("pk", flat=True)) == [suggestion.snippet_id]


# --- Requests ----------------------------------------------------------------------------------


def test_it_counts_one_note_request(live_server: Any, make_user: Any) -> None:
    post = post_create(text="Garlic cures the flu.")
    answers = _post_at_once(live_server, make_user("rafa", RATER), f"/posts/{post.pk}/request/", {"reason": "Viral."})
    _all_answered_as_one(answers, f"/posts/{post.pk}/")
    assert NoteRequest.objects.count() == 1


def test_it_counts_one_note_request_by_link_on_one_post(live_server: Any, make_user: Any) -> None:
    data = {"reference": "https://x.com/someone/status/1930672414444372186", "reason": ""}
    answers = _post_at_once(live_server, make_user("rafa", RATER), "/requested/by-link/", data)
    post = Post.objects.get()
    _all_answered_as_one(answers, f"/posts/{post.pk}/")
    assert NoteRequest.objects.count() == 1


# --- Supernote comparison ----------------------------------------------------------------------


def test_it_assigns_one_comparison_and_stores_one_answer(live_server: Any, make_user: Any) -> None:
    post, *_ = _pair(make_user)
    rater = make_user("rafa", RATER)
    answers = _post_at_once(live_server, rater, f"/compare/posts/{post.pk}/", {})
    item = SupernoteComparison.objects.get()
    _all_answered_as_one(answers, f"/compare/{item.pk}/")

    answers = _post_at_once(live_server, rater, f"/compare/{item.pk}/", _answer("A", a=5, b=1))
    _all_answered_as_one(answers, "/rate/")
    item.refresh_from_db()
    assert item.answered_at is not None and item.supernote_preferred is item.supernote_first
    assert SupernoteComparison.objects.count() == 1


# --- X -----------------------------------------------------------------------------------------


def test_it_proposes_a_note_to_x_once(live_server: Any, make_user: Any, settings: Any) -> None:
    for name in ("X_API_KEY", "X_API_KEY_SECRET", "X_ACCESS_TOKEN", "X_ACCESS_TOKEN_SECRET", "X_BEARER_TOKEN"):
        setattr(settings, name, "set-for-the-test")  # configured; nothing is sent (no worker runs here)
    settings.X_TEST_MODE = True
    note = proposable_note()
    writer = make_user("wendy", CONTRIBUTOR, X_WRITER)
    data = {"classification": rules.MISLEADING, "tags": ["factual_error"]}
    answers = _post_at_once(live_server, writer, f"/x/notes/{note.pk}/propose/", data)
    _all_answered_as_one(answers, f"/x/notes/{note.pk}/propose/")
    proposal = XProposal.objects.get()
    assert OutboxMessage.objects.filter(task_name="xnotes.tasks.x_propose_note", args=[proposal.pk]).count() == 1


# --- Sign-up -----------------------------------------------------------------------------------


def test_it_signs_up_once_and_tells_the_repeats_the_name_is_taken(live_server: Any, settings: Any) -> None:
    # A repeat is told the name is taken rather than signed in: signing it in would make the sign-up
    # form a password check outside the log-in lockout.
    sync_roles(django_apps)
    settings.RATE_LIMITS = {**settings.RATE_LIMITS, "signup": "100/h"}
    data = {"username": "newcomer", "email": "newcomer@example.org", "password1": "a-long-pass-phrase-42",
            "password2": "a-long-pass-phrase-42", "roles": [CONTRIBUTOR, RATER]}  # fmt: skip
    answers = _post_at_once(live_server, None, "/accounts/signup/", data)
    assert sorted(answers) == [(200, "")] * (N - 1) + [(302, "/")], answers
    user = get_user_model().objects.get()
    assert sorted(user.groups.values_list("name", flat=True)) == sorted([CONTRIBUTOR, RATER])
