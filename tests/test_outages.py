"""Degrade, don't 500: with Redis down, reads and log-in work, costly POSTs get a
"try again in a minute" page, /healthz names what is down; a database connection the server
dropped costs at most the request that found it, and that one gets a page that explains."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from django.db import connection

from crowdnotes_site.celery import app
from evidence.models import Prefetch
from notes.models import Note, Post
from notes.services import participant_for_user, post_create
from tests.conftest import CsrfClient
from tests.jobs.conftest import _point_broker
from tests.support import worker
from tests.support.processes import Gunicorn, OwnRedis

PASSWORD = "a-long-Passphrase-42"


@pytest.fixture
def own_redis(settings: Any) -> Iterator[OwnRedis]:
    """The cache and rate counters (and the broker) on a redis-server of this test alone."""
    server = OwnRedis()
    server.start()
    options = {"socket_connect_timeout": 1.0, "socket_timeout": 1.0}
    backend = "django.core.cache.backends.redis.RedisCache"
    settings.CACHES = {
        "default": {"BACKEND": backend, "LOCATION": server.url, "OPTIONS": options},
        "limits": {"BACKEND": backend, "LOCATION": server.url, "KEY_PREFIX": "limits", "OPTIONS": options},
    }
    real_broker = app.conf.broker_url
    _point_broker(app, server.url)
    try:
        yield server
    finally:
        _point_broker(app, real_broker)
        server.stop()


@pytest.mark.django_db
def test_with_redis_down_reads_and_log_in_work_and_costly_posts_say_try_again(
    own_redis: OwnRedis, make_user: Any, contributor_client: CsrfClient, rater_client: CsrfClient, contributor: Any
) -> None:
    member = make_user("mallory")
    member.set_password(PASSWORD)
    member.save()
    note = Note.objects.create(
        post=post_create(text="A claim about vitamins"), author=participant_for_user(user=contributor), text="Context."
    )
    assert contributor_client.post("/contribute/", {"text": "Claim 1", "urls": "https://a.org/1"}).status_code == 302

    own_redis.stop()

    # Reads are never counted: they do not need Redis.
    for path in ("/", f"/posts/{note.post_id}/", "/accounts/login/", "/contribute/"):
        assert contributor_client.get(path).status_code == 200, path
    # Log-in works; its lockout lives in the database, so it still holds too.
    visitor = CsrfClient()
    response = visitor.post("/accounts/login/", {"username": "mallory", "password": PASSWORD})
    assert response.status_code == 302
    assert visitor.session["_auth_user_id"] == str(member.pk)
    stranger = CsrfClient()
    for i in range(10):
        stranger.post("/accounts/login/", {"username": "mallory", "password": f"wrong-{i}"})
    assert stranger.post("/accounts/login/", {"username": "mallory", "password": PASSWORD}).status_code == 429
    # A cheap POST (a rating) fails open.
    assert rater_client.post(f"/rate/{note.pk}/", {"level": "HELPFUL"}).status_code == 302
    assert note.ratings.count() == 1
    # A costly POST fails closed, with a page that says so and when to come back.
    refused = contributor_client.post("/contribute/", {"text": "Claim 2", "urls": "https://a.org/2"})
    assert refused.status_code == 503
    assert refused["Retry-After"] == "60"
    assert "please try again in a minute" in refused.content.decode()
    assert list(Post.objects.filter(text__startswith="Claim").values_list("text", flat=True)) == ["Claim 1"]
    # The head start (a background htmx request) says it is paused instead of reloading the form.
    ahead = contributor_client.post("/evidence/prefetch/", {"urls": "https://www.cdc.gov/"}, HTTP_HX_REQUEST="true")
    assert ahead.status_code == 200
    assert "Not started: reading ahead is paused for a moment." in ahead.content.decode()
    assert not Prefetch.objects.exists()
    # /healthz names what is down, to anyone.
    health = CsrfClient().get("/healthz")
    assert health.status_code == 503
    assert health.json() == {"status": "error", "down": ["cache", "broker"]}

    own_redis.start()
    assert contributor_client.post("/contribute/", {"text": "Claim 2", "urls": "https://a.org/2"}).status_code == 302
    assert CsrfClient().get("/healthz").json() == {"status": "ok", "down": []}


def _terminate_backends(database: str, *, keep: set[int]) -> int:
    """pg_terminate_backend on every connection to `database` but `keep`: what a database restart does."""
    with psycopg.connect(worker.test_database_url().replace(f"/{database}", "/postgres"), autocommit=True) as admin:
        rows = admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s AND pid <> ALL(%s)",
            [database, list(keep)],
        ).fetchall()
    return len(rows)


@pytest.mark.django_db(transaction=True)
def test_a_dropped_database_connection_costs_one_request_with_a_page_that_explains(anon_client: CsrfClient) -> None:
    post_create(text="A claim about vitamins")
    assert anon_client.get("/").status_code == 200
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        own_pid = cursor.fetchone()[0]
    # The test client skips the per-request connection check, so this request meets the dead connection.
    assert _terminate_backends(connection.settings_dict["NAME"], keep=set()) >= 1
    found_it = anon_client.get("/")
    assert found_it.status_code == 503
    assert "The connection to our database was interrupted" in found_it.content.decode()
    after = anon_client.get("/")
    assert after.status_code == 200
    assert "A claim about vitamins" in after.content.decode()
    assert own_pid != _backend_pid()


def _backend_pid() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return int(cursor.fetchone()[0])


@pytest.mark.django_db(transaction=True)
def test_gunicorn_serves_every_request_after_its_database_connections_are_terminated(settings: Any) -> None:
    post_create(text="A claim about vitamins")
    database = connection.settings_dict["NAME"]
    server = Gunicorn(
        {
            "DJANGO_SETTINGS_MODULE": "tests.settings",
            "DATABASE_URL": worker.test_database_url(),
            "REDIS_URL": settings.REDIS_URL,
            "DB_CONN_MAX_AGE": "60",
        },
        workers=2,
    )
    try:
        # Each worker that served one of these holds a persistent connection (the kernel may hand
        # all of them to one worker, so at least one connection is certain).
        assert {server.get("/")[0] for _ in range(20)} == {200}
        terminated = _terminate_backends(database, keep={_backend_pid()})
        assert terminated >= 1
        answers = [server.get("/") for _ in range(40)]
    finally:
        server.stop()
    statuses = [status for status, _ in answers]
    assert 500 not in statuses
    failed = [body for status, body in answers if status != 200]
    assert len(failed) <= 2  # at most the one request per worker that found its connection dead
    assert all("The connection to our database was interrupted" in body for body in failed)
    assert "A claim about vitamins" in answers[-1][1]


def test_any_other_500_page_explains_itself(rf: Any) -> None:
    from django.views.defaults import server_error

    response = server_error(rf.get("/"))
    html = response.content.decode()
    assert response.status_code == 500
    assert "Something failed on our side" in html
    assert "check whether it was saved before sending it again" in html
