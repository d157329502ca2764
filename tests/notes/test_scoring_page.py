"""The admin scoring page: recorded runs (scheduled and asked for), rescore now as a queued task
with progress, status changes of the last run; and the demo's near-threshold notes."""

from __future__ import annotations

import html as html_lib
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.utils import timezone

from crowdnotes_site.queue import Enqueued
from notes import services
from notes.demo import NEAR_THRESHOLD_RATINGS
from notes.models import Note, NoteStatus, Participant, Post, RatingLevel, ScoringRun
from notes.scoring import services as scoring_services
from notes.tasks import score_notes

pytestmark = pytest.mark.django_db


def _demo(cn_data: Path) -> None:
    from io import StringIO

    call_command("load_demo", stdout=StringIO())


def test_it_queues_one_rescore_run_and_shows_its_progress(
    admin_client: Any, django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = admin_client.post("/scoring/rescore/")
        again = admin_client.post("/scoring/rescore/")  # while queued: the same run, nothing new queued
    run = ScoringRun.objects.get()
    assert response.status_code == again.status_code == 302
    assert response["Location"] == "/scoring/"
    assert callbacks == [Enqueued("notes.tasks.score_notes", (run.pk,))]
    assert run.requested_by is not None and run.requested_by.username == "ada"
    assert (run.trigger, run.state) == ("admin", "queued")
    page = admin_client.get("/scoring/").content.decode()
    assert 'id="pending-run" data-state="queued"' in page
    assert 'hx-get="/scoring/"' in page  # polls while the run is pending
    assert re.search(r"<button[^>]*disabled[^>]*>Rescore now", page)


def test_it_records_a_run_and_lists_its_status_changes(
    admin_client: Any, cn_data: Path, django_capture_on_commit_callbacks: Any
) -> None:
    _demo(cn_data)
    near = [n for n in Note.objects.filter(is_demo=True) if n.num_ratings == NEAR_THRESHOLD_RATINGS]
    assert near and all(n.status == NoteStatus.NEEDS_MORE_RATINGS for n in near)
    target = near[0]
    # A handful of new Helpful ratings: three from each side (the sign of the rater's factor).
    unrated = Participant.objects.filter(external_id__startswith="demo-rater-").exclude(ratings__note=target)
    fresh = list(unrated.filter(rater_factor__lt=0)[:3]) + list(unrated.filter(rater_factor__gte=0)[:3])
    assert len(fresh) == 6
    for rater in fresh:
        services.rating_submit(rater=rater, note=target, level=RatingLevel.HELPFUL)
    with django_capture_on_commit_callbacks(execute=False):
        admin_client.post("/scoring/rescore/")
    run = ScoringRun.objects.get(trigger=ScoringRun.Trigger.ADMIN)
    score_notes(run.pk)  # what the worker runs
    run.refresh_from_db()
    target.refresh_from_db()
    assert run.state == ScoringRun.State.DONE and run.duration_s is not None
    assert run.summary["status_changes"] >= 1
    assert target.status == NoteStatus.HELPFUL
    page = html_lib.unescape(admin_client.get("/scoring/").content.decode())
    assert f"Run {run.pk} (admin (rescore now))" in page
    assert f"{run.summary['status_changes']} status change" in page
    changes = page.split('id="status-changes"')[1]
    assert target.text[:40] in changes and "Currently Rated Helpful" in changes
    # Nothing pending: the page still re-reads itself (slower), so it never shows a stale "next run".
    assert 'id="pending-run"' not in page and 'hx-trigger="every 20s"' in page


def test_it_records_scheduled_runs_and_the_next_one(admin_client: Any, settings: Any) -> None:
    settings.CELERY_BEAT_SCHEDULE = {"score-notes": {"task": "notes.tasks.score_notes", "schedule": 180}}
    score_notes()  # a beat run: no run id
    run = ScoringRun.objects.get()
    assert (run.trigger, run.state) == ("schedule", "done")
    page = admin_client.get("/scoring/").content.decode()
    assert "every 180 s" in page
    assert "Next scheduled run expected at" in page and "overdue" not in page
    # The beat run did not come: the page says so instead of showing a past time as "next".
    from datetime import timedelta

    ScoringRun.objects.filter(pk=run.pk).update(created_at=run.created_at - timedelta(seconds=600))
    page = admin_client.get("/scoring/").content.decode()
    assert "Next scheduled run expected at" not in page and "has not started" in page
    assert "Is Celery beat running" in page and 'hx-trigger="every 20s"' in page
    due = (run.created_at - timedelta(seconds=600) + timedelta(seconds=180)).strftime("%Y-%m-%d %H:%M:%S")
    assert f"Overdue since {due} UTC" in page


def _shown_next_run(page: str) -> datetime | None:
    found = re.search(r"Next scheduled run expected at (\S+ \S+) UTC", page)
    return datetime.strptime(found.group(1), "%Y-%m-%d %H:%M:%S").replace(tzinfo=UTC) if found else None


def test_the_next_run_it_shows_is_never_in_the_past(
    admin_client: Any, settings: Any, django_capture_on_commit_callbacks: Any
) -> None:
    from datetime import timedelta

    settings.CELERY_BEAT_SCHEDULE = {"score-notes": {"task": "notes.tasks.score_notes", "schedule": 180}}
    score_notes()
    run = ScoringRun.objects.get()
    # An admin's rescore is pending while the scheduled run is late: the late time is not "next".
    with django_capture_on_commit_callbacks(execute=False):
        admin_client.post("/scoring/rescore/")
    for late_s in (250, 190):  # due 70 s ago (past the grace), and 10 s ago (within it)
        ScoringRun.objects.filter(pk=run.pk).update(created_at=timezone.now() - timedelta(seconds=late_s))
        page = html_lib.unescape(admin_client.get("/scoring/").content.decode())
        assert _shown_next_run(page) is None
        assert ("Overdue since" in page) == (late_s == 250)
        assert ("The scheduled run is due (since" in page) == (late_s == 190)
    ScoringRun.objects.filter(pk=run.pk).update(created_at=timezone.now() - timedelta(seconds=100))
    page = html_lib.unescape(admin_client.get("/scoring/").content.decode())
    shown = _shown_next_run(page)
    assert shown is not None and shown > timezone.now().replace(microsecond=0)


def test_it_records_a_failed_run(monkeypatch: Any) -> None:
    def broken(**kwargs: Any) -> Any:
        raise RuntimeError("scorer exploded")

    monkeypatch.setattr(scoring_services, "notes_rescore", broken)
    with pytest.raises(RuntimeError):
        scoring_services.scoring_run_execute()
    run = ScoringRun.objects.get()
    assert run.state == ScoringRun.State.FAILED and "scorer exploded" in run.error


def test_it_refuses_the_scoring_page_to_raters_and_contributors(rater_client: Any, contributor_client: Any) -> None:
    assert rater_client.get("/scoring/").status_code == 403
    assert contributor_client.post("/scoring/rescore/").status_code == 403


def test_it_loads_health_posts_only_as_plain_text(cn_data: Path, anon_client: Any) -> None:
    _demo(cn_data)
    texts = list(Post.objects.values_list("text", flat=True))
    assert texts
    for text in texts:  # the demo's and the real imported posts
        assert "&quot;" not in text and "&amp;" not in text and '""' not in text
    for text in Post.objects.filter(is_demo=True).values_list("text", flat=True):
        assert not re.search(r"uber|postmates|impeach|duterte", text, re.IGNORECASE)
    body = anon_client.get("/").content.decode()
    assert "&amp;quot;" not in body and "&amp;amp;" not in body
    assert "posted 20" in body  # the demo posts carry their tweet's time (from its id)


def test_it_says_post_time_unknown_and_shows_a_known_one(anon_client: Any) -> None:
    from datetime import UTC, datetime

    unknown = services.post_create(text="Garlic cures measles.")
    known = services.post_create(text="Vitamin D cures flu.", posted_at=datetime(2024, 3, 1, 12, 0, tzinfo=UTC))
    assert "post time unknown" in anon_client.get(f"/posts/{unknown.pk}/").content.decode()
    page = anon_client.get(f"/posts/{known.pk}/").content.decode()
    assert "posted 2024-03-01 12:00" in page and "post time unknown" not in page
