"""Two test runs on one machine never share a database: the PostgreSQL test database is named per
checkout, and each test process claims a Redis database no other test process holds
(tests/settings.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection

from tests.settings import checkout_suffix, database_name_for_checkout

# A test process as xdist starts one: it claims its Redis database when tests.settings is imported,
# prints it, and holds it until its standard input closes.
CLAIM = "import sys, tests.settings as s; print(s.REDIS_URL, flush=True); sys.stdin.read()"


@pytest.mark.django_db
def test_it_names_the_test_database_after_the_checkout() -> None:
    here = database_name_for_checkout("crowdnotes", Path("/work/main"))
    other = database_name_for_checkout("crowdnotes", Path("/tmp/cirun/main"))
    assert here != other
    assert here == database_name_for_checkout("crowdnotes", Path("/work/main"))  # the same on every run
    # This run's database carries the checkout's name (and under -n, xdist's own suffix after it).
    name = connection.settings_dict["NAME"]
    assert name.startswith("test_") and f"_{checkout_suffix(Path(settings.BASE_DIR))}" in name, name


def _claiming_process(base_url: str) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CROWDNOTES_TEST_REDIS")}
    env.update({"REDIS_URL": base_url, "PYTEST_XDIST_WORKER": "gw0", "CELERY_BROKER_URL": base_url})
    return subprocess.Popen(
        [sys.executable, "-c", CLAIM],
        cwd=settings.BASE_DIR,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


def test_two_runs_processes_claim_different_redis_databases() -> None:
    """Two checkouts' first xdist workers, started with the same REDIS_URL, while both live (from
    database 0 up: a claim touches no data, and other runs on this machine may hold some)."""
    base = "redis://127.0.0.1:6379/0"
    first = _claiming_process(base)
    second = _claiming_process(base)
    try:
        assert first.stdout is not None and second.stdout is not None
        urls = {first.stdout.readline().strip(), second.stdout.readline().strip()}
    finally:
        for proc in (first, second):
            proc.communicate(timeout=30)
    assert len(urls) == 2, urls
    assert all(url.startswith("redis://127.0.0.1:6379/") for url in urls), urls
    # This process's own database is one no other process holds either.
    assert settings.REDIS_URL not in urls
