"""Test settings: the one settings module, pointed at real PostgreSQL and Redis by default."""

from __future__ import annotations

import os

os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/crowdnotes")
os.environ.setdefault("REDIS_URL", "redis://127.0.0.1:6379/15")


def _redis_db_of_xdist_worker() -> None:
    """Under pytest-xdist (`-n 2`) each worker process gets a Redis database of its own: the
    base database of REDIS_URL (and of CELERY_BROKER_URL, if set) plus the worker's index (gw0 ->
    base, gw1 -> base + 1, ...), so one worker's broker flush, queued tasks and cache never reach
    another's. pytest-django gives each worker its own PostgreSQL test database (test_<name>_gw0,
    ...). Done once: a process the tests start (a Celery worker, gunicorn) inherits the shifted
    URLs and the marker."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if not worker.startswith("gw") or "CROWDNOTES_TEST_REDIS_BASE_URL" in os.environ:
        return
    from urllib.parse import urlsplit, urlunsplit

    os.environ["CROWDNOTES_TEST_REDIS_BASE_URL"] = os.environ["REDIS_URL"]
    for name in ("REDIS_URL", "CELERY_BROKER_URL"):
        url = os.environ.get(name, "")
        if not url.startswith(("redis://", "rediss://")):
            continue
        parts = urlsplit(url)
        db = int(parts.path.strip("/") or 0) + int(worker[2:])
        if db > 15:  # redis-server's default `databases 16`
            raise RuntimeError(f"{name} {url}: xdist worker {worker} would need Redis db {db}; use a lower base db")
        os.environ[name] = urlunsplit(parts._replace(path=f"/{db}"))


_redis_db_of_xdist_worker()
os.environ.setdefault("SECRET_KEY", "test-only-secret-key-not-for-production-0123456789")
os.environ.setdefault("EMBEDDING_MODEL", "all-MiniLM-L6-v2")
# The models' unpacked files and pre-filter tables (a minute of CPU each to build) in the user's
# cache, which evidence.embedding uses when no MODEL_CACHE_DIR is set: built once per machine, not
# once per checkout; tests/conftest.py's warm-up builds them before any worker starts.
os.environ.setdefault(
    "MODEL_CACHE_DIR",
    os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "crowdnotes", "models"),
)
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("SECURE_SSL_REDIRECT", "0")
# The app's port as deployments set it; tests point EVIDENCE_ALLOWED_LOCAL at loopback page servers.
os.environ.setdefault("SITE_PORTS", "8000")
# Playwright's sync API runs an event loop in the test thread; the ORM calls in tests are still synchronous.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

from crowdnotes_site.settings import *  # noqa: E402, F403
from crowdnotes_site.settings import DATABASES  # noqa: E402

if DATABASES["default"]["ENGINE"] != "django.db.backends.postgresql":
    raise RuntimeError("The test suite runs on PostgreSQL only: set DATABASE_URL to a postgres:// URL.")

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]  # fast hashing for tests only
SESSION_COOKIE_SECURE = False
CSRF_COOKIE_SECURE = False
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
# Off in tests by default: the queued topic call would take LLM replies scripted for other tasks.
# tests/notes/analytics/test_topic_baselines.py turns it on.
TOPICS_CLASSIFY_NEW_POSTS = False
# Off in tests by default: load_demo would queue the benchmark on the demo dataset for any worker.
# tests/browser/test_demo_walk.py turns it on.
DEMO_BENCHMARK_DATASET = ""
