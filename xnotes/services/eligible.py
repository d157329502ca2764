"""Pull the posts X lists as eligible for notes: a fetch run pages through them from its saved token,
storing each post once (the admin's button, beat, the command)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import TYPE_CHECKING

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from crowdnotes_site.queue import enqueue_on_commit
from notes.models import Post
from notes.services import post_create, post_text_supply
from xnotes import rules
from xnotes.budget import RateLimited
from xnotes.client import XApiError, XClient
from xnotes.models import XFetchRun, XPost
from xnotes.services.runs import lost_runs_fail

if TYPE_CHECKING:
    from django.contrib.auth.models import User


def fetch_run_create(*, user: User | None = None, max_results: int | None = None, page_limit: int | None = None,
                     post_limit: int | None = None) -> XFetchRun:  # fmt: skip
    return XFetchRun.objects.create(
        requested_by=user,
        test_mode=settings.X_TEST_MODE,
        max_results=max_results or settings.X_FETCH_MAX_RESULTS,
        page_limit=page_limit or settings.X_FETCH_PAGE_LIMIT,
        post_limit=post_limit,
    )


def fetch_runs_expire(*, now: dt.datetime | None = None) -> int:
    """Fail the runs whose worker was lost, so the next beat run or button press can start."""
    return lost_runs_fail(XFetchRun, error="The worker was lost; the next fetch starts again.", now=now)


@transaction.atomic
def fetch_run_request(*, user: User) -> tuple[XFetchRun, bool]:
    """The admin's "Fetch from X now": one run at a time (asking again returns the active one)."""
    fetch_runs_expire()
    active = XFetchRun.objects.select_for_update().filter(state__in=XFetchRun.ACTIVE).first()
    if active is not None:
        return active, False
    run = fetch_run_create(user=user)
    enqueue_on_commit("xnotes.tasks.x_fetch_eligible", run.pk)
    return run, True


def _store_post(parsed: rules.ParsedPost, *, test_mode: bool, now: dt.datetime) -> bool:
    """Store one eligible post (X id unique); True when it is new to CrowdNotes."""
    xpost = XPost.objects.select_related("post").filter(x_id=parsed.x_id).first()
    created = False
    if xpost is None:
        post = Post.objects.filter(external_id=parsed.x_id).order_by("id").first()
        if post is None:
            post = post_create(
                text=parsed.text,
                source_url=f"https://x.com/i/status/{parsed.x_id}",
                external_id=parsed.x_id,
                posted_at=parsed.created_at,
            )
            created = True
        xpost = XPost(post=post, x_id=parsed.x_id)
    post = xpost.post
    if not post.text_available and parsed.text:
        post = post_text_supply(post=post, text=parsed.text)
    if post.posted_at is None and parsed.created_at is not None:
        Post.objects.filter(pk=post.pk).update(posted_at=parsed.created_at)
    xpost.author_x_id = parsed.author_id
    xpost.lang = parsed.lang
    xpost.context = parsed.context
    xpost.media = parsed.media
    xpost.suggested_source_links = parsed.suggested_source_links
    xpost.eligible = True
    xpost.eligible_test_mode = test_mode
    xpost.last_seen_at = now
    xpost.save()
    return created


def fetch_eligible(
    *, run: XFetchRun, client: XClient, on_rate_limit: Callable[[RateLimited], None] | None = None
) -> XFetchRun:
    """Page through posts_eligible_for_notes from the run's saved token, storing each post once.

    On a 429 (or a spent budget): with `on_rate_limit` (the command) it is called (it sleeps until
    the reset) and the run goes on; without it the run is saved as WAITING and RateLimited is
    raised, so the task re-queues itself for the reset and resumes from the saved page token."""
    run.transition(XFetchRun.State.RUNNING)
    run.wait_until = None
    run.save(update_fields=["state", "wait_until"])
    start_requests = client.requests
    try:
        while run.pages < run.page_limit and (run.post_limit is None or run.fetched < run.post_limit):
            size = run.max_results if run.post_limit is None else min(run.max_results, run.post_limit - run.fetched)
            try:
                payload = client.eligible_posts(
                    test_mode=run.test_mode, max_results=size, pagination_token=run.next_token or None
                )
            except RateLimited as limited:
                run.rate_limited_waits += 1
                run.requests += client.requests - start_requests
                start_requests = client.requests
                if on_rate_limit is None:
                    run.transition(XFetchRun.State.WAITING)
                    run.wait_until = dt.datetime.fromtimestamp(limited.reset_at, tz=dt.UTC)
                    run.save()
                    raise
                run.save()
                on_rate_limit(limited)
                continue
            now = timezone.now()
            with transaction.atomic():
                for parsed in rules.parse_posts(payload):
                    if run.post_limit is not None and run.fetched >= run.post_limit:
                        break
                    run.fetched += 1
                    if _store_post(parsed, test_mode=run.test_mode, now=now):
                        run.new += 1
                    else:
                        run.updated += 1
                run.pages += 1
                run.next_token = str((payload.get("meta") or {}).get("next_token") or "")
                run.requests += client.requests - start_requests
                start_requests = client.requests
                run.save()
            if not run.next_token:
                break
    except RateLimited:
        raise
    except (XApiError, rules.XShapeError) as exc:
        run.requests += client.requests - start_requests
        run.transition(XFetchRun.State.FAILED)
        run.error = str(exc)
        run.finished_at = timezone.now()
        run.save()
        return run
    run.transition(XFetchRun.State.DONE)
    run.next_token = ""
    run.finished_at = timezone.now()
    run.save()
    return run
