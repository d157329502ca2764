from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model

from notes.models import Note, Participant
from notes.roles import CONTRIBUTOR, RATER
from notes.services import post_create

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.django_db
def test_it_reports_healthy_database_and_broker(anon_client: Any, admin_client: Any) -> None:
    assert anon_client.get("/healthz").json() == {"status": "ok", "down": []}
    response = admin_client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {
        "status": "ok",
        "down": [],
        "checks": {"database": "ok", "cache": "ok", "broker": "ok"},
    }


@pytest.mark.django_db
def test_it_reports_an_unreachable_broker_with_details_to_staff_only(
    anon_client: Any, admin_client: Any, caplog: pytest.LogCaptureFixture
) -> None:
    from crowdnotes_site.celery import app

    original = app.conf.broker_url
    app.conf.broker_url = "redis://127.0.0.1:1/0"
    try:
        public = anon_client.get("/healthz")
        staff = admin_client.get("/healthz")
    finally:
        app.conf.broker_url = original
    assert public.status_code == 503
    assert public.json() == {"status": "error", "down": ["broker"]}  # no internal host, port or exception text
    assert "127.0.0.1:1" not in public.content.decode()
    assert staff.status_code == 503
    body = staff.json()
    assert body["checks"]["database"] == "ok"
    assert body["checks"]["broker"].startswith("error:")
    assert any("broker check failed" in record.getMessage() for record in caplog.records)


@pytest.mark.django_db
def test_it_lists_posts_with_their_notes_and_statuses(anon_client: Any) -> None:
    post = post_create(text="Vitamin C megadoses <b>cure</b> cancer")
    Note.objects.create(post=post, text="Trials found no benefit of vitamin C on survival.")
    response = anon_client.get("/")
    html = response.content.decode()
    assert response.status_code == 200
    assert "Vitamin C megadoses &lt;b&gt;cure&lt;/b&gt; cancer" in html
    assert "Trials found no benefit" in html
    assert "Needs More Ratings" in html
    assert '<script src="/static/vendor/htmx.min.js"' in html
    assert "hx-headers" in html


@pytest.mark.django_db
def test_it_signs_up_a_contributor_and_rater(anon_client: Any) -> None:
    response = anon_client.post(
        "/accounts/signup/",
        {
            "username": "newbie",
            "email": "",
            "password1": "a-long-Passphrase-42",
            "password2": "a-long-Passphrase-42",
            "roles": [CONTRIBUTOR, RATER],
        },
    )
    assert response.status_code == 302
    user = get_user_model().objects.get(username="newbie")
    assert set(user.groups.values_list("name", flat=True)) == {CONTRIBUTOR, RATER}
    assert user.has_perm("notes.add_post") and user.has_perm("notes.add_rating")
    assert not user.has_perm("judging.view_judgedecision")
    assert Participant.objects.filter(user=user).exists()


@pytest.mark.django_db(transaction=True)
def test_concurrent_sign_ups_of_one_name_give_one_account_and_form_errors(settings: Any) -> None:
    """Six people submit the same name (in two letter cases) at once: one account, five form
    errors, no duplicate-key 500."""
    import threading

    from django.db import connection

    from tests.conftest import CsrfClient

    settings.RATE_LIMITS = {**settings.RATE_LIMITS, "signup": "100/h"}
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    start = threading.Barrier(6)
    outcomes: list[tuple[int, str]] = []

    def sign_up(name: str) -> None:
        client = CsrfClient()
        client.get("/accounts/signup/")  # the CSRF cookie, as a browser has it
        start.wait()
        try:
            data = {"username": name, "password1": "a-long-Passphrase-42", "password2": "a-long-Passphrase-42"}
            response = client.post("/accounts/signup/", {**data, "roles": [RATER]})
            outcomes.append((response.status_code, response.content.decode()))
        except Exception as exc:  # what the test client raises for a 500
            outcomes.append((500, repr(exc)))
        finally:
            connection.close()

    threads = [threading.Thread(target=sign_up, args=("racer" if i % 2 else "Racer",)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    statuses = sorted(status for status, _ in outcomes)
    assert statuses == [200] * 5 + [302], [body[:300] for status, body in outcomes if status == 500]
    assert all("A user with that username already exists." in body for status, body in outcomes if status == 200)
    assert get_user_model().objects.filter(username__iexact="racer").count() == 1


@pytest.mark.django_db
def test_it_requires_a_role_at_signup(anon_client: Any) -> None:
    response = anon_client.post(
        "/accounts/signup/",
        {"username": "x", "password1": "a-long-Passphrase-42", "password2": "a-long-Passphrase-42"},
    )
    assert response.status_code == 200
    assert "This field is required" in response.content.decode()
    assert not get_user_model().objects.filter(username="x").exists()


@pytest.mark.django_db
def test_it_refuses_a_post_without_csrf_token(anon_client: Any) -> None:
    response = anon_client.post("/accounts/signup/", {"username": "y"}, csrf=False)
    assert response.status_code == 403


def _run_manage(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    # Start from the environment a real deployment would have, not the test run's overrides.
    dropped = (
        "SECRET_KEY",
        "DEBUG",
        "DATABASE_URL",
        "LLM_TIMEOUT_S",
        "SECURE_SSL_REDIRECT",
        "DJANGO_ALLOW_ASYNC_UNSAFE",
    )
    base = {k: v for k, v in os.environ.items() if k not in dropped}
    base["DJANGO_SETTINGS_MODULE"] = "crowdnotes_site.settings"
    base.update(env)
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=base, capture_output=True, text=True, timeout=120
    )


def test_it_names_a_missing_secret_key_at_start() -> None:
    result = _run_manage("check", DEBUG="0")
    assert result.returncode != 0
    assert "SECRET_KEY" in result.stderr


def test_it_refuses_to_start_without_database_url_unless_debug_or_embedded() -> None:
    result = _run_manage("check", DEBUG="0", SECRET_KEY="x" * 50)
    assert result.returncode != 0
    assert "DATABASE_URL is required" in result.stderr and "CROWDNOTES_EMBEDDED=1" in result.stderr


@pytest.mark.parametrize("env", [{"DEBUG": "1"}, {"DEBUG": "0", "SECRET_KEY": "x" * 50, "CROWDNOTES_EMBEDDED": "1"}])
def test_debug_or_the_embedded_mode_runs_on_sqlite_without_database_url(env: dict[str, str], tmp_path: Path) -> None:
    code = "from django.conf import settings as s; print(s.DATABASES['default']['ENGINE'], s.DEBUG)"
    result = _run_manage("shell", "-c", code, CROWDNOTES_VAR_DIR=str(tmp_path), **env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == f"django.db.backends.sqlite3 {env['DEBUG'] == '1'}"


def test_the_demo_runs_in_the_embedded_mode() -> None:
    assert "export CROWDNOTES_EMBEDDED=${CROWDNOTES_EMBEDDED:-1}" in (ROOT / "scripts" / "demo.sh").read_text()


def test_the_embedded_mode_leaves_a_set_database_url_in_charge(tmp_path: Path) -> None:
    code = "from django.conf import settings as s; print(s.DATABASES['default']['ENGINE'])"
    url = "postgres://postgres@127.0.0.1:5432/crowdnotes"
    result = _run_manage("shell", "-c", code, DEBUG="0", SECRET_KEY="x" * 50, CROWDNOTES_EMBEDDED="1", DATABASE_URL=url)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "django.db.backends.postgresql"


def test_it_names_a_malformed_variable_at_start() -> None:
    result = _run_manage("check", DEBUG="1", LLM_TIMEOUT_S="soon")
    assert result.returncode != 0
    assert "LLM_TIMEOUT_S must be a number" in result.stderr


def test_it_passes_the_deploy_checks_with_production_settings() -> None:
    result = _run_manage(
        "check",
        "--deploy",
        "--fail-level",
        "WARNING",
        DEBUG="0",
        SECRET_KEY="x" * 20 + "-production-like-key-with-enough-entropy-0987654321",
        ALLOWED_HOSTS="crowdnotes.example.org",
        DATABASE_URL="postgres://postgres@127.0.0.1:5432/crowdnotes",
    )
    assert result.returncode == 0, result.stderr


def test_the_embedded_broker_keeps_all_its_folders_under_var(tmp_path: Path) -> None:
    code = "import json; from django.conf import settings as s; print(json.dumps(s.CELERY_BROKER_TRANSPORT_OPTIONS))"
    result = _run_manage(
        "shell", "-c", code, DEBUG="1", REDIS_URL="", CELERY_BROKER_URL="", CROWDNOTES_VAR_DIR=str(tmp_path)
    )
    assert result.returncode == 0, result.stderr
    options = json.loads(result.stdout.strip().splitlines()[-1])
    folders = [options[key] for key in ("data_folder_in", "data_folder_out", "processed_folder", "control_folder")]
    assert all(Path(folder).is_relative_to(tmp_path / "broker") for folder in folders)
    assert (tmp_path / "broker" / "control").is_dir()


@pytest.mark.django_db
def test_it_sends_a_content_security_policy_without_inline_code(anon_client: Any) -> None:
    response = anon_client.get("/")
    policy = dict(part.strip().split(" ", 1) for part in response["Content-Security-Policy"].split(";") if part.strip())
    assert policy["script-src"] == "'self'"
    assert policy["style-src"] == "'self'"
    assert policy["frame-ancestors"] == "'none'"
    assert "unsafe-inline" not in response["Content-Security-Policy"]
    html = response.content.decode()
    assert "<script>" not in html and "<style" not in html and " style=" not in html
    # htmx would otherwise inject an inline <style> for its indicators, which the policy blocks.
    assert '"includeIndicatorStyles": false' in html


@pytest.mark.django_db
def test_it_explains_a_missing_page_and_where_to_go(contributor_client: Any) -> None:
    response = contributor_client.get("/drafts/999999/")
    html = response.content.decode()
    assert response.status_code == 404
    assert "Page not found" in html
    assert "/drafts/999999/" in html
    assert 'href="/me/notes/"' in html


@pytest.mark.django_db
def test_it_explains_a_missing_role(rater_client: Any) -> None:
    response = rater_client.get("/contribute/")
    html = response.content.decode()
    assert response.status_code == 403
    assert "does not have the role this page needs" in html
    assert 'href="/rate/"' in html


@pytest.mark.django_db
def test_answers_carry_a_permissions_policy_no_server_banner_and_an_httponly_csrf_cookie(member_password: Any) -> None:
    """The CSRF cookie is hidden from scripts, yet htmx's header token (read from the page, not the
    cookie) still passes the check."""
    import re

    from django.test import Client

    client = Client(enforce_csrf_checks=True)
    page = client.get("/accounts/login/")
    assert "camera=()" in page["Permissions-Policy"] and "geolocation=()" in page["Permissions-Policy"]
    assert "Server" not in page.headers
    assert page.cookies["csrftoken"]["httponly"] is True
    match = re.search(r"hx-headers='\{\"X-CSRFToken\": \"([^\"]+)\"\}'", page.content.decode())
    assert match
    response = client.post(
        "/accounts/login/", {"username": "dana", "password": member_password}, headers={"X-CSRFToken": match[1]}
    )
    assert response.status_code == 302
    assert client.post("/accounts/login/", {"username": "dana", "password": member_password}).status_code == 403


@pytest.fixture
def member_password(make_user: Any) -> str:
    user = make_user("dana")
    user.set_password("a-long-Passphrase-42")
    user.save()
    return "a-long-Passphrase-42"


def test_the_documented_nginx_config_hides_the_server_banner_and_passes_the_client_address() -> None:
    config = (ROOT / "deploy" / "nginx.conf").read_text()
    directives = {line.split("#")[0].strip() for line in config.splitlines()}
    assert "server_tokens off;" in directives
    assert "more_clear_headers Server;" in directives  # nginx's own banner (headers-more module)
    assert "proxy_hide_header Server;" in directives  # gunicorn's
    assert "proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;" in directives
    assert "proxy_set_header X-Forwarded-Proto $scheme;" in directives
    assert "TRUSTED_PROXY_COUNT=1" in config


def test_every_page_links_a_favicon_and_favicon_ico_finds_it(anon_client: Any, db: None) -> None:
    from django.contrib.staticfiles import finders

    response = anon_client.get("/favicon.ico")
    assert response.status_code == 301 and response["Location"].endswith("favicon.svg")
    assert finders.find("favicon.svg") is not None
    assert 'rel="icon"' in anon_client.get("/").content.decode()


def test_a_banner_shows_while_the_demo_warms_up_in_the_background(
    anon_client: Any, db: None, settings: Any, tmp_path: Path
) -> None:
    settings.VAR_DIR = tmp_path
    assert "Warming up in the background" not in anon_client.get("/").content.decode()
    (tmp_path / "warmup.running").write_text("06:12\n")
    page = anon_client.get("/").content.decode()
    assert "Warming up in the background since 06:12 UTC" in page and "Every page works now" in page
    (tmp_path / "warmup.running").unlink()  # what scripts/lib/warmup.sh does when it is done
    assert "Warming up" not in anon_client.get("/").content.decode()
    (tmp_path / "benchmark.running").write_text("06:20\n")
    assert "judging the demo dataset in the background since 06:20 UTC" in anon_client.get("/").content.decode()


def test_demo_sh_warms_up_after_the_app_is_up_and_set_up_steps_report_progress() -> None:
    root = Path(__file__).resolve().parents[1]
    demo = (root / "scripts" / "demo.sh").read_text()
    # The slow warm-up is not a step before the first page: it starts after the web server.
    assert "procs_run $PY manage.py evidence_warmup" not in demo and "index_documents" not in demo
    assert demo.index("warmup.running") < demo.index("manage.py runserver")
    assert "evidence_warmup" in (root / "scripts" / "lib" / "warmup.sh").read_text()
    # A set-up step longer than 10 s prints a progress line every 10 s.
    out = subprocess.run(
        ["/bin/bash", "-c", f"set -euo pipefail; . {root}/scripts/lib/procs.sh; PROCS_TICK_S=1 procs_run sleep 3.5"],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    assert out.stderr.count("still running after") >= 2 and "sleep 3.5" in out.stderr


def test_the_benchmark_banner_links_the_benchmark_page_for_admins_only(
    settings: Any, tmp_path: Any, contributor_client: Any, admin_client: Any
) -> None:
    settings.VAR_DIR = tmp_path
    (tmp_path / "benchmark.running").write_text("06:00")
    contributor_page = contributor_client.get("/").content.decode()
    assert "benchmark-running" in contributor_page and "/judging/benchmark/" not in contributor_page
    assert "Admins see its progress on the Benchmark page." in contributor_page
    admin_page = admin_client.get("/").content.decode()
    assert 'href="/judging/benchmark/">Benchmark</a> shows its progress' in admin_page


def test_a_403_is_logged_in_one_line_without_a_traceback(rater_client: Any, capsys: Any) -> None:
    import logging.config

    from django.conf import settings as django_settings

    logging.config.dictConfig(django_settings.LOGGING)  # the app's handlers, as a server runs them
    capsys.readouterr()
    assert rater_client.get("/supernotes/stuck/").status_code == 403
    lines = [line for line in capsys.readouterr().err.splitlines() if '"django.request"' in line]
    assert lines, "the refusal is logged"
    records = [json.loads(line) for line in lines]
    assert all(r["status_code"] == 403 and "exc" not in r for r in records)


def test_the_warmup_banner_is_polled_away_on_open_pages_and_says_what_the_last_warmup_took(
    anon_client: Any, db: None, settings: Any, tmp_path: Path
) -> None:
    """The banner is polled away on pages left open, and says what the last warm-up of this install
    took rather than a fixed "about 5 minutes"."""
    settings.VAR_DIR = tmp_path
    (tmp_path / "warmup.running").write_text("06:12\n")
    (tmp_path / "warmup.last-seconds").write_text("185\n")
    page = anon_client.get("/").content.decode()
    assert 'id="banners" hx-get="/banners/" hx-trigger="every 20s"' in page  # polled while it shows
    assert "The last warm-up of this install took 3 minutes" in page and "about 5 minutes" not in page
    assert "Warming up in the background since 06:12 UTC" in anon_client.get("/banners/").content.decode()
    (tmp_path / "warmup.running").unlink()
    done = anon_client.get("/banners/").content.decode()
    assert "Warming up" not in done and "hx-get" not in done  # the poll replaces it and stops
    assert 'id="banners" hx-get' not in anon_client.get("/").content.decode()


@pytest.mark.parametrize(
    ("env", "backend", "location"),
    [
        ({"REDIS_URL": "", "CELERY_BROKER_URL": ""}, "crowdnotes_site.filecache.LockedFileCache", "cache"),
        ({"REDIS_URL": "", "CELERY_BROKER_URL": "redis://127.0.0.1:6379/9"}, "django.core.cache.backends.redis.RedisCache",
         "redis://127.0.0.1:6379/9"),
        ({"REDIS_URL": "redis://127.0.0.1:6379/8", "CELERY_BROKER_URL": "redis://127.0.0.1:6379/9"},
         "django.core.cache.backends.redis.RedisCache", "redis://127.0.0.1:6379/8"),
    ],
)  # fmt: skip
def test_the_default_cache_is_shared_by_every_process_on_every_broker(
    env: dict[str, str], backend: str, location: str, tmp_path: Path
) -> None:
    """The default cache is one that every process shares, so the X budget a worker learns reaches
    the writer page: REDIS_URL, else the broker's Redis, else a file cache (never per process)."""
    code = "import json; from django.conf import settings as s; print(json.dumps(s.CACHES['default']))"
    result = _run_manage("shell", "-c", code, DEBUG="1", CROWDNOTES_VAR_DIR=str(tmp_path), **env)
    assert result.returncode == 0, result.stderr
    default = json.loads(result.stdout.strip().splitlines()[-1])
    assert default["BACKEND"] == backend
    assert default["LOCATION"] == (str(tmp_path / location) if location == "cache" else location)
