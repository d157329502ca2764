"""What both test settings modules share (tests/settings.py on PostgreSQL, tests/settings_sqlite.py on
SQLite): the environment defaults set before the site's settings load, and the settings both override
after (each imports these names after `from crowdnotes_site.settings import *`)."""

from __future__ import annotations

import os


def set_environment_defaults() -> None:
    os.environ.setdefault("SECRET_KEY", "test-only-secret-key-not-for-production-0123456789")
    os.environ.setdefault("EMBEDDING_MODEL", "all-MiniLM-L6-v2")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("SECURE_SSL_REDIRECT", "0")
    # The app's port as deployments set it; tests point EVIDENCE_ALLOWED_LOCAL at loopback page servers.
    os.environ.setdefault("SITE_PORTS", "8000")


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
