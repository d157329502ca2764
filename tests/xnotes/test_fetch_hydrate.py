"""Pulling eligible posts and giving imported posts their text, against the fake X API."""

from __future__ import annotations

import datetime as dt
import io
import json
import time
from typing import Any

import pytest
from django.core.management import call_command
from django.utils import timezone

from crowdnotes_site.lib.hashing import sha256_hex
from crowdnotes_site.models import OutboxMessage
from notes.models import Post
from tests.support.x_server import FakeX, Scripted
from tests.xnotes.factories import tweet
from xnotes.budget import RateLimited
from xnotes.client import XClient
from xnotes.models import XFetchRun, XPost
from xnotes.services import eligible, hydrate

ELIGIBLE = "/2/notes/search/posts_eligible_for_notes"
LONG = "Vitamin C megadoses cure sepsis, doctors hide it. " * 8


def _pages(x_api: FakeX) -> None:
    x_api.eligible_pages = [
        [
            tweet("1900000000000000001", LONG[:270] + "…", note_tweet={"text": LONG}, author_id="11", lang="en",
                  created_at="2026-11-20T10:00:00.000Z", referenced_tweets=[{"type": "quoted", "id": "1800000000000000009"}],
                  attachments={"media_keys": ["3_1"]},
                  suggested_source_links=["https://www.who.int/news-room/fact-sheets/detail/sepsis"]),
            tweet("1900000000000000002", "5G towers spread the flu.", author_id="12"),
        ],
        # X repeats a post on the next page.
        [tweet("1900000000000000002", "5G towers spread the flu.", author_id="12"), tweet("1900000000000000003", "Garlic cures measles.")],
    ]  # fmt: skip
    x_api.eligible_includes = {
        "tweets": [tweet("1800000000000000009", "Hospitals are hiding the cure.")],
        "media": [
            {"media_key": "3_1", "type": "photo", "url": "https://pbs.twimg.com/media/a.jpg", "alt_text": "A chart"}
        ],
    }


def _run(**kw: Any) -> XFetchRun:
    return eligible.fetch_eligible(run=eligible.fetch_run_create(**kw), client=XClient())


def test_pages_are_followed_and_a_repeated_post_is_stored_once(x_api: FakeX, db: None) -> None:
    _pages(x_api)
    run = _run(max_results=2)
    assert run.state == XFetchRun.State.DONE
    assert run.summary() == {"requests": 2, "pages": 2, "fetched": 4, "new": 3, "updated": 1,
                             "rate_limited_waits": 0, "test_mode": True}  # fmt: skip
    assert XPost.objects.count() == 3
    assert [r.params.get("pagination_token") for r in x_api.of(ELIGIBLE)] == [None, "p1"]
    assert all(r.params["test_mode"] == "true" for r in x_api.of(ELIGIBLE))
    xpost = XPost.objects.select_related("post").get(x_id="1900000000000000001")
    assert xpost.post.text == LONG  # note_tweet.text over the cut text
    assert xpost.post.posted_at == dt.datetime(2026, 11, 20, 10, tzinfo=dt.UTC)
    assert xpost.context == [
        {"relation": "quoted", "id": "1800000000000000009", "text": "Hospitals are hiding the cure."}
    ]
    assert xpost.media == [{"type": "photo", "url": "https://pbs.twimg.com/media/a.jpg", "alt_text": "A chart"}]
    assert xpost.suggested_source_links == ["https://www.who.int/news-room/fact-sheets/detail/sepsis"]
    assert xpost.post.external_id == "1900000000000000001"
    # A second pull updates, never duplicates.
    again = _run(max_results=2)
    assert (again.new, again.updated) == (0, 4)
    assert Post.objects.filter(external_id__startswith="19").count() == 3


def test_an_imported_post_without_text_gets_it_from_the_eligible_list(x_api: FakeX, db: None) -> None:
    post = Post.objects.create(
        text="[imported]", text_hash="x", external_id="1900000000000000003", text_available=False
    )
    _pages(x_api)
    _run(max_results=2)
    post.refresh_from_db()
    assert (post.text, post.text_available) == ("Garlic cures measles.", True)
    assert post.xpost.eligible


def test_429_mid_run_saves_the_page_token_and_resumes_after_the_reset(x_api: FakeX, db: None) -> None:
    _pages(x_api)
    run = eligible.fetch_run_create(max_results=2)
    x_api.script(ELIGIBLE, Scripted(0))  # page 1 as usual
    x_api.rate_limit_next(ELIGIBLE, reset_in_s=2)
    with pytest.raises(RateLimited) as limited:
        eligible.fetch_eligible(run=run, client=XClient())
    run.refresh_from_db()
    assert (run.state, run.pages, run.next_token, run.rate_limited_waits) == (XFetchRun.State.WAITING, 1, "p1", 1)
    assert run.wait_until is not None
    # The task would be re-queued with this countdown; here we wait it out, then resume.
    time.sleep(limited.value.wait_s())
    run = eligible.fetch_eligible(run=run, client=XClient())
    assert (run.state, run.pages, run.new) == (XFetchRun.State.DONE, 2, 3)
    assert x_api.violations == []


def test_fetch_command_waits_for_the_reset_and_prints_json(x_api: FakeX, db: None) -> None:
    _pages(x_api)
    x_api.rate_limit_next(ELIGIBLE, reset_in_s=1.5)
    out = io.StringIO()
    call_command("x_fetch_eligible", "--max-results", "2", "--json", stdout=out)
    result = json.loads(out.getvalue())
    assert result == {"requests": 3, "pages": 2, "fetched": 4, "new": 3, "updated": 1, "rate_limited_waits": 1,
                      "test_mode": True}  # fmt: skip
    assert x_api.violations == []


def test_fetch_command_limit(x_api: FakeX, db: None) -> None:
    _pages(x_api)
    out = io.StringIO()
    call_command("x_fetch_eligible", "--limit", "1", "--json", stdout=out)
    result = json.loads(out.getvalue())
    assert (result["fetched"], result["pages"], result["requests"]) == (1, 1, 1)
    assert x_api.of(ELIGIBLE)[0].params["max_results"] == "1"


def _imported(n: int, start: int = 1700000000000000000) -> list[Post]:
    return [
        Post.objects.create(
            text="[imported]", text_hash=sha256_hex(str(i)), external_id=str(start + i), text_available=False
        )
        for i in range(n)
    ]


def test_hydrate_100_ids_a_request_found_and_not_found(x_api: FakeX, db: None) -> None:
    posts = _imported(150)
    for p in posts[:140]:
        x_api.tweets[p.external_id] = tweet(
            p.external_id, f"Post text {p.external_id}", created_at="2025-01-02T03:04:05Z", lang="en"
        )
    x_api.tweet_errors[posts[140].external_id] = "Authorization Error"  # protected
    stats = hydrate.hydrate_posts(client=XClient(), limit=1000)
    assert stats.as_dict() == {"requests": 2, "looked_up": 150, "hydrated": 140, "not_found": 10, "skipped": 0}
    assert [len(r.params["ids"].split(",")) for r in x_api.of("/2/tweets")] == [100, 50]
    first = Post.objects.get(pk=posts[0].pk)
    assert first.text_available and first.text == f"Post text {first.external_id}"
    assert first.posted_at == dt.datetime(2025, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
    protected = XPost.objects.get(x_id=posts[140].external_id)
    assert protected.lookup_error == "Authorization Error"
    assert XPost.objects.get(x_id=posts[149].external_id).lookup_error == "Not Found Error"
    # Not asked again within 7 days...
    again = hydrate.hydrate_posts(client=XClient(), limit=1000)
    assert again.as_dict() == {"requests": 0, "looked_up": 0, "hydrated": 0, "not_found": 0, "skipped": 10}
    # ...and asked again after.
    XPost.objects.filter(lookup_error_at__isnull=False).update(lookup_error_at=timezone.now() - dt.timedelta(days=8))
    later = hydrate.hydrate_posts(client=XClient(), limit=1000)
    assert (later.looked_up, later.not_found, later.requests) == (10, 10, 1)


def test_hydrate_command(x_api: FakeX, db: None) -> None:
    posts = _imported(3)
    x_api.tweets[posts[0].external_id] = tweet(posts[0].external_id, "Found it.")
    out = io.StringIO()
    call_command("x_hydrate_posts", "--limit", "2", "--json", stdout=out)
    assert json.loads(out.getvalue()) == {"requests": 1, "looked_up": 2, "hydrated": 1, "not_found": 1, "skipped": 0}


def test_a_lost_fetch_run_is_failed_so_the_next_one_starts(x_api: FakeX, admin_user: Any, db: None) -> None:
    lost = eligible.fetch_run_create()
    XFetchRun.objects.filter(pk=lost.pk).update(
        state=XFetchRun.State.RUNNING, updated_at=timezone.now() - dt.timedelta(minutes=11)
    )
    run, created = eligible.fetch_run_request(user=admin_user)
    assert created and run.pk != lost.pk
    lost.refresh_from_db()
    assert lost.state == XFetchRun.State.FAILED and "worker was lost" in lost.error


def test_only_web_media_urls_are_kept(x_api: FakeX, db: None) -> None:
    from xnotes import rules

    payload = {"data": [tweet("5", "t", attachments={"media_keys": ["1"]})],
               "includes": {"media": [{"media_key": "1", "type": "photo", "url": "javascript:alert(1)"}]}}  # fmt: skip
    assert rules.parse_posts(payload)[0].media == [{"type": "photo", "url": "", "alt_text": ""}]


def test_a_post_x_did_not_return_shows_the_error_title_on_its_page(x_api: FakeX, contributor_client: Any) -> None:
    post = _imported(1)[0]
    x_api.tweet_errors[post.external_id] = "Authorization Error"
    assert hydrate.hydrate_posts(client=XClient(), limit=10).not_found == 1
    page = contributor_client.get(f"/posts/{post.pk}/").content.decode()
    error = page[page.index('id="x-lookup-error"') :].split("</p>")[0]
    assert "X did not return this post's text: Authorization Error" in error and "asked again after 7 days" in error


def test_hydrated_and_new_eligible_posts_are_queued_for_topic_classification(
    x_api: FakeX, settings: Any, db: None
) -> None:
    settings.TOPICS_CLASSIFY_NEW_POSTS = True
    found, missing = _imported(2)
    x_api.tweets[found.external_id] = tweet(found.external_id, "Garlic cures measles.")
    hydrate.hydrate_posts(client=XClient(), limit=10)
    queued = OutboxMessage.objects.filter(task_name="notes.tasks.topic_classify_post").order_by("id")
    assert [m.args for m in queued] == [[found.pk]]
    # The hydrated post listed again (it has its text) is not queued twice; the new one is.
    x_api.eligible_pages = [
        [tweet(found.external_id, "Garlic cures measles."), tweet("1900000000000000001", "5G spreads flu.")]
    ]
    assert _run().summary()["new"] == 1
    new = XPost.objects.get(x_id="1900000000000000001").post
    assert [m.args for m in queued.all()] == [[found.pk], [new.pk]]
    assert not Post.objects.get(pk=missing.pk).text_available
