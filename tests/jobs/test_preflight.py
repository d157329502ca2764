"""Pre-flight as background work: limits on the form, a worker runs the judges,
the page polls a result; and no web request loads torch, sentence-transformers, scikit-learn, scipy or openai."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest
import redis
from django.conf import settings
from django.urls import reverse

from judging.models import PreflightCheck
from tests.conftest import wait_for
from tests.judging.llm_answers import answers
from tests.notes.factories import make_job, make_post, make_ready_snippet
from tests.support import worker as worker_support
from tests.test_pure_imports import HEAVY

GOOD = {"post_text": "Garlic cures flu", "note_text": "No trial shows that.", "urls": "", "snippets": "Weather."}


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("snippets", "message"),
    [
        ("\n\n".join(f"snippet {i}" for i in range(11)), "At most 10 snippets (you gave 11)."),
        ("x" * 3001, "Snippet 1 is longer than 3000 characters"),
        ("\n\n".join(["word " * 600] * 6), "Ensure this value has at most 15000 characters"),
    ],
)
def test_the_form_limits_snippet_count_and_size(contributor_client: Any, snippets: str, message: str) -> None:
    data = {**GOOD, "snippets": snippets}
    response = contributor_client.post(reverse("judging:preflight"), data)
    assert response.status_code == 400
    assert message in response.content.decode()
    # Under htmx the errors come back in the swapped section too (htmx swaps only 2xx answers).
    response = contributor_client.post(reverse("judging:preflight"), data, headers={"HX-Request": "true"})
    assert response.status_code == 200 and message in response.content.decode()
    assert not PreflightCheck.objects.exists()


@pytest.mark.django_db
def test_the_form_limits_the_other_fields(contributor_client: Any) -> None:
    urls = "\n".join(f"https://a.org/{i}" for i in range(11))
    data = {**GOOD, "urls": urls, "note_text": "n" * 1001, "post_text": "p" * 2001}
    body = contributor_client.post(reverse("judging:preflight"), data).content.decode()
    assert "At most 10 URLs (you gave 11)." in body
    assert "at most 1000 characters" in body and "at most 2000 characters" in body


@pytest.mark.django_db
def test_a_pending_check_polls_and_only_its_owner_sees_it(contributor_client: Any, make_user: Any) -> None:
    from notes.roles import CONTRIBUTOR
    from tests.conftest import _client_for

    response = contributor_client.post(reverse("judging:preflight"), GOOD)
    check = PreflightCheck.objects.get()
    assert response["Location"] == f"/judging/preflight/{check.pk}/"
    page = contributor_client.get(response["Location"]).content.decode()
    assert f'hx-get="/judging/preflight/{check.pk}/" hx-trigger="every 1s"' in page
    assert '<meta http-equiv="refresh" content="3">' in page  # works without JavaScript too
    # (the test's transaction never commits, so the outbox still holds the task: the page says so)
    assert "Queued: this check will start when the worker queue is reachable" in page
    other = _client_for(make_user("otto", CONTRIBUTOR))
    assert other.get(response["Location"]).status_code == 404


@pytest.mark.django_db(transaction=True)
def test_a_worker_runs_the_judges_and_the_page_shows_them(
    contributor_client: Any, llm_server: Any, celery_worker: Any
) -> None:
    llm_server.respond_with(
        answers(
            relevance="On topic.\nFinal decision: yes",
            correctness="Accurate.\nFinal decision: yes",
            helpfulness="Clear and sourced.\nFinal decision: yes",
        )
    )
    response = contributor_client.post(reverse("judging:preflight"), GOOD)
    check = PreflightCheck.objects.get()
    wait_for(lambda: PreflightCheck.objects.filter(pk=check.pk, state=PreflightCheck.State.DONE).exists(), 60)
    page = contributor_client.get(response["Location"], headers={"HX-Request": "true"}).content.decode()
    assert "hx-trigger" not in page  # done: the polling stops
    assert "Clear and sourced." in page and "all three judges pass" in page
    assert len(llm_server.requests) == 3


FRESH_INTERPRETER = """
import json, os, sys
import django
django.setup()
from django.contrib.auth import get_user_model
from django.test import Client
from crowdnotes_site.celery import app
app.conf.broker_url = "redis://127.0.0.1:1/0"  # an unreachable broker: the outbox keeps the tasks
users = {u.username: u for u in get_user_model().objects.all()}
ids = json.loads(os.environ["PAGE_IDS"])
client = Client(SERVER_NAME="localhost")
client.force_login(users["carla"])
statuses = {}
def hit(method, path, data=None):
    response = getattr(client, method)(path, data or {})
    statuses[f"{method.upper()} {path}"] = response.status_code
hit("get", "/")
hit("get", f"/posts/{ids['post']}/")
hit("get", "/contribute/")
hit("get", f"/drafts/{ids['job']}/")
hit("get", "/me/notes/")
hit("get", "/judging/preflight/")
hit("post", "/judging/preflight/", {"post_text": "Garlic cures flu", "note_text": "No.", "snippets": "Weather."})
hit("post", f"/drafts/{ids['job']}/preflight/", {"text": "Onions do not cure colds, trials show."})
client.force_login(users["rafa"])
hit("get", "/rate/")
client.force_login(users["ada"])
hit("get", "/judging/audit/")
heavy = sorted({m.split(".")[0] for m in sys.modules} & set(json.loads(os.environ["HEAVY"])))
print(json.dumps({"statuses": statuses, "heavy": heavy}))
"""


@pytest.mark.django_db(transaction=True)
def test_serving_the_main_pages_imports_no_model_library(
    contributor: Any, rater: Any, admin_user: Any, contributor_client: Any
) -> None:
    job = make_job(contributor, make_post("Onions in socks cure colds."))
    snippet = make_ready_snippet(job, "https://a.org/onion", "Onions do not cure colds.")
    contributor_client.post(f"/snippets/{snippet.pk}/confirm/", {"passage": snippet.passage_id})
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        "DATABASE_URL": worker_support.test_database_url(),
        "REDIS_URL": settings.REDIS_URL,
        "PAGE_IDS": json.dumps({"post": job.post_id, "job": job.pk}),
        "HEAVY": json.dumps(HEAVY),
        "LLM_BASE_URL": "",
        "ALLOWED_HOSTS": "localhost",
    }
    out = subprocess.run(
        [sys.executable, "-c", FRESH_INTERPRETER],
        cwd=worker_support.ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    report = json.loads(out.stdout.strip().splitlines()[-1])
    # The embedding model, scikit-learn, scipy and openai load in workers only, never in a web request.
    assert report["heavy"] == []
    assert set(report["statuses"].values()) <= {200, 302}, report["statuses"]
    assert PreflightCheck.objects.count() == 2  # both pre-flights were queued, not run
    redis.Redis.from_url(settings.CELERY_BROKER_URL).delete("llm")
