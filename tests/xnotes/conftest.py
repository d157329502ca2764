"""The loopback fake X API (tests/support/x_server.py), configured as the app's X API per test."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from crowdnotes_site.celery import app
from tests.support import x_server
from tests.support.worker import Worker, purge_broker
from tests.support.x_server import FakeX


@pytest.fixture(scope="session")
def _x_session() -> Iterator[FakeX]:
    server = FakeX()
    yield server
    server.close()


@pytest.fixture
def x_api(_x_session: FakeX, settings: Any) -> Iterator[FakeX]:
    """The fake X API, emptied, with CrowdNotes' X settings pointing at it and a fresh budget."""
    from xnotes import budget

    _x_session.reset()
    settings.X_API_BASE_URL = _x_session.base_url
    settings.X_API_KEY = x_server.CONSUMER_KEY
    settings.X_API_KEY_SECRET = x_server.CONSUMER_SECRET
    settings.X_ACCESS_TOKEN = x_server.ACCESS_TOKEN
    settings.X_ACCESS_TOKEN_SECRET = x_server.ACCESS_TOKEN_SECRET
    settings.X_BEARER_TOKEN = x_server.BEARER_TOKEN
    settings.X_TEST_MODE = True
    settings.X_API_TIMEOUT_S = 1.0
    settings.X_API_BACKOFF_S = 0.05
    budget.clear()
    yield _x_session
    budget.clear()
    assert _x_session.violations == [], _x_session.violations


@pytest.fixture
def no_x_credentials(settings: Any) -> None:
    for name in ("X_API_KEY", "X_API_KEY_SECRET", "X_ACCESS_TOKEN", "X_ACCESS_TOKEN_SECRET", "X_BEARER_TOKEN"):
        setattr(settings, name, "")


@pytest.fixture
def x_worker(x_api: FakeX, no_shared_worker: None) -> Iterator[Worker]:
    """A worker on the default queue whose X settings point at the fake (no model needed). The
    session's shared worker also reads `default` and would take this test's tasks with its own
    settings (no X credentials): no_shared_worker stops it."""
    # The X tasks go to a queue only this worker reads. The router is built once per process and
    # keeps the routes it was built with, so it is rebuilt after the change (and after the restore).
    queue = "xnotes-test"
    routes = app.conf.task_routes
    app.conf.task_routes = {**routes, "xnotes.tasks.*": {"queue": queue}}
    _rebuild_router()
    purge_broker()
    worker = Worker(queues=f"default,{queue}", name="xnotes", extra_env={"X_TASK_QUEUE": queue,
        "X_API_BASE_URL": x_api.base_url, "X_API_KEY": x_server.CONSUMER_KEY,
        "X_API_KEY_SECRET": x_server.CONSUMER_SECRET, "X_ACCESS_TOKEN": x_server.ACCESS_TOKEN,
        "X_ACCESS_TOKEN_SECRET": x_server.ACCESS_TOKEN_SECRET, "X_BEARER_TOKEN": x_server.BEARER_TOKEN,
        "X_API_BACKOFF_S": "0.05", "TOPICS_CLASSIFY_NEW_POSTS": "0",
    }, beat=True)  # fmt: skip  # beat's outbox dispatcher, as deployed: a message whose on-commit send failed still goes
    yield worker
    worker.stop()
    app.conf.task_routes = routes
    _rebuild_router()


def _rebuild_router() -> None:
    app.amqp.flush_routes()
    app.amqp.router = app.amqp.Router()
