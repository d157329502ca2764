from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.urls import reverse

from notes.models import Note, Post, Topic

pytestmark = pytest.mark.django_db

PAGES = ["analytics:index", "analytics:delays", "analytics:delays_csv", "analytics:spikes", "analytics:judging"]


@pytest.fixture
def imported(cn_data: Path) -> Path:
    call_command(
        "import_communitynotes",
        "--notes", str(cn_data / "colin-fraser/notes-00000.tsv"),
        "--status-history", str(cn_data / "mcroston/noteStatusHistory-00000.tsv"),
        stdout=io.StringIO(),
    )  # fmt: skip
    return cn_data


@pytest.mark.parametrize("name", PAGES)
def test_analytics_are_for_admins_only(name: str, rater_client: Any, contributor_client: Any) -> None:
    assert rater_client.get(reverse(name)).status_code == 403
    assert contributor_client.get(reverse(name)).status_code == 403


def test_the_delays_page_matches_the_file_command_on_the_real_sample(imported: Path, admin_client: Any) -> None:
    out = io.StringIO()
    call_command(
        "analytics_delays",
        notes=str(imported / "colin-fraser/notes-00000.tsv"),
        status_history=str(imported / "mcroston/noteStatusHistory-00000.tsv"),
        json=True,
        stdout=out,
    )
    files = json.loads(out.getvalue())["post_to_first_note_hours"]
    response = admin_client.get(reverse("analytics:delays"))
    assert response.status_code == 200
    page = response.context["summary"].report.post_to_first_note_hours
    # Same definition (post time from the tweet id, note time) on the same notes: same numbers.
    assert page.n == files["n"]
    assert page.p50 == pytest.approx(files["p50"], abs=1e-3) and page.p90 == pytest.approx(files["p90"], abs=1e-3)
    html = response.content.decode()
    assert "<svg" in html and "Delay percentiles (hours)" in html and "10.4 h" in html
    rows = list(csv.reader(io.StringIO(admin_client.get(reverse("analytics:delays_csv")).content.decode())))
    assert rows[0] == ["metric", "p25", "p50", "p75", "p90", "n"]
    assert rows[1][0].startswith("post") and float(rows[1][2]) == pytest.approx(files["p50"], abs=1e-3)


def test_the_delays_page_filters_by_topic_and_origin(admin_client: Any) -> None:
    import datetime as dt

    from django.utils import timezone

    now = timezone.now()
    for topic, hours in ((Topic.TREATMENTS, 2), (Topic.DISEASES, 30)):
        post = Post.objects.create(text=f"post {topic}", text_hash=topic, topic=topic, posted_at=now)
        Note.objects.create(post=post, text="n", created_at=now + dt.timedelta(hours=hours))
    both = admin_client.get(reverse("analytics:delays")).context["summary"].report.post_to_first_note_hours
    assert (both.n, both.p50) == (2, pytest.approx(16.0))
    one = admin_client.get(reverse("analytics:delays"), {"topic": Topic.TREATMENTS}).context["summary"]
    assert (one.report.post_to_first_note_hours.n, one.report.post_to_first_note_hours.p50) == (1, pytest.approx(2.0))
    none = admin_client.get(reverse("analytics:delays"), {"origin": Note.Origin.AUTOMATED}).context["summary"]
    assert none.n_notes == 0 and none.report.post_to_first_note_hours.p50 is None


def test_the_spikes_and_judging_pages_render_the_real_sample(imported: Path, admin_client: Any) -> None:
    notes = admin_client.get(reverse("analytics:spikes"))
    assert notes.status_code == 200 and notes.context["report"].n_items == 4880
    assert "Notes per day" in notes.content.decode()
    response = admin_client.get(reverse("analytics:spikes"), {"unit": "posts"})
    report = response.context["report"]
    assert report.unit == "posts" and report.n_items == Post.objects.count()
    days = {s.day.isoformat() for s in report.spikes}
    # Birdwatch's public launch (2021-01-28) and the flood of flags on 2021-03-11.
    assert {"2021-01-28", "2021-03-11"} <= days
    assert all(s.count > s.threshold for s in report.spikes)
    assert all(s.terms for s in report.spikes if s.day.isoformat() >= "2021-01-28")
    html = response.content.decode()
    assert html.count('fill="#c53030"') == len(report.spikes)  # one red marker per spike
    stricter = admin_client.get(reverse("analytics:spikes"), {"unit": "posts", "k": "6"}).context["report"]
    assert len(stricter.spikes) < len(report.spikes)
    judging = admin_client.get(reverse("analytics:judging"))
    assert judging.status_code == 200
    cats = judging.context["cats"]
    assert sum(cats.human) > 1000 and sum(cats.machine) == 0 and cats.n_by_rules == sum(cats.human)
    assert "Evidence sources by category" in judging.content.decode()
