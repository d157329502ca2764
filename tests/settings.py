"""Test settings: pointed at real PostgreSQL and Redis by default (the SQLite lane: tests/settings_sqlite.py)."""

from __future__ import annotations

import fcntl
import hashlib
import os
import shlex
import sys
import tempfile
from pathlib import Path
from typing import IO

from tests.settings_shared import set_environment_defaults

os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/crowdnotes")
os.environ.setdefault("REDIS_URL", "redis://127.0.0.1:6379/15")


def checkout_suffix(checkout: Path) -> str:
    """A short name for a checkout, from its absolute path: two checkouts on one machine (or one
    server) get different test databases, a checkout the same one on every run."""
    return hashlib.sha256(str(checkout.resolve()).encode()).hexdigest()[:8]


def database_name_for_checkout(name: str, checkout: Path) -> str:
    """The checkout's test database for the database `name`: test_<name>_<checkout suffix>;
    pytest-django adds the xdist process's own suffix (_gw0, _gw1, ...)."""
    return f"test_{name}_{checkout_suffix(checkout)}"


def _xdist_controller() -> bool:
    """Whether this process only hands tests to xdist worker processes (`-n N`, N > 0): it never
    uses Redis, so it claims no Redis database."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return False
    args = [*sys.argv[1:], *shlex.split(os.environ.get("PYTEST_ADDOPTS", ""))]
    for i, arg in enumerate(args):
        if arg in ("-n", "--numprocesses"):
            value = args[i + 1] if i + 1 < len(args) else ""
        elif arg.startswith("--numprocesses="):
            value = arg.split("=", 1)[1]
        elif arg.startswith("-n") and not arg.startswith("--"):
            value = arg[2:]
        else:
            continue
        return value != "0"
    return False


_redis_claim: list[IO[str]] = []  # the open lock file: held until this process exits


def _claim_redis_database() -> None:
    """Each test process (the serial run, or each xdist worker) claims a Redis database of its own
    on this machine: the first database from REDIS_URL's upwards that no other test process holds,
    held by a lock on a file under the temporary folder while the process lives (the kernel releases
    it when the process exits, however it ends). So two checkouts' runs (or two runs of one checkout)
    never share a broker, a cache or rate counters, and one run's broker flush never reaches another's.
    REDIS_URL and CELERY_BROKER_URL (if Redis) are pointed at the claimed database. Done once: a
    process the tests start (a Celery worker, gunicorn, a command) inherits the URLs and the marker."""
    owner = os.environ.get("PYTEST_XDIST_WORKER", "main")
    if os.environ.get("CROWDNOTES_TEST_REDIS_OWNER") == owner or _xdist_controller():
        return
    from urllib.parse import urlsplit, urlunsplit

    base_url = os.environ.get("CROWDNOTES_TEST_REDIS_BASE_URL") or os.environ["REDIS_URL"]
    parts = urlsplit(base_url)
    base = int(parts.path.strip("/") or 0)
    folder = Path(tempfile.gettempdir()) / "crowdnotes-test-redis"
    folder.mkdir(exist_ok=True)
    for db in range(base, 16):  # redis-server's default `databases 16`
        lock = (folder / f"{parts.hostname}-{parts.port or 6379}-{db}.lock").open("a")
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.close()
            continue
        _redis_claim.append(lock)
        break
    else:
        raise RuntimeError(
            f"Redis databases {base} to 15 at {parts.hostname}:{parts.port or 6379} are all held by other test "
            "processes on this machine: wait for a run to end, or start REDIS_URL at a lower database"
        )
    os.environ["CROWDNOTES_TEST_REDIS_BASE_URL"] = base_url
    os.environ["CROWDNOTES_TEST_REDIS_OWNER"] = owner
    for name in ("REDIS_URL", "CELERY_BROKER_URL"):
        url = os.environ.get(name, "")
        if url.startswith(("redis://", "rediss://")):
            os.environ[name] = urlunsplit(urlsplit(url)._replace(path=f"/{db}"))


_claim_redis_database()
set_environment_defaults()
# The models' unpacked files and pre-filter tables (a minute of CPU each to build) in the user's
# cache, which evidence.embedding uses when no MODEL_CACHE_DIR is set: built once per machine, not
# once per checkout; tests/conftest.py's warm-up builds them before any worker starts.
os.environ.setdefault(
    "MODEL_CACHE_DIR",
    os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "crowdnotes", "models"),
)
# Playwright's sync API runs an event loop in the test thread; the ORM calls in tests are still synchronous.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

from crowdnotes_site.settings import *  # noqa: E402, F403
from crowdnotes_site.settings import BASE_DIR, DATABASES  # noqa: E402

if DATABASES["default"]["ENGINE"] != "django.db.backends.postgresql":
    raise RuntimeError("The test suite runs on PostgreSQL only: set DATABASE_URL to a postgres:// URL.")
DATABASES["default"]["TEST"] = {"NAME": database_name_for_checkout(DATABASES["default"]["NAME"], BASE_DIR)}

# The settings both test modules override (tests/settings_shared.py).
from tests.settings_shared import (  # noqa: E402, F401
    CSRF_COOKIE_SECURE,
    DEMO_BENCHMARK_DATASET,
    PASSWORD_HASHERS,
    SESSION_COOKIE_SECURE,
    STORAGES,
    TOPICS_CLASSIFY_NEW_POSTS,
)
