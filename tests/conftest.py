"""Shared fixtures: users per role, CSRF-enforcing clients, loopback LLM and web servers, a real Celery worker."""

from __future__ import annotations

import io
import ipaddress
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.apps import apps as django_apps
from django.contrib.auth.models import Group
from django.middleware.csrf import _get_new_csrf_string
from django.test import Client

from notes.roles import ADMIN, CONTRIBUTOR, RATER, sync_roles
from tests.support.llm_server import ScriptedLLM
from tests.support.screenshots import artifact_path
from tests.support.web_server import WebServer
from tests.support.worker import Worker, purge_broker

ROOT = Path(__file__).resolve().parent.parent


# --- Lanes: markers from fixture use --------------------------------------------------------------
# The fast lane (`scripts/test.sh --fast`: -m "not browser and not worker") leaves out every test
# that drives Chromium or starts a real Celery worker. The markers follow from the fixtures a test
# uses, so a new test cannot land in the wrong lane by forgetting one.
BROWSER_FIXTURES = frozenset({"browser", "page"})
WORKER_FIXTURES = frozenset({"_worker_session", "celery_worker", "worker_factory", "own_workers", "x_worker"})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        callspec = getattr(item, "callspec", None)
        # A parameter of the same name (`page` in a parametrize) is not the fixture.
        fixtures = set(getattr(item, "fixturenames", ())) - set(callspec.params if callspec else ())
        if fixtures & BROWSER_FIXTURES:
            item.add_marker(pytest.mark.browser)
        if fixtures & WORKER_FIXTURES:
            item.add_marker(pytest.mark.worker)


# --- No network but loopback -----------------------------------------------------------------
_real_connect = socket.socket.connect


def _loopback_only_connect(self: socket.socket, address: Any) -> Any:
    if self.family in (socket.AF_INET, socket.AF_INET6):
        host = address[0]
        try:
            loopback = ipaddress.ip_address(host).is_loopback
        except ValueError:
            loopback = host == "localhost"
        if not loopback:
            raise ConnectionRefusedError(f"tests may only connect to loopback, not {host!r}")
    return _real_connect(self, address)


@pytest.fixture(autouse=True, scope="session")
def _block_outbound_network() -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(socket.socket, "connect", _loopback_only_connect)
        yield


@pytest.fixture(autouse=True)
def _fresh_page_caches() -> None:
    """Each test starts with empty in-process page caches (crowdnotes_site/lib/memo.py): ids of an
    emptied database may come back with other data."""
    from crowdnotes_site.lib import memo

    memo.clear_all()


@pytest.fixture(autouse=True)
def _fresh_rate_limits() -> None:
    """Each test starts with no request counted against the rate limits (crowdnotes_site/limits.py)."""
    from django.core.cache import caches

    cache: Any = caches["limits"]
    if not hasattr(cache, "_cache") or not hasattr(cache._cache, "get_client"):
        cache.clear()  # the embedded mode's per-process counters (tests/settings_sqlite.py)
        return
    client = cache._cache.get_client(write=True)
    keys = list(client.scan_iter(match="limits:*"))
    if keys:
        client.delete(*keys)


@pytest.fixture(autouse=True)
def _own_var_markers(settings: Any, tmp_path: Path) -> None:
    """The pages' banners read their markers under VAR_DIR (crowdnotes_site/context_processors.py):
    a demo running from this checkout must not put its warm-up or benchmark banner (and their poll)
    on the pages a test renders, nor a test write its markers into the checkout's var/."""
    settings.VAR_DIR = tmp_path


# --- Clients ---------------------------------------------------------------------------------
class CsrfClient(Client):
    """Enforces CSRF like a browser would; POSTs carry the token unless `csrf=False`."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(enforce_csrf_checks=True, **kwargs)

    def post(self, path: str, data: Any = None, *args: Any, csrf: bool = True, **kwargs: Any) -> Any:  # type: ignore[override]
        if csrf:
            token = self.cookies["csrftoken"].value if "csrftoken" in self.cookies else _get_new_csrf_string()
            self.cookies["csrftoken"] = token
            if isinstance(data, dict) or data is None:
                data = {**(data or {}), "csrfmiddlewaretoken": token}
            kwargs.setdefault("headers", {})["X-CSRFToken"] = token
        return super().post(path, data, *args, **kwargs)


def _make_user(username: str, *roles: str, staff: bool = False) -> Any:
    from django.contrib.auth import get_user_model

    from notes.services import participant_for_user

    sync_roles(django_apps)  # transactional tests truncate tables; make sure the groups exist
    user = get_user_model().objects.create_user(username=username, password="pw-for-tests-123", is_staff=staff)
    user.groups.set(Group.objects.filter(name__in=roles))
    participant_for_user(user=user)
    return user


@pytest.fixture
def make_user(db: None) -> Callable[..., Any]:
    return _make_user


@pytest.fixture
def contributor(db: None) -> Any:
    return _make_user("carla", CONTRIBUTOR)


@pytest.fixture
def rater(db: None) -> Any:
    return _make_user("rafa", RATER)


@pytest.fixture
def admin_user(db: None) -> Any:
    return _make_user("ada", ADMIN, staff=True)


def _client_for(user: Any | None) -> CsrfClient:
    client = CsrfClient()
    if user is not None:
        client.force_login(user)
    return client


@pytest.fixture
def anon_client() -> CsrfClient:
    return _client_for(None)


@pytest.fixture
def contributor_client(contributor: Any) -> CsrfClient:
    return _client_for(contributor)


@pytest.fixture
def rater_client(rater: Any) -> CsrfClient:
    return _client_for(rater)


@pytest.fixture
def admin_client(admin_user: Any) -> CsrfClient:
    return _client_for(admin_user)


# --- Loopback servers ------------------------------------------------------------------------
@pytest.fixture(scope="session")
def _llm_session() -> Iterator[ScriptedLLM]:
    server = ScriptedLLM()
    yield server
    server.close()


@pytest.fixture
def llm_server(_llm_session: ScriptedLLM, settings: Any) -> Iterator[ScriptedLLM]:
    """The scripted OpenAI-compatible endpoint, configured as the app's LLM for this test."""
    _llm_session.reset()
    settings.LLM_BASE_URL = _llm_session.base_url
    settings.LLM_MODEL = "scripted-model"
    yield _llm_session
    _llm_session.reset()


@pytest.fixture(scope="session")
def _web_session() -> Iterator[WebServer]:
    server = WebServer()
    yield server
    server.close()


@pytest.fixture
def web_server(_web_session: WebServer, settings: Any) -> WebServer:
    """The loopback web server (tests/support/web_server.py), emptied for this test: no pages,
    no recorded requests or connections. Its address is the one pair on the app's local
    allow-list (EVIDENCE_ALLOWED_LOCAL, here and in the workers) and in test fetch policies."""
    _web_session.reset()
    settings.EVIDENCE_ALLOWED_LOCAL = [f"127.0.0.1:{_web_session.port}"]
    return _web_session


# --- Shared data -----------------------------------------------------------------------------
@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The real data (`../shared/data`: communitynotes/, webpages/), resolved from the checkout."""
    from django.conf import settings

    folder = Path(settings.SHARED_DATA_DIR)
    if not folder.is_dir():
        pytest.fail(f"no real data at {folder} (set CROWDNOTES_SHARED_DATA): the tests read the real data there")
    return folder


@pytest.fixture(scope="session")
def cn_data(shared_data: Path) -> Path:
    """The public Community Notes samples (`../shared/data/communitynotes`)."""
    return shared_data / "communitynotes"


# --- A real Celery worker ----------------------------------------------------------------------
@pytest.fixture(scope="session")
def _evidence_model_warm() -> None:
    """Run `evidence_warmup` once per session, before any worker starts: it unpacks the embedding
    model and builds its pre-filter table in MODEL_CACHE_DIR (which the workers share). Without
    it the first snippet a worker processes pays for the table, and on a loaded machine a worker
    test's wait ran out before the first answer."""
    import fcntl

    from django.conf import settings
    from django.core.management import call_command

    # One xdist worker builds the table; the others wait for it, then read it from disk.
    folder = Path(settings.MODEL_CACHE_DIR)
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / ".warmup.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        call_command("evidence_warmup", stdout=io.StringIO())


@pytest.fixture(scope="session")
def _worker_session(
    django_db_setup: None,
    django_db_blocker: Any,
    _llm_session: ScriptedLLM,
    _web_session: WebServer,
    _evidence_model_warm: None,
) -> Iterator[Callable[..., Worker]]:
    workers: list[Worker] = []

    def start(**kwargs: Any) -> Worker:
        kwargs.setdefault("extra_env", {}).setdefault("LLM_BASE_URL", _llm_session.base_url)
        kwargs["extra_env"].setdefault("EVIDENCE_ALLOWED_LOCAL", f"127.0.0.1:{_web_session.port}")
        worker = Worker(**kwargs)
        workers.append(worker)
        return worker

    yield start
    for worker in workers:
        worker.stop()


_shared_worker: dict[str, Worker] = {}


@pytest.fixture
def no_shared_worker(transactional_db: None) -> Iterator[None]:
    """No session worker reads the test broker during this test, and the test's messages are purged
    after it: for tests that run a queued task inline (the task's on-commit send still reaches Redis,
    and a worker there would claim the run first, with its own settings) or start their own workers."""
    shared = _shared_worker.pop("w", None)
    if shared is not None:
        shared.stop()
    purge_broker()
    yield
    purge_broker()


@pytest.fixture
def worker_factory(_worker_session: Callable[..., Worker], no_shared_worker: None) -> Iterator[Callable[..., Worker]]:
    """Start workers for this test only (e.g. to kill one mid-task); stopped at the end of the test.
    The shared worker listens on the same queues; it must not take this test's tasks (no_shared_worker)."""
    started: list[Worker] = []

    def start(**kwargs: Any) -> Worker:
        worker = _worker_session(name=f"t{len(started)}", **kwargs)
        started.append(worker)
        return worker

    yield start
    for worker in started:
        worker.stop()


@pytest.fixture
def celery_worker(_worker_session: Callable[..., Worker], transactional_db: None, settings: Any) -> Worker:
    """One long-lived worker for pipeline tests (its LLM endpoint is the session's scripted server)."""
    worker = _shared_worker.get("w")
    if worker is None or worker.proc.poll() is not None:
        purge_broker()
        worker = _worker_session(name="shared")
        _shared_worker["w"] = worker
    return worker


def wait_for(predicate: Callable[[], Any], timeout: float = 60, interval: float = 0.2) -> Any:
    """Poll until predicate() is truthy (pipeline tests wait on the worker, never on wall-clock asserts)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = predicate()
        if result:
            return result
        time.sleep(interval)
    raise AssertionError(f"condition not met within {timeout}s")


# --- Browser ---------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        chromium = pw.chromium.launch(
            executable_path="/usr/bin/chromium",
            headless=True,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
            ],
        )
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser: Any, request: pytest.FixtureRequest) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1100, "height": 900})
    page = context.new_page()
    # The Content-Security-Policy must never have blocked anything the pages (or htmx) do.
    violations: list[str] = []

    def on_console(message: Any) -> None:
        if "Content Security Policy" in message.text:
            violations.append(f"{message.text} (page {page.url}, {message.location})")

    page.on("console", on_console)
    yield page
    # Taken before the harness's own screenshot: Playwright hides the caret with a style element of its
    # own, which the policy may report; that is the test tool, not a page.
    found = list(violations)
    page.screenshot(path=str(artifact_path(f"{request.node.name}-final.png")), full_page=True)
    context.close()
    assert found == [], found
