"""Test settings: the one settings module, pointed at real PostgreSQL and Redis by default."""

from __future__ import annotations

import os

os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/crowdnotes")
os.environ.setdefault("REDIS_URL", "redis://127.0.0.1:6379/15")
os.environ.setdefault("SECRET_KEY", "test-only-secret-key-not-for-production-0123456789")
os.environ.setdefault("EMBEDDING_MODEL", "all-MiniLM-L6-v2")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("SECURE_SSL_REDIRECT", "0")
# The app's port as deployments set it; tests point EVIDENCE_ALLOWED_LOCAL at loopback page servers.
os.environ.setdefault("SITE_PORTS", "8000")
# Playwright's sync API runs an event loop in the test thread; the ORM calls in tests are still synchronous.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

from crowdnotes_site.settings import *  # noqa: F403
from crowdnotes_site.settings import DATABASES

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
