"""An admin watches the scorer: new ratings on a demo note near the threshold, "Rescore now" on the
scoring page, the run's progress, and the note's new status, in headless Chromium."""

from __future__ import annotations

from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from playwright.sync_api import expect

from notes import services
from notes.demo import NEAR_THRESHOLD_RATINGS
from notes.models import Note, NoteStatus, Participant, RatingLevel, ScoringRun
from tests.support.screenshots import docs_image_path


@pytest.mark.browser
@pytest.mark.worker
def test_it_rescores_from_the_scoring_page_and_a_demo_note_changes_status(
    page: Any, live_server: Any, celery_worker: Any, cn_data: Path, admin_user: Any
) -> None:
    call_command(
        "load_demo",
        "--no-public-sample",
        "--no-judging",  # the worker would judge the demo notes too; this test is about scoring
        stdout=StringIO(),
    )
    target = next(n for n in Note.objects.filter(is_demo=True) if n.num_ratings == NEAR_THRESHOLD_RATINGS)
    assert target.status == NoteStatus.NEEDS_MORE_RATINGS
    unrated = Participant.objects.filter(external_id__startswith="demo-rater-").exclude(ratings__note=target)
    for rater in list(unrated.filter(rater_factor__lt=0)[:3]) + list(unrated.filter(rater_factor__gte=0)[:3]):
        services.rating_submit(rater=rater, note=target, level=RatingLevel.HELPFUL)

    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("#id_username", admin_user.username)
    page.fill("#id_password", "pw-for-tests-123")
    page.click("button[type=submit]")
    page.click("nav >> text=Scoring")
    assert "every" in page.inner_text("#scoring")
    page.click("button:has-text('Rescore now')")
    # htmx swaps in the queued run and polls until it is done.
    page.wait_for_selector("#pending-run", timeout=10_000)
    # The demo load's own run is the last run until the admin's finishes.
    expect(page.locator("#last-run")).to_contain_text("admin (rescore now)", timeout=120_000)
    run = ScoringRun.objects.get(trigger=ScoringRun.Trigger.ADMIN)
    assert run.state == ScoringRun.State.DONE
    assert f"Run {run.pk} (admin (rescore now))" in page.inner_text("#last-run")
    changes = page.inner_text("#status-changes")
    assert target.text[:40] in changes and "Currently Rated Helpful" in changes
    target.refresh_from_db()
    assert target.status == NoteStatus.HELPFUL
    page.screenshot(path=str(docs_image_path("admin-scoring.png")), full_page=True)

    # The post page shows the admin each note's intercept and factor.
    page.goto(f"{live_server.url}/posts/{target.post_id}/#note-{target.pk}")
    assert f"intercept {target.intercept:.3f}" in page.inner_text(f"#note-{target.pk}")
