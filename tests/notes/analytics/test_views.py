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

PAGES = [
    "analytics:index",
    "analytics:delays",
    "analytics:delays_csv",
    "analytics:spikes",
    "analytics:judging",
    "analytics:research",
]


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
    report = json.loads(out.getvalue())
    files = report["post_to_first_note_hours"]
    response = admin_client.get(reverse("analytics:delays"))
    assert response.status_code == 200
    page = response.context["summary"].report.post_to_first_note_hours
    # Same definition (post time from the tweet id, note time) on the same notes: same numbers.
    assert page.n == files["n"]
    assert page.p50 == pytest.approx(files["p50"], abs=1e-3) and page.p90 == pytest.approx(files["p90"], abs=1e-3)
    html = response.content.decode()
    assert "<svg" in html and "Delay percentiles (hours)" in html and "10.4 h" in html
    rows = list(csv.reader(io.StringIO(admin_client.get(reverse("analytics:delays_csv")).content.decode())))
    assert rows[0] == ["metric", "p25", "p50", "p75", "p90", "n", "left out (negative)"]
    assert rows[1][0].startswith("post") and float(rows[1][2]) == pytest.approx(files["p50"], abs=1e-3)
    # Note -> first verdict over the whole imported status history equals the file command's.
    imported_history = response.context["imported"].report
    verdicts = report["note_to_first_verdict_hours"]
    assert imported_history.note_to_first_verdict_hours.n == verdicts["n"] > 0
    assert imported_history.note_to_first_verdict_hours.p50 == pytest.approx(verdicts["p50"], abs=1e-3)
    assert imported_history.never_left_nmr_share == pytest.approx(report["never_left_nmr_share"])
    assert "Imported public status history" in html and "noteStatusHistory-00000.tsv" in html


STATUS_HISTORY = (
    "noteId\tparticipantId\tcreatedAtMillis\ttimestampMillisOfFirstNonNMRStatus\tfirstNonNMRStatus\t"
    "timestampMillisOfCurrentStatus\tcurrentStatus\ttimestampMillisOfMostRecentNonNMRStatus\tmostRecentNonNMRStatus\n"
    # created 2022-01-01 00:00 UTC; Helpful 2 h later
    "101\tA\t1640995200000\t1641002400000\tCURRENTLY_RATED_HELPFUL\t1641002400000\tCURRENTLY_RATED_HELPFUL\t-1\t\n"
    # created 2022-01-02; Not Helpful 10 h later
    "102\tB\t1641081600000\t1641117600000\tCURRENTLY_RATED_NOT_HELPFUL\t1641117600000\tCURRENTLY_RATED_NOT_HELPFUL\t-1\t\n"
    # created 2022-03-01; never left Needs More Ratings
    "103\tC\t1646092800000\t-1\t\t-1\tNEEDS_MORE_RATINGS\t-1\t\n"
)


def test_imported_status_history_gives_note_to_verdict_on_a_known_fixture(tmp_path: Path, admin_client: Any) -> None:
    path = tmp_path / "noteStatusHistory-00000.tsv"
    path.write_text(STATUS_HISTORY)
    notes = tmp_path / "notes-00000.tsv"
    notes.write_text("noteId\tparticipantId\tcreatedAtMillis\ttweetId\tsummary\n")  # no note of these imported
    for _ in range(2):  # idempotent: a re-import replaces, never duplicates
        call_command(
            "import_communitynotes", "--notes", str(notes), "--status-history", str(path), stdout=io.StringIO()
        )
    page = admin_client.get(reverse("analytics:delays"))
    got = page.context["imported"]
    assert got.n_rows == 3
    v = got.report.note_to_first_verdict_hours
    assert (v.n, v.p25, v.p50, v.p75) == (2, pytest.approx(4.0), pytest.approx(6.0), pytest.approx(8.0))
    assert got.report.never_left_nmr_share == pytest.approx(1 / 3)
    assert "<td>6.0</td>" in page.content.decode()
    # The date filters apply to the note's creation; topic and origin cannot, and say so.
    jan = admin_client.get(reverse("analytics:delays"), {"date_to": "2022-01-31"}).context["imported"]
    assert jan.report.n_notes_status == 2 and jan.report.never_left_nmr_share == 0
    by_topic = admin_client.get(reverse("analytics:delays"), {"topic": Topic.TREATMENTS})
    assert by_topic.context["imported"].report is None and "has no topic" in by_topic.content.decode()


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


def test_a_negative_delay_is_left_out_and_said_not_drawn_as_zero(admin_client: Any) -> None:
    import datetime as dt

    from django.utils import timezone

    now = timezone.now()
    early = Post.objects.create(text="pasted late", text_hash="a", posted_at=now)
    Note.objects.create(post=early, text="n", created_at=now - dt.timedelta(minutes=48))  # before its post
    ok = Post.objects.create(text="ok", text_hash="b", posted_at=now)
    Note.objects.create(post=ok, text="n", created_at=now + dt.timedelta(hours=3))
    response = admin_client.get(reverse("analytics:delays"))
    report = response.context["summary"].report.post_to_first_note_hours
    assert (report.n, report.n_negative, report.p25) == (1, 1, pytest.approx(3.0))
    html = response.content.decode()
    assert "1 post whose first note is dated before the post" in html and "not drawn as zero" in html
    assert "-0.8" not in html  # neither in the table nor in the chart


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


def test_a_locally_served_copy_counts_as_its_original_url_in_source_categories(admin_client: Any) -> None:
    from django.utils import timezone

    from crowdnotes_site.lib.categories import HEALTH_AUTHORITY, OTHER
    from evidence.models import EvidenceSource, Snippet

    served = "http://127.0.0.1:8001/health/cdc.gov__about-sids.html"
    # What fetching the served copy stores: a source at the loopback address, categorised "Other".
    fetched = EvidenceSource.objects.create(url=served, url_hash="x", category=OTHER)
    EvidenceSource.objects.create(
        url="https://www.cdc.gov/vaccine-safety/about/sids.html",
        url_hash="y",
        copy_url=served,
        indexed_at=timezone.now(),
    )
    post = Post.objects.create(text="SIDS and vaccines", text_hash="s")
    note = Note.objects.create(post=post, text="n")
    Snippet.objects.create(post=post, note=note, url=served, source=fetched)
    Snippet.objects.create(post=post, note=note, url="http://127.0.0.1:9/elsewhere", source=fetched)
    cats = admin_client.get(reverse("analytics:judging")).context["cats"]
    counts = dict(zip([c for c, _ in cats.categories], cats.human, strict=True))
    assert counts[HEALTH_AUTHORITY] == 1 and counts[OTHER] == 1  # the unindexed loopback URL stays "Other"


def test_the_delays_page_opens_on_all_the_data_and_a_range_without_notes_links_to_theirs(admin_client: Any) -> None:
    """Charts never open empty: Delays has no default date range, so it opens on every note;
    a range without notes says when the notes were written and links there (other filters kept)."""
    import datetime as dt

    from django.utils import timezone

    written = timezone.make_aware(dt.datetime(2022, 3, 1, 12))
    post = Post.objects.create(
        text="p", text_hash="p1", topic=Topic.TREATMENTS, posted_at=written - dt.timedelta(hours=3)
    )
    Note.objects.create(post=post, text="n", created_at=written)
    opened = admin_client.get(reverse("analytics:delays"))
    assert opened.context["summary"].n_notes == 1 and opened.context["summary"].report.post_to_first_note_hours.n == 1
    assert "no-data-in-range" not in opened.content.decode()
    empty = admin_client.get(reverse("analytics:delays"), {"date_from": "2025-01-01", "topic": Topic.TREATMENTS})
    page = empty.content.decode()
    assert empty.context["summary"].n_notes == 0
    assert "No notes in this range; the notes matching the other filters were written 2022-03-01 to 2022-03-01" in page
    assert f"topic={Topic.TREATMENTS}" in page.split('id="no-data-in-range"')[1].split("</p>")[0]
    follow = admin_client.get(reverse("analytics:delays") + "?" + empty.context["span_query"])
    assert follow.context["summary"].n_notes == 1
