"""The X client against the loopback fake X API: signed requests, the shared budget, 429, 5xx, timeouts."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import pytest

from tests.support import x_server
from tests.support.x_server import FakeX, Scripted
from xnotes import budget
from xnotes.budget import RateLimited
from xnotes.client import XApiError, XClient, XNotConfigured, XTransientError, missing_settings

ELIGIBLE = "/2/notes/search/posts_eligible_for_notes"


def test_every_request_is_signed_and_verified(x_api: FakeX, db: None) -> None:
    client = XClient()
    client.eligible_posts(test_mode=True, max_results=10)
    client.evaluate_note(post_id="1", note_text="See https://www.cdc.gov")
    client.posts_lookup(["1", "2"])
    assert [r.auth for r in x_api.requests] == ["oauth1", "oauth1", "bearer"]
    assert all(r.status == 200 for r in x_api.requests)
    assert x_api.requests[0].params["test_mode"] == "true"
    assert "note_tweet" in x_api.requests[0].params["tweet.fields"]


def test_a_wrong_secret_fails_the_signature_check(x_api: FakeX, settings: Any, db: None) -> None:
    settings.X_ACCESS_TOKEN_SECRET = "not-the-secret"
    with pytest.raises(XApiError) as err:
        XClient().eligible_posts(test_mode=True, max_results=10)
    assert err.value.status == 401
    assert x_api.requests[0].auth == ""


def test_lookup_uses_user_context_without_a_bearer_token(x_api: FakeX, settings: Any, db: None) -> None:
    settings.X_BEARER_TOKEN = ""
    XClient().posts_lookup(["1"])
    assert x_api.requests[0].auth == "oauth1"


def test_no_credentials_means_not_configured(no_x_credentials: None) -> None:
    assert missing_settings() == ["X_API_KEY", "X_API_KEY_SECRET", "X_ACCESS_TOKEN", "X_ACCESS_TOKEN_SECRET"]
    with pytest.raises(XNotConfigured) as err:
        XClient()
    assert "X_API_KEY" in str(err.value)


def test_429_closes_the_window_for_every_worker_until_the_reset(x_api: FakeX, db: None) -> None:
    x_api.rate_limit_next(ELIGIBLE, reset_in_s=2)
    with pytest.raises(RateLimited) as limited:
        XClient().eligible_posts(test_mode=True, max_results=10)
    assert 0 < limited.value.wait_s() <= 3.5
    # Another client (another worker) is refused without sending anything.
    sent = len(x_api.requests)
    with pytest.raises(RateLimited):
        XClient().eligible_posts(test_mode=True, max_results=10)
    assert len(x_api.requests) == sent
    time.sleep(limited.value.wait_s())
    XClient().eligible_posts(test_mode=True, max_results=10)
    assert x_api.violations == []
    assert x_api.requests[-1].status == 200


def test_budget_follows_remaining_and_refuses_when_spent(x_api: FakeX, db: None) -> None:
    x_api.window_limit = 2
    client = XClient()
    client.eligible_posts(test_mode=True, max_results=10)
    assert budget.state("notes").remaining == 1
    client.eligible_posts(test_mode=True, max_results=10)
    with pytest.raises(RateLimited) as limited:
        client.eligible_posts(test_mode=True, max_results=10)
    assert len(x_api.requests) == 2
    assert limited.value.reset_at == pytest.approx(x_api.window_reset, abs=1)


def test_5xx_then_success_is_retried_with_backoff(x_api: FakeX, db: None) -> None:
    x_api.script(ELIGIBLE, Scripted(503, {"title": "Service Unavailable"}), Scripted(500, {}))
    slept: list[float] = []
    XClient(sleep=slept.append).eligible_posts(test_mode=True, max_results=10)
    assert [r.status for r in x_api.requests] == [503, 500, 200]
    assert slept == [0.05, 0.1]


def test_retries_are_bounded(x_api: FakeX, settings: Any, db: None) -> None:
    settings.X_API_MAX_RETRIES = 2
    x_api.script(ELIGIBLE, *[Scripted(502, {"title": "Bad Gateway"})] * 5)
    with pytest.raises(XTransientError):
        XClient(sleep=lambda s: None).eligible_posts(test_mode=True, max_results=10)
    assert len(x_api.requests) == 3


def test_a_timeout_is_retried(x_api: FakeX, settings: Any, db: None) -> None:
    settings.X_API_TIMEOUT_S = 0.3
    x_api.script(ELIGIBLE, Scripted(0, delay_s=0.8))
    XClient(sleep=lambda s: None).eligible_posts(test_mode=True, max_results=10)
    assert len(x_api.of(ELIGIBLE)) == 2


def test_create_note_is_never_retried_by_the_client(x_api: FakeX, db: None) -> None:
    x_api.script("/2/notes", Scripted(503, {"title": "Service Unavailable"}))
    with pytest.raises(XTransientError):
        XClient(sleep=lambda s: None).create_note(
            test_mode=True, post_id="1", text="See https://www.cdc.gov", classification="not_misleading",
            misleading_tags=[], trustworthy_sources=True,
        )  # fmt: skip
    assert len(x_api.of("/2/notes")) == 1


def test_secrets_never_reach_the_logs(x_api: FakeX, caplog: pytest.LogCaptureFixture, db: None) -> None:
    caplog.set_level(logging.DEBUG)
    x_api.script(ELIGIBLE, Scripted(503, {}))
    XClient(sleep=lambda s: None).eligible_posts(test_mode=True, max_results=10)
    text = caplog.text
    for secret in (
        x_server.CONSUMER_SECRET,
        x_server.ACCESS_TOKEN_SECRET,
        x_server.BEARER_TOKEN,
        x_server.ACCESS_TOKEN,
    ):
        assert secret not in text
    assert "posts_eligible_for_notes" in text


def test_the_budget_keeps_a_long_run_inside_xs_window(x_api: FakeX, db: None) -> None:
    """X allows 3 requests per 1.5 s here: 7 requests wait twice for the reset and never get a 429."""
    x_api.set_window(limit=3, seconds=1.5)
    client = XClient()
    waits = 0
    for _ in range(7):
        while True:
            try:
                client.eligible_posts(test_mode=True, max_results=10)
                break
            except RateLimited as limited:
                waits += 1
                time.sleep(limited.wait_s())
    assert [r.status for r in x_api.requests] == [200] * 7
    assert waits == 2


def test_while_no_window_is_known_one_request_learns_it_and_the_others_wait(x_api: FakeX, db: None) -> None:
    """Two workers starting together: the first request goes out, the second is refused (no request)
    until the first answer tells the window; after that both take from the budget."""
    x_api.script(ELIGIBLE, Scripted(0, delay_s=0.6))
    first = threading.Thread(target=lambda: XClient().eligible_posts(test_mode=True, max_results=10))
    first.start()
    deadline = time.time() + 5
    while not x_api.requests and time.time() < deadline:
        time.sleep(0.01)
    with pytest.raises(RateLimited) as refused:
        XClient().eligible_posts(test_mode=True, max_results=10)
    assert refused.value.reset_at == pytest.approx(time.time() + budget.PROBE_WAIT_S, abs=1)
    assert len(x_api.requests) == 1
    first.join(5)
    XClient().eligible_posts(test_mode=True, max_results=10)
    assert [r.status for r in x_api.requests] == [200, 200]
    assert budget.state("notes").remaining == x_api.window_limit - 2


def test_a_probe_without_an_answer_lets_the_next_request_go(x_api: FakeX, settings: Any, db: None) -> None:
    settings.X_API_TIMEOUT_S = 0.2
    settings.X_API_MAX_RETRIES = 0
    x_api.script(ELIGIBLE, Scripted(0, delay_s=0.5))
    with pytest.raises(XTransientError):
        XClient().eligible_posts(test_mode=True, max_results=10)
    assert budget.state("notes").reset_at is None  # still no window known
    XClient().eligible_posts(test_mode=True, max_results=10)
    assert len(x_api.requests) == 2


def _demo_process(code: str, x_api: FakeX, var_dir: Any) -> str:
    """`manage.py shell -c CODE` in the demo's configuration: no REDIS_URL (the filesystem broker
    and the embedded cache), DEBUG=1, this test's fake X."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    drop = ("REDIS_URL", "CELERY_BROKER_URL", "DATABASE_URL", "SECRET_KEY")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env.update(DJANGO_SETTINGS_MODULE="crowdnotes_site.settings", DEBUG="1", CROWDNOTES_VAR_DIR=str(var_dir),
               X_API_BASE_URL=x_api.base_url, X_API_KEY=x_server.CONSUMER_KEY,
               X_API_KEY_SECRET=x_server.CONSUMER_SECRET, X_ACCESS_TOKEN=x_server.ACCESS_TOKEN,
               X_ACCESS_TOKEN_SECRET=x_server.ACCESS_TOKEN_SECRET)  # fmt: skip
    done = subprocess.run([sys.executable, "manage.py", "shell", "-c", code], cwd=root, env=env,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1]


def test_on_the_demos_broker_the_budget_a_worker_learns_is_read_by_every_other_process(
    x_api: FakeX, tmp_path: Any
) -> None:
    """On the demo (no Redis) the writer page sees the answers a worker's requests got: the embedded
    cache is a file cache every process of the machine shares, not each process's own memory."""
    x_api.window_limit = 5
    spend = "from xnotes.client import XClient; c = XClient(); c.eligible_posts(test_mode=True, max_results=10); print(c.requests)"
    assert _demo_process(spend, x_api, tmp_path) == "1"  # a worker (or a command) sends one request
    read = "from xnotes import budget; print(budget.state('notes').remaining)"
    assert _demo_process(read, x_api, tmp_path) == "4"  # the web process reads what X answered
    assert len(x_api.requests) == 1
