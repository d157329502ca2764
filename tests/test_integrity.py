"""Integrity under attack: each attack reproduced as a person would try it, and refused or
handled. State transitions, the blind comparison, the admin log-in's limit, the per-user limits on
POSTs that start work, sliding windows and length caps."""

from __future__ import annotations

from typing import Any

import pytest

from crowdnotes_site.models import OutboxMessage
from evidence.models import Snippet
from notes.models import DraftJob, Note
from tests.conftest import CsrfClient
from tests.notes.factories import make_failed_snippet, make_job, make_ready_snippet

pytestmark = pytest.mark.django_db

PASSAGE = "Controlled trials found that vitamin C supplements do not prevent the flu in the general population."


def _submitted_note(client: Any, contributor: Any) -> tuple[Note, Snippet]:
    job = make_job(contributor)
    snippet = make_ready_snippet(job, "https://a.example/1", PASSAGE)
    assert client.post(f"/snippets/{snippet.pk}/confirm/").status_code == 302
    DraftJob.objects.filter(pk=job.pk).update(state=DraftJob.State.DRAFTED, draft_text="Machine draft.")
    assert (
        client.post(f"/drafts/{job.pk}/submit/", {"text": "Trials show vitamin C does not prevent flu."}).status_code
        == 302
    )
    snippet.refresh_from_db()
    return Note.objects.get(), snippet


# --- 1. A retry that erased a submitted note's evidence -------------------------------------------


def test_a_retry_on_a_submitted_notes_snippet_is_refused_and_changes_nothing(
    contributor_client: Any, contributor: Any
) -> None:
    note, snippet = _submitted_note(contributor_client, contributor)
    before = (snippet.state, snippet.confirmation, snippet.passage_id, snippet.confirmed_text_hash)
    assert before[:2] == (Snippet.State.READY, Snippet.Confirmation.CONFIRMED) and before[2] is not None
    queued = OutboxMessage.objects.count()
    response = contributor_client.post(f"/snippets/{snippet.pk}/retry/", follow=True)
    assert response.status_code == 200
    assert "This note was already submitted" in response.content.decode()
    snippet.refresh_from_db()
    assert (snippet.state, snippet.confirmation, snippet.passage_id, snippet.confirmed_text_hash) == before
    assert OutboxMessage.objects.count() == queued  # nothing re-queued
    # Nor may it be reviewed again or removed.
    for action in ("reject", "remove"):
        contributor_client.post(f"/snippets/{snippet.pk}/{action}/")
    snippet.refresh_from_db()
    assert snippet.confirmation == Snippet.Confirmation.CONFIRMED
    assert list(note.snippets.all()) == [snippet]


def test_a_retry_is_allowed_only_from_a_failed_fetch(contributor_client: Any, contributor: Any) -> None:
    job = make_job(contributor)
    ready = make_ready_snippet(job, "https://a.example/1", PASSAGE)
    failed = make_failed_snippet(job, "https://gone.example.org/page")
    html = contributor_client.post(f"/snippets/{ready.pk}/retry/", follow=True).content.decode()
    assert "Only a source whose fetch failed can be retried." in html
    ready.refresh_from_db()
    assert ready.state == Snippet.State.READY and ready.passage_id is not None
    assert contributor_client.post(f"/snippets/{failed.pk}/retry/").status_code == 302
    failed.refresh_from_db()
    assert failed.state == Snippet.State.QUEUED
    # Queued now, not failed: a second retry is refused.
    html = contributor_client.post(f"/snippets/{failed.pk}/retry/", follow=True).content.decode()
    assert "Only a source whose fetch failed can be retried." in html


def test_a_retry_counts_against_the_cap_on_waiting_pages(
    contributor_client: Any, contributor: Any, settings: Any
) -> None:
    settings.MAX_QUEUED_EVIDENCE_PER_USER = 2
    job = make_job(contributor)
    for i in range(2):
        Snippet.objects.create(post=job.post, draft_job=job, url=f"https://q.example/{i}", position=i)
    failed = make_failed_snippet(job, "https://gone.example.org/page")
    html = contributor_client.post(f"/snippets/{failed.pk}/retry/", follow=True).content.decode()
    assert "at most 2 may wait at once" in html
    failed.refresh_from_db()
    assert failed.state == Snippet.State.FAILED


def test_retries_are_rate_limited_per_user(contributor_client: Any, contributor: Any, settings: Any) -> None:
    settings.RATE_LIMITS = {**settings.RATE_LIMITS, "retry": "3/h"}
    settings.MAX_QUEUED_EVIDENCE_PER_USER = 100
    job = make_job(contributor)
    failed = [make_failed_snippet(job, f"https://gone.example.org/{i}") for i in range(4)]
    for snippet in failed[:3]:
        assert contributor_client.post(f"/snippets/{snippet.pk}/retry/").status_code == 302
    response = contributor_client.post(f"/snippets/{failed[3].pk}/retry/")
    assert response.status_code == 429
    assert "Too many retries: at most 3 per hour." in response.content.decode()
    failed[3].refresh_from_db()
    assert failed[3].state == Snippet.State.FAILED


# --- 3. The Django admin's log-in had no rate limit ----------------------------------------------


def test_the_admin_login_answers_429_after_the_same_number_of_tries_as_the_sites(settings: Any) -> None:
    settings.RATE_LIMITS = {**settings.RATE_LIMITS, "login": "30/m"}

    def spray(path: str, ip: str) -> list[int]:
        client = CsrfClient()
        client.get(path)  # the CSRF cookie, as a browser gets it
        return [
            client.post(path, {"username": f"user-{i}", "password": "wrong"}, REMOTE_ADDR=ip).status_code
            for i in range(40)
        ]

    site = spray("/accounts/login/", "203.0.113.7")
    admin = spray("/django-admin/login/", "203.0.113.8")
    assert site.index(429) == 30
    assert admin == site  # 200 for the first 30, then 429
    assert set(admin[30:]) == {429}


# --- 2. The blind comparison was not blind ------------------------------------------------------


def test_the_post_page_hides_the_pair_during_an_open_comparison(make_user: Any) -> None:
    from django.urls import reverse

    from notes.models import SupernoteComparison, SupernoteRun
    from notes.roles import ADMIN, RATER
    from tests.notes.supernotes.test_comparison import WEAK_TEXT, _answer, _pair

    post, supernote, best, _ = _pair(make_user)
    SupernoteRun.objects.create(post=post, state=SupernoteRun.State.DONE, proposed_note=supernote)
    rater = make_user("rater-blind", RATER, ADMIN)  # an admin too: even the run's summary stays hidden
    client = CsrfClient()
    client.force_login(rater)
    page_url = reverse("post_detail", args=[post.pk])
    assert '<span class="origin">Supernote</span>' in client.get(page_url).content.decode()  # no comparison yet
    started = client.post(reverse("comparison_start", args=[post.pk]))
    assert started.status_code == 302
    item = SupernoteComparison.objects.get(rater__user=rater)
    assert client.get(started["Location"]).status_code == 200  # GET /compare/<id>/: Note A and Note B
    page = client.get(page_url).content.decode()
    # Neither note of the pair is listed (showing one would single out the other); the third note is.
    assert supernote.text not in page and best.text not in page and WEAK_TEXT in page
    assert page.count('<span class="origin">') == 1
    assert "Proposed Supernote" not in page
    assert "2 notes of this post are hidden from you" in page and reverse("comparison", args=[item.pk]) in page
    for url in (
        reverse("rating_queue"),
        reverse("rate_note", args=[supernote.pk]),
        reverse("rate_note", args=[best.pk]),
    ):
        assert supernote.text not in client.get(url).content.decode()
    # Once answered, both notes are shown with their origin.
    assert client.post(reverse("comparison", args=[item.pk]), _answer()).status_code == 302
    page = client.get(page_url).content.decode()
    assert '<span class="origin">Supernote</span>' in page and supernote.text in page and best.text in page
    assert "hidden from you" not in page


# --- 6. Sliding windows, per-user limits on POSTs that start work ---------------------------------


def test_limits_slide_a_fourth_supernote_post_within_the_hour_is_refused(settings: Any) -> None:
    """Fixed windows let 3 POSTs at 12:59 and a 4th at 13:01 through; a sliding window does not."""
    from crowdnotes_site.limits import sliding_window_hit

    hour_end = 1_800_000_000 - 1_800_000_000 % 3600 + 3600  # a fixed window's boundary
    for offset in (-60, -50, -40):  # 3 runs in the window's last minute
        assert sliding_window_hit("supernote:user:test", "3/h", now=hour_end + offset) is False
    assert sliding_window_hit("supernote:user:test", "3/h", now=hour_end + 60) is True  # 2 minutes later
    # Once the first leaves the sliding hour, one more is allowed, and refusals did not count.
    assert sliding_window_hit("supernote:user:test", "3/h", now=hour_end - 60 + 3600 + 1) is False
    assert sliding_window_hit("supernote:user:test", "3/h", now=hour_end - 60 + 3600 + 2) is True


def test_write_a_note_from_x_is_limited_per_user(contributor_client: Any, settings: Any) -> None:
    from notes.services import post_create

    settings.RATE_LIMITS = {**settings.RATE_LIMITS, "x_write": "3/h"}
    posts = [post_create(text=f"A claim from X number {i}") for i in range(4)]
    for post in posts[:3]:
        assert contributor_client.post(f"/x/posts/{post.pk}/").status_code == 302
    response = contributor_client.post(f"/x/posts/{posts[3].pk}/")
    assert response.status_code == 429
    assert "Too many notes started from X posts: at most 3 per hour." in response.content.decode()
    assert DraftJob.objects.count() == 3


# --- 6. Start-up and proxy checks ----------------------------------------------------------------


def test_start_up_refuses_an_allow_list_while_site_ports_is_unset(settings: Any) -> None:
    from evidence.checks import evidence_allowed_local

    settings.EVIDENCE_ALLOWED_LOCAL = ["127.0.0.1:8170"]  # the app's own port, SITE_PORTS unset (8000 assumed)
    settings.SITE_PORTS_SET = False
    assert [e.id for e in evidence_allowed_local()] == ["evidence.E003"]
    assert "SITE_PORTS" in evidence_allowed_local()[0].msg
    settings.SITE_PORTS_SET = True
    settings.EVIDENCE_NEVER_LOCAL_PORTS = [8170]
    assert [e.id for e in evidence_allowed_local()] == ["evidence.E002"]
    settings.EVIDENCE_ALLOWED_LOCAL = []
    settings.SITE_PORTS_SET = False
    assert evidence_allowed_local() == []  # nothing allowed: nothing to refuse


@pytest.mark.parametrize(
    ("count", "forwarded", "says"),
    [(0, "198.51.100.7", "TRUSTED_PROXY_COUNT is 0"), (2, "198.51.100.7", "1 X-Forwarded-For entry but")],
)
def test_a_proxy_count_the_requests_contradict_is_logged_loudly(
    settings: Any, caplog: Any, count: int, forwarded: str, says: str
) -> None:
    from crowdnotes_site import clientip

    clientip._reported.clear()
    settings.TRUSTED_PROXY_COUNT = count
    client = CsrfClient()
    with caplog.at_level("ERROR", logger="crowdnotes_site.clientip"):
        for _ in range(3):
            client.post(
                "/accounts/login/", {"username": "x", "password": "y"}, REMOTE_ADDR="10.0.0.2",
                HTTP_X_FORWARDED_FOR=forwarded,
            )  # fmt: skip
    errors = [r for r in caplog.records if r.name == "crowdnotes_site.clientip" and r.levelname == "ERROR"]
    assert len(errors) == 1  # once per process, not once per request
    assert says in errors[0].getMessage()
    clientip._reported.clear()
    caplog.clear()
    settings.TRUSTED_PROXY_COUNT = 1  # right: one proxy, one entry
    client.post("/accounts/login/", {"username": "x", "password": "y"}, REMOTE_ADDR="10.0.0.2",
                HTTP_X_FORWARDED_FOR=forwarded)  # fmt: skip
    assert not [r for r in caplog.records if r.name == "crowdnotes_site.clientip"]


def test_nothing_after_submission_changes_what_was_submitted(contributor_client: Any, contributor: Any) -> None:
    """The draft's own POSTs, after its note was submitted: each refused by its service, nothing changed."""
    note, _ = _submitted_note(contributor_client, contributor)
    job = DraftJob.objects.get()
    before = (job.state, job.draft_text, job.snippets.count(), OutboxMessage.objects.count())
    for path, data in [
        (f"/drafts/{job.pk}/evidence/", {"urls": "https://b.example/2"}),
        (f"/drafts/{job.pk}/find-evidence/", {}),
        (f"/drafts/{job.pk}/draft/", {}),
        (f"/drafts/{job.pk}/discard/", {}),
        (f"/drafts/{job.pk}/submit/", {"text": "A different text, submitted again."}),
    ]:
        contributor_client.post(path, data)
    job.refresh_from_db()
    assert (job.state, job.draft_text, job.snippets.count(), OutboxMessage.objects.count()) == before
    note.refresh_from_db()
    assert note.text == "Trials show vitamin C does not prevent flu."
    assert Note.objects.count() == 1


def test_the_limits_tables_list_every_limited_entry_point_and_its_window(settings: Any) -> None:
    """Done when: the limits table (README → docs/operations/limits.md, and the integrity page's) lists
    every limited entry point, i.e. every rate group, with its variable and its default window."""
    from pathlib import Path

    from crowdnotes_site.limits import ACTIONS, parse_rate

    docs = Path(__file__).resolve().parents[1] / "docs" / "operations"
    limits_rows = [line for line in (docs / "limits.md").read_text().splitlines() if line.startswith("| ")]
    integrity_rows = [line for line in (docs / "integrity.md").read_text().splitlines() if line.startswith("| ")]
    words = {"s": "a second", "m": "a minute", "h": "an hour", "d": "a day"}
    assert set(settings.RATE_LIMITS) == set(ACTIONS)
    for group, rate in settings.RATE_LIMITS.items():
        variable = f"`RATE_LIMIT_{group.upper()}`"
        count, window = parse_rate(rate)
        unit = {1: "s", 60: "m", 3600: "h", 86400: "d"}[int(window)]
        in_limits = [row for row in limits_rows if variable in row]
        assert in_limits and any(f"{count} {words[unit]}" in row for row in in_limits), (group, rate)
        rows = [row for row in integrity_rows if f"`{group}` ({variable})" in row]
        assert rows and all(f"| {count}/{unit} |" in row for row in rows), group
    assert any("/django-admin/login/" in row for row in limits_rows)
    assert any("/django-admin/login/" in row for row in integrity_rows)
