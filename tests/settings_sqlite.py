"""Test settings for the SQLite lane: the embedded mode the demo runs in (CROWDNOTES_EMBEDDED=1,
SQLite, the filesystem broker, the file cache), with no PostgreSQL or Redis server. Only the
tests that run on both databases use it (tests/portable/, `scripts/test.sh` runs them here after
the suite); everything else runs on PostgreSQL (tests/settings.py)."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile

from tests.settings_shared import set_environment_defaults

# The command line's server URLs (scripts/test.sh exports them for the PostgreSQL suite) must not
# turn this lane back into the server mode.
for _name in ("DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL"):
    os.environ.pop(_name, None)
os.environ["CROWDNOTES_EMBEDDED"] = "1"
# The file cache, the broker's folders and the SQLite file of this run, never the checkout's var/
# (a demo running from the checkout uses it).
if "CROWDNOTES_VAR_DIR" not in os.environ:
    os.environ["CROWDNOTES_VAR_DIR"] = tempfile.mkdtemp(prefix="crowdnotes-sqlite-tests-")
    atexit.register(shutil.rmtree, os.environ["CROWDNOTES_VAR_DIR"], ignore_errors=True)
set_environment_defaults()

from crowdnotes_site.settings import *  # noqa: E402, F403
from crowdnotes_site.settings import DATABASES  # noqa: E402

if DATABASES["default"]["ENGINE"] != "django.db.backends.sqlite3":
    raise RuntimeError("tests.settings_sqlite runs on the embedded SQLite database only.")

# The settings both test modules override (tests/settings_shared.py).
from tests.settings_shared import (  # noqa: E402, F401
    CSRF_COOKIE_SECURE,
    DEMO_BENCHMARK_DATASET,
    PASSWORD_HASHERS,
    SESSION_COOKIE_SECURE,
    STORAGES,
    TOPICS_CLASSIFY_NEW_POSTS,
)
