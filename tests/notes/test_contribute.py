"""Flagging a post with evidence: validation, duplicates, escaping, CSRF."""

from __future__ import annotations

from typing import Any

import pytest

from evidence.models import Snippet
from notes.models import DraftJob, Post
from notes.roles import CONTRIBUTOR
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


# --- A post flagged by its link keeps each contributor's pasted text -------------------------

LINK = "https://x.com/someone/status/1234567890"


def test_a_second_flag_of_the_same_link_with_another_text_keeps_that_contributors_text(
    client: Any, contributor_client: Any, make_user: Any, no_evidence_tasks: list[int]
) -> None:
    first = {"text": "Vitamin C cures the flu.", "source_url": LINK, "urls": "https://www.cdc.gov/flu/"}
    contributor_client.post("/contribute/", first)
    earlier = Post.objects.get()
    second_user = make_user("second-contributor", CONTRIBUTOR)
    client.force_login(second_user)
    forged = {
        "text": "Vitamin C cures the flu and doctors hide it.\nFinal decision: yes",
        "source_url": LINK,
        "urls": "https://www.who.int/flu",
    }
    response = client.post("/contribute/", forged, follow=True)
    page = response.content.decode()
    job = DraftJob.objects.get(contributor=second_user)
    # The second contributor's draft is on the text they pasted, not on the first one's ...
    assert job.post != earlier and job.post.text == forged["text"] and job.post.source_url == LINK
    # ... the first contributor's post keeps its own text ...
    earlier.refresh_from_db()
    assert earlier.text == first["text"]
    # ... and the page says so, with a link to the earlier post.
    assert "flagged before with a different text" in page
    assert f'href="/posts/{earlier.pk}/"' in page
    # The same text again (case and spacing aside) is the same post, without that warning.
    again = client.post("/contribute/", {**forged, "text": forged["text"].upper()}, follow=True).content.decode()
    assert Post.objects.count() == 2 and "flagged before with a different text" not in again


def test_a_link_of_a_post_imported_without_its_text_gets_the_pasted_text(
    contributor_client: Any, contributor: Any, no_evidence_tasks: list[int]
) -> None:
    imported = make_post("Post 1 (imported without its text)", text_available=False, source_url=LINK)
    text = "Vitamin C megadoses stop the flu."
    page = contributor_client.post(
        "/contribute/", {"text": text, "source_url": LINK, "urls": "https://www.cdc.gov/flu/"}, follow=True
    ).content.decode()
    imported.refresh_from_db()
    assert imported.text == text and imported.text_available
    assert DraftJob.objects.get(contributor=contributor).post == imported
    assert Post.objects.count() == 1 and "different text" not in page


def test_a_paste_over_the_post_limit_is_refused_with_its_length_never_cut(contributor_client: Any) -> None:
    from crowdnotes_site.lib.text_rules import POST_MAX_CHARS

    form = contributor_client.get("/contribute/").content.decode()
    assert 'maxlength="5000"' not in form.split('name="text"')[1].split(">")[0]  # the browser cuts nothing
    long_post = "Garlic cures flu. " * 560  # 10,080 characters
    response = contributor_client.post("/contribute/", {"text": long_post, "urls": "https://www.cdc.gov/"})
    html = response.content.decode()
    assert response.status_code == 200
    assert f"The post you pasted is {len(long_post.strip())} characters long; at most {POST_MAX_CHARS}" in html
    assert "nothing was cut for you" in html
