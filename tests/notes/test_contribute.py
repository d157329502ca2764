"""Flagging a post with evidence: validation, duplicates, escaping, CSRF."""

from __future__ import annotations

from typing import Any

import pytest

from evidence.models import Snippet
from notes.models import DraftJob, Post
from tests.notes.factories import make_post
from tests.support.sent_tasks import record_sent

pytestmark = pytest.mark.django_db

GOOD = {"text": "Vitamin C cures the flu.", "urls": "https://www.cdc.gov/flu/\nhttps://www.who.int/flu"}


@pytest.fixture
def no_evidence_tasks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Records the evidence tasks queued instead of running them (these tests are about the form)."""
    return record_sent(monkeypatch, "evidence.tasks.snippet_process")


def test_it_creates_a_post_a_draft_and_one_snippet_per_url(
    contributor_client: Any, contributor: Any, no_evidence_tasks: list[int], django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        response = contributor_client.post("/contribute/", GOOD)
    job = DraftJob.objects.get()
    assert response.status_code == 302
    assert response["Location"] == f"/drafts/{job.pk}/"
    assert job.contributor == contributor
    assert job.post.text == GOOD["text"]
    assert [s.url for s in job.snippets.all()] == GOOD["urls"].split("\n")
    assert sorted(no_evidence_tasks) == sorted(job.snippets.values_list("pk", flat=True))


def test_it_links_a_duplicate_post_instead_of_creating_it_twice(
    contributor_client: Any, no_evidence_tasks: list[int]
) -> None:
    existing = make_post("Vitamin C   cures the FLU.")
    response = contributor_client.post("/contribute/", GOOD, follow=True)
    assert Post.objects.count() == 1
    assert DraftJob.objects.get().post == existing
    assert "already flagged" in response.content.decode()


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"text": "   ", "urls": "https://www.cdc.gov/"}, "This field is required"),
        ({"text": "A claim", "urls": "not a url"}, "is not a valid http(s) URL"),
        ({"text": "A claim", "urls": "ftp://example.org/file"}, "is not a valid http(s) URL"),
        ({"text": "A claim", "urls": "https://a.org/1\nhttps://a.org/1"}, "is listed twice"),
        ({"text": "A claim", "urls": "\n".join(f"https://a.org/{i}" for i in range(6))}, "At most 5 evidence URLs"),
        ({"text": "A claim", "urls": ""}, "Paste at least one evidence URL"),  # unless "Find evidence for me"
    ],
)
def test_it_rejects_bad_input_with_a_clear_message_and_keeps_what_was_typed(
    contributor_client: Any, data: dict[str, str], message: str, no_evidence_tasks: list[int]
) -> None:
    response = contributor_client.post("/contribute/", data)
    html = response.content.decode()
    assert response.status_code == 200
    assert message in html
    assert not Post.objects.exists()
    assert not Snippet.objects.exists()
    if data["text"].strip():
        assert data["text"] in html  # the post text survives the failed submit
    if data["urls"]:
        assert data["urls"].split("\n")[0] in html


def test_it_escapes_html_in_the_post_text_everywhere(
    contributor_client: Any, no_evidence_tasks: list[int], anon_client: Any
) -> None:
    evil = '<script>alert("x")</script><img src=x onerror=alert(1)> Garlic cures flu'
    response = contributor_client.post("/contribute/", {"text": evil, "urls": "https://www.cdc.gov/"}, follow=True)
    post = Post.objects.get()
    for page in (response, anon_client.get("/"), anon_client.get(f"/posts/{post.pk}/")):
        html = page.content.decode()
        assert "<script>alert" not in html
        assert "<img src=x" not in html
        assert "&lt;script&gt;alert" in html


def test_it_refuses_a_post_without_csrf(contributor_client: Any) -> None:
    response = contributor_client.post("/contribute/", GOOD, csrf=False)
    assert response.status_code == 403
    assert not Post.objects.exists()


def test_it_refuses_raters(rater_client: Any) -> None:
    assert rater_client.get("/contribute/").status_code == 403


def test_it_prefills_the_post_when_writing_a_note_on_an_existing_post(contributor_client: Any) -> None:
    post = make_post("Onions in socks draw out the flu.")
    html = contributor_client.get(f"/contribute/?post={post.pk}").content.decode()
    assert "Onions in socks draw out the flu.</textarea>" in html


@pytest.mark.parametrize("text", ["\u200b\u200b\u200b", "\u202e\u2066 \u200d\ufeff", "\u00a0\u2060\n"])
def test_it_refuses_a_post_made_only_of_invisible_characters(
    contributor_client: Any, text: str, no_evidence_tasks: list[int]
) -> None:
    response = contributor_client.post("/contribute/", {"text": text, "urls": "https://www.cdc.gov/"})
    assert response.status_code == 200
    assert "This field is required" in response.content.decode()
    assert not Post.objects.exists()


def test_it_shows_every_error_of_an_empty_submit(contributor_client: Any, no_evidence_tasks: list[int]) -> None:
    response = contributor_client.post("/contribute/", {})
    html = response.content.decode()
    assert response.status_code == 200
    assert "This field is required" in html
    assert "Paste at least one evidence URL" in html
    assert not Post.objects.exists()
