"""The Spikes page opens on a range with data, its axis follows the date filter, and an empty
range says where the data is."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.urls import reverse
from django.utils import timezone

from notes.models import Note, Post

pytestmark = pytest.mark.django_db


def _notes_on(day: dt.date, n: int, post: Post) -> None:
    when = timezone.make_aware(dt.datetime.combine(day, dt.time(12)))
    Note.objects.bulk_create([Note(post=post, text=f"Note {day} {i} about masks", created_at=when) for i in range(n)])


def _history(post: Post) -> tuple[dt.date, dt.date]:
    """A year of 2021 with a spike in the autumn, then a single note today (as the demo adds)."""
    start = dt.date(2021, 1, 1)
    for i in range(300):
        day = start + dt.timedelta(days=i)
        _notes_on(day, 40 if i == 250 else 1 + i % 3, post)
    _notes_on(timezone.now().date(), 1, post)
    return start, start + dt.timedelta(days=250)


def test_spikes_open_on_the_half_year_with_the_latest_spike_not_an_empty_recent_one(admin_client: Any) -> None:
    post = Post.objects.create(text="Masks cause harm.", text_hash="m")
    _, spike_day = _history(post)
    response = admin_client.get(reverse("analytics:spikes"))
    report = response.context["report"]
    assert [s.day for s in report.spikes] == [spike_day]
    assert report.shown_from <= spike_day <= report.shown_to
    assert report.shown_to < timezone.now().date() - dt.timedelta(days=180)
    html = response.content.decode()
    assert f"the data spans 2021-01-01 to {timezone.now().date():%Y-%m-%d}" in html and "show it all" in html


def test_the_axis_follows_the_date_filter_for_posts_too(admin_client: Any) -> None:
    old = Post.objects.create(text="Old post", text_hash="o", posted_at=timezone.make_aware(dt.datetime(2014, 5, 1)))
    _notes_on(dt.date(2021, 3, 1), 2, old)
    recent = Post.objects.create(
        text="Recent post", text_hash="r", posted_at=timezone.make_aware(dt.datetime(2021, 3, 2))
    )
    _notes_on(dt.date(2021, 3, 2), 1, recent)
    query = {"unit": "posts", "date_from": "2021-01-01", "date_to": "2021-12-31"}
    report = admin_client.get(reverse("analytics:spikes"), query).context["report"]
    assert report.series.days[0] >= dt.date(2021, 1, 1) and report.series.days[-1] <= dt.date(2021, 12, 31)


def test_a_range_without_data_says_where_the_data_is(admin_client: Any) -> None:
    post = Post.objects.create(text="Masks cause harm.", text_hash="m")
    _notes_on(dt.date(2021, 3, 1), 2, post)
    _notes_on(dt.date(2021, 4, 1), 1, post)
    html = admin_client.get(
        reverse("analytics:spikes"), {"date_from": "2019-01-01", "date_to": "2019-12-31"}
    ).content.decode()
    assert "No data in this range; the data spans 2021-03-01 to 2021-04-01" in html
    assert "date_from=2021-03-01&amp;date_to=2021-04-01" in html


def test_the_topic_chart_leaves_posts_without_text_out_of_the_bars_and_counts_them_beside(admin_client: Any) -> None:
    readable = Post.objects.create(text="Masks cause harm.", text_hash="m", topic="guidance")
    Note.objects.create(post=readable, text="Masks are safe.")
    for i in range(3):
        imported = Post.objects.create(text="[imported]", text_hash=f"i{i}", text_available=False)
        Note.objects.create(post=imported, text=f"Imported note {i}.")
    response = admin_client.get(reverse("analytics:judging"))
    html = response.content.decode()
    assert "Imported without text" not in "".join(label for _, label, _ in response.context["topic_bars"])
    assert "Not in the bars: 3 posts imported without text" in html
    chart = html.split("Posts by health topic</h2>")[1].split("</figure>")[0]
    assert "Imported without text" not in chart
