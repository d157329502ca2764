"""Abuse limits: login lockout (django-axes), request rates (sliding windows on Redis), the per-user
cap on evidence pages waiting for the CPU queue, and the messages people see when one is hit."""

from __future__ import annotations

from typing import Any

import pytest

from evidence.models import Snippet
from notes.models import DraftJob, Note, Post, Suggestion
from notes.services import participant_for_user, post_create
from tests.conftest import CsrfClient

pytestmark = pytest.mark.django_db

PASSWORD = "a-long-Passphrase-42"


@pytest.fixture
def member(make_user: Any) -> Any:
    user = make_user("mallory")
    user.set_password(PASSWORD)
    user.save()
    return user


def _login(client: CsrfClient, password: str, username: str = "mallory", ip: str = "203.0.113.7") -> Any:
    return client.post("/accounts/login/", {"username": username, "password": password}, REMOTE_ADDR=ip)


def test_it_locks_out_a_login_after_repeated_wrong_passwords_even_with_the_right_one(
    member: Any, settings: Any
) -> None:
    settings.RATE_LIMITS = {**settings.RATE_LIMITS, "login": "1000/m"}  # the lockout alone, not the rate
    client = CsrfClient()
    statuses = [_login(client, f"wrong-{i}").status_code for i in range(60)]
    assert statuses[: settings.AXES_FAILURE_LIMIT - 1] == [200] * (settings.AXES_FAILURE_LIMIT - 1)
    assert set(statuses[settings.AXES_FAILURE_LIMIT :]) == {429}
    response = _login(client, PASSWORD)
    assert response.status_code == 429
    assert "Log-in temporarily locked" in response.content.decode()
    assert "_auth_user_id" not in client.session
    # The lockout is for that username from that address: the owner elsewhere still gets in.
    elsewhere = CsrfClient()
    assert _login(elsewhere, PASSWORD, ip="198.51.100.20").status_code == 302
    assert elsewhere.session["_auth_user_id"] == str(member.pk)


def test_it_limits_login_attempts_per_address(member: Any, settings: Any) -> None:
    settings.RATE_LIMITS = {**settings.RATE_LIMITS, "login": "5/m"}
    client = CsrfClient()
    for i in range(5):
        assert _login(client, f"wrong-{i}", username=f"someone-{i}").status_code == 200
    response = _login(client, PASSWORD)
    assert response.status_code == 429
    assert "Too many log-in attempts: at most 5 per minute." in response.content.decode()
    assert "_auth_user_id" not in client.session


def test_it_refuses_the_contribution_past_the_rate_with_a_message(
    contributor_client: Any, make_user: Any, settings: Any
) -> None:
    settings.RATE_LIMITS = {**settings.RATE_LIMITS, "contribute": "3/h"}
    for i in range(3):
        response = contributor_client.post("/contribute/", {"text": f"Claim {i}", "urls": f"https://a.org/{i}"})
        assert response.status_code == 302
    response = contributor_client.post("/contribute/", {"text": "Claim 4", "urls": "https://a.org/4"})
    html = response.content.decode()
    assert response.status_code == 429
    assert "Too many flagged posts: at most 3 per hour." in html
    assert "Nothing was saved" in html
    assert Post.objects.count() == 3
    assert contributor_client.get("/contribute/").status_code == 200  # reading the form is not counted
    # Counted per user: another contributor is not held back.
    other = CsrfClient()
    other.force_login(make_user("other-contributor", "Contributor"))
    assert other.post("/contribute/", {"text": "Claim 5", "urls": "https://a.org/5"}).status_code == 302


def test_it_reloads_an_htmx_page_to_show_the_limit_message(
    contributor_client: Any, contributor: Any, settings: Any
) -> None:
    settings.RATE_LIMITS = {**settings.RATE_LIMITS, "draft": "1/h"}
    job = DraftJob.objects.create(post=post_create(text="A claim"), contributor=contributor)
    contributor_client.post(f"/drafts/{job.pk}/draft/", HTTP_HX_REQUEST="true")
    response = contributor_client.post(f"/drafts/{job.pk}/draft/", HTTP_HX_REQUEST="true")
    assert response.status_code == 204
    assert response["HX-Refresh"] == "true"
    page = contributor_client.get(f"/drafts/{job.pk}/").content.decode()
    assert "Too many draft requests: at most 1 per hour." in page


def test_it_limits_ratings_per_rater(rater_client: Any, rater: Any, contributor: Any, settings: Any) -> None:
    settings.RATE_LIMITS = {**settings.RATE_LIMITS, "rating": "2/h"}
    post = post_create(text="A claim about vitamins")
    note = Note.objects.create(post=post, author=participant_for_user(user=contributor), text="Context.")
    for level in ("HELPFUL", "NOT_HELPFUL"):
        assert rater_client.post(f"/rate/{note.pk}/", {"level": level}).status_code == 302
    response = rater_client.post(f"/rate/{note.pk}/", {"level": "HELPFUL"})
    assert response.status_code == 429
    assert "Too many ratings: at most 2 per hour." in response.content.decode()
    assert note.ratings.get().level == "NOT_HELPFUL"


def test_it_limits_suggestions_per_rater(rater_client: Any, rater: Any, contributor: Any, settings: Any) -> None:
    settings.RATE_LIMITS = {**settings.RATE_LIMITS, "suggestion": "2/h"}
    author = participant_for_user(user=contributor)
    post = post_create(text="A claim about vitamins")
    notes = [Note.objects.create(post=post, author=author, text=f"Context {i}.") for i in range(4)]
    suggest = {"level": "HELPFUL", "suggestion": "Cite the 2022 trial."}
    for note in notes[:2]:
        assert rater_client.post(f"/rate/{note.pk}/", suggest).status_code == 302
    response = rater_client.post(f"/rate/{notes[2].pk}/", suggest)
    assert response.status_code == 429
    assert "Too many suggestions: at most 2 per hour." in response.content.decode()
    assert Suggestion.objects.count() == 2 and not notes[2].ratings.exists()
    # A rating without a suggestion counts against the rating limit only.
    assert rater_client.post(f"/rate/{notes[3].pk}/", {"level": "HELPFUL"}).status_code == 302
    assert notes[3].ratings.exists()


def test_it_caps_the_evidence_pages_one_contributor_has_waiting(
    contributor_client: Any, contributor: Any, settings: Any
) -> None:
    settings.MAX_QUEUED_EVIDENCE_PER_USER = 3
    first = contributor_client.post("/contribute/", {"text": "Claim one", "urls": "https://a.org/1\nhttps://a.org/2"})
    assert first.status_code == 302
    response = contributor_client.post(
        "/contribute/", {"text": "Claim two", "urls": "https://b.org/1\nhttps://b.org/2"}
    )
    html = response.content.decode()
    assert response.status_code == 200
    assert "You already have 2 evidence pages waiting to be processed, and at most 3 may wait at once" in html
    assert "Add at most 1 once those are done." in html
    assert list(Post.objects.values_list("text", flat=True)) == ["Claim one"]
    job = DraftJob.objects.get()
    refused = contributor_client.post(f"/drafts/{job.pk}/evidence/", {"urls": "https://c.org/1\nhttps://c.org/2"})
    assert "at most 3 may wait at once" in refused.content.decode()
    assert job.snippets.count() == 2
    # Once the pages are processed, the contributor may add more.
    Snippet.objects.update(state=Snippet.State.READY)
    again = contributor_client.post("/contribute/", {"text": "Claim two", "urls": "https://b.org/1\nhttps://b.org/2"})
    assert again.status_code == 302
    assert DraftJob.objects.filter(contributor=contributor).count() == 2


@pytest.mark.parametrize(
    ("path", "group"),
    [
        ("/accounts/login/", "login"),
        ("/accounts/signup/", "signup"),
        ("/contribute/", "contribute"),
        ("/drafts/1/evidence/", "evidence"),
        ("/drafts/1/find-evidence/", "evidence"),
        ("/drafts/1/draft/", "draft"),
        ("/drafts/1/preflight/", "preflight"),
        ("/judging/preflight/", "preflight"),
        ("/rate/1/", "rating"),
        ("/x/posts/1/", "x_write"),
        ("/supernotes/posts/1/generate/", "supernote"),
    ],
)
def test_every_costly_action_has_its_limit(path: str, group: str) -> None:
    from django.urls import resolve

    assert resolve(path).func.limit_group == group  # type: ignore[attr-defined]


def test_it_limits_sign_ups_per_address(settings: Any) -> None:
    settings.RATE_LIMITS = {**settings.RATE_LIMITS, "signup": "1/h"}
    data = {"password1": PASSWORD, "password2": PASSWORD, "roles": ["Rater"]}
    assert CsrfClient().post("/accounts/signup/", {"username": "first", **data}).status_code == 302
    response = CsrfClient().post("/accounts/signup/", {"username": "second", **data})
    assert response.status_code == 429
    assert "Too many sign-ups from your network: at most 1 per hour." in response.content.decode()
