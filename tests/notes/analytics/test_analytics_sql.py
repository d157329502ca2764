"""The delays page computes its figures in PostgreSQL (notes.analytics.selectors): the same
numbers as the pure definition (crowdnotes_site.lib.communitynotes.research.delays, numpy) on the same rows, read here
independently into Python; and a new note shows at once despite the per-worker cache."""

from __future__ import annotations

import datetime as dt
import random

import pytest
from django.utils import timezone

from crowdnotes_site.lib.communitynotes.research import delays
from notes.analytics import selectors
from notes.models import ImportedNoteHistory, Note, NoteStatus, NoteStatusChange, Post

pytestmark = pytest.mark.django_db

ANY = selectors.AnalyticsFilters()


def _random_data(seed: int) -> None:
    rng = random.Random(seed)
    start = timezone.now() - dt.timedelta(days=200)
    for i in range(40):
        posted = start + dt.timedelta(hours=rng.uniform(0, 4000))
        post = Post.objects.create(
            text=f"post {i}", text_hash=f"h{i}", posted_at=posted if rng.random() < 0.8 else None
        )
        for j in range(rng.randint(1, 4)):
            # Some notes dated before their post (a negative delay, left out and counted).
            created = posted + dt.timedelta(hours=rng.uniform(-3, 300))
            imported = rng.random() < 0.25
            note = Note.objects.create(
                post=post,
                text="n",
                created_at=created,
                external_id=f"x{i}-{j}" if imported else None,
                scored_at=created + dt.timedelta(days=1) if rng.random() < 0.5 else None,
            )
            for _ in range(rng.randint(0, 3)):
                status = rng.choice([NoteStatus.HELPFUL, NoteStatus.NOT_HELPFUL, NoteStatus.NEEDS_MORE_RATINGS])
                changed = created + dt.timedelta(hours=rng.uniform(-1, 500))
                NoteStatusChange.objects.create(note=note, status=status, changed_at=changed)
    for k in range(60):
        created = start + dt.timedelta(hours=rng.uniform(0, 4000))
        verdict = created + dt.timedelta(hours=rng.uniform(-2, 200)) if rng.random() < 0.6 else None
        ImportedNoteHistory.objects.create(note_external_id=f"h{k}", created_at=created, first_verdict_at=verdict)


def _ms(t: dt.datetime) -> int:
    return int(t.timestamp() * 1000)


def _expected() -> tuple[delays.DelayReport, delays.DelayReport]:
    """The pure definition, on rows read one by one in Python."""
    first: dict[int, dt.datetime] = {}
    for note in Note.objects.select_related("post"):
        if note.post_id not in first or note.created_at < first[note.post_id]:
            first[note.post_id] = note.created_at
    posts = {p.pk: p.posted_at or p.created_at for p in Post.objects.all()}
    post_hours = [(first[pk] - posts[pk]).total_seconds() / 3600 for pk in first]
    own = []
    for note in Note.objects.all():
        if note.external_id is not None:
            continue
        verdicts = [c.changed_at for c in note.status_changes.all() if c.status in selectors.VERDICTS]
        verdict = min(verdicts) if verdicts else None
        if note.scored_at is not None or verdict is not None:
            own.append((_ms(note.created_at), _ms(verdict) if verdict else None))
    app = delays.delay_report(post_delays_hours=post_hours, notes_first_verdict=own)
    history = [
        (_ms(r.created_at), _ms(r.first_verdict_at) if r.first_verdict_at else None)
        for r in ImportedNoteHistory.objects.all()
    ]
    return app, delays.delay_report(post_delays_hours=[], notes_first_verdict=history)


def _same(got: delays.Percentiles, want: delays.Percentiles) -> None:
    assert (got.n, got.n_negative) == (want.n, want.n_negative)
    for p in ("p25", "p50", "p75", "p90"):
        assert getattr(got, p) == pytest.approx(getattr(want, p), abs=1e-5)


@pytest.mark.parametrize("seed", [0, 1])
def test_the_sql_figures_equal_the_pure_definition_on_the_same_rows(seed: int) -> None:
    _random_data(seed)
    app, history = _expected()
    summary = selectors.delay_summary(ANY)
    _same(summary.report.post_to_first_note_hours, app.post_to_first_note_hours)
    _same(summary.report.note_to_first_verdict_hours, app.note_to_first_verdict_hours)
    assert summary.report.never_left_nmr_share == pytest.approx(app.never_left_nmr_share)
    assert summary.n_scored == app.n_notes_status
    assert summary.report.post_to_first_note_hours.n_negative > 0  # the data has negative delays
    assert summary.n_notes == Note.objects.count()
    assert summary.n_imported == Note.objects.filter(external_id__isnull=False).count()
    imported = selectors.imported_history_summary(ANY)
    assert imported.report is not None
    _same(imported.report.note_to_first_verdict_hours, history.note_to_first_verdict_hours)
    assert imported.report.never_left_nmr_share == pytest.approx(history.never_left_nmr_share)
    created = [r.created_at for r in ImportedNoteHistory.objects.all()]
    assert (imported.first, imported.last) == (min(created), max(created))


def test_no_rows_gives_no_percentiles() -> None:
    summary = selectors.delay_summary(ANY)
    assert summary.report.post_to_first_note_hours == delays.percentiles([])
    assert summary.report.never_left_nmr_share is None and summary.n_notes == 0


def test_a_new_note_shows_at_once_through_the_cache() -> None:
    now = timezone.now()
    post = Post.objects.create(text="p", text_hash="p", posted_at=now)
    Note.objects.create(post=post, text="n", created_at=now + dt.timedelta(hours=2))
    first = selectors.delay_summary(ANY)
    assert selectors.delay_summary(ANY) is first  # kept: nothing changed
    other = Post.objects.create(text="q", text_hash="q", posted_at=now)
    Note.objects.create(post=other, text="n", created_at=now + dt.timedelta(hours=6))
    second = selectors.delay_summary(ANY)
    assert second.report.post_to_first_note_hours.n == 2
    assert second.report.post_to_first_note_hours.p50 == pytest.approx(4.0)


def _spiky_data() -> None:
    """Notes on 60 days, 2-4 a day, and a burst of notes about one word on day 45; some posts
    imported without text (read through their notes' texts)."""
    rng = random.Random(3)
    start = dt.datetime(2024, 1, 1, 12, tzinfo=dt.UTC)
    words = ["vaccine schedule", "fasting study", "vitamin dose", "mask filter", "sleep trial"]
    for d in range(60):
        n = 30 if d == 45 else rng.randint(2, 4)
        for i in range(n):
            when = start + dt.timedelta(days=d, hours=rng.uniform(-11, 11))
            has_text = rng.random() < 0.7
            post = Post.objects.create(
                text=f"post about {rng.choice(words)}" if has_text else "(imported)",
                text_hash=f"{d}-{i}",
                posted_at=when,
                text_available=has_text,
            )
            text = "ivermectin cures covid" if d == 45 else f"note on {rng.choice(words)}"
            Note.objects.create(post=post, text=text if rng.random() < 0.9 else "", created_at=when)


def _expected_spikes(unit: str) -> tuple[list[int], list[selectors.spikes.Spike], int]:
    """The pure path on every item read into Python (the reference the SQL is checked against)."""
    from crowdnotes_site.lib.communitynotes.research import spikes

    if unit == "posts":
        items = []
        for post in Post.objects.prefetch_related("notes"):
            when = post.posted_at or post.created_at
            text = post.text if post.text_available else " ".join(n.text for n in post.notes.all())
            items.append((when.date(), text))
    else:
        items = [(n.created_at.date(), n.text) for n in Note.objects.all()]
    days, counts = spikes.daily_counts(d for d, _ in items)
    texts: dict[dt.date, list[str]] = {}
    for day, text in items:
        if text.strip():
            texts.setdefault(day, []).append(text)
    _, found = spikes.spikes_with_terms(days, counts, texts)
    return counts, found, sum(1 for _, t in items if t.strip())


@pytest.mark.parametrize("unit", ["notes", "posts"])
def test_the_spike_figures_equal_the_pure_path_over_every_item(unit: str) -> None:
    _spiky_data()
    counts, found, n_texts = _expected_spikes(unit)
    report = selectors.spike_report(ANY, unit=unit)
    assert report.series.counts == counts and report.n_items == sum(counts)
    assert [(s.day, s.count, s.terms) for s in report.spikes] == [(s.day, s.count, s.terms) for s in found]
    assert found and found[0].terms and found[0].terms[0][0] in {"ivermectin", "cures", "covid"}
    assert report.n_texts == n_texts
    # A range without data says where the data is, from one aggregate.
    empty = selectors.AnalyticsFilters(date_from=dt.date(2030, 1, 1))
    assert selectors.spike_data_span(empty, unit=unit) == (report.data_from, report.data_to)


def test_a_spike_report_is_kept_until_a_note_is_added() -> None:
    _spiky_data()
    first = selectors.spike_report(ANY)
    assert selectors.spike_report(ANY) is first
    post = Post.objects.create(text="p", text_hash="new", posted_at=timezone.now())
    Note.objects.create(post=post, text="n", created_at=timezone.now())
    assert selectors.spike_report(ANY).n_items == first.n_items + 1


def test_the_imported_history_is_kept_until_a_row_is_added() -> None:
    now = timezone.now()
    ImportedNoteHistory.objects.create(note_external_id="a", created_at=now, first_verdict_at=now)
    first = selectors.imported_history_summary(ANY)
    assert selectors.imported_history_summary(ANY) is first
    ImportedNoteHistory.objects.create(note_external_id="b", created_at=now, first_verdict_at=None)
    again = selectors.imported_history_summary(ANY)
    assert again.report is not None and again.report.never_left_nmr_share == pytest.approx(0.5)
