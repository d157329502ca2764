"""Rescoring from the database: statuses, parameters, status history, task, beat, admin action."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest
from django.conf import settings
from django.urls import reverse
from django.utils import timezone

from crowdnotes_site.celery import app
from crowdnotes_site.lib.communitynotes import scoring
from crowdnotes_site.lib.communitynotes.data import synthetic
from crowdnotes_site.lib.communitynotes.scoring import explain as scoring_explain
from crowdnotes_site.queue import Enqueued
from notes.models import Note, NoteStatus, NoteStatusChange, Participant, Post, Rating, RatingLevel, ScoringRun
from notes.scoring import reader as scoring_reader
from notes.scoring import selectors as scoring_selectors
from notes.scoring import services as scoring_services
from notes.tasks import score_notes
from tests.conftest import wait_for

LEVELS = {1.0: RatingLevel.HELPFUL, 0.5: RatingLevel.SOMEWHAT_HELPFUL, 0.0: RatingLevel.NOT_HELPFUL}


def _load_synthetic(
    n_ratings: int = 6000, seed: int = 2, note_age: timedelta = timedelta(days=1)
) -> synthetic.SyntheticData:
    """Put a synthetic community (two camps of raters) into the database."""
    data = synthetic.generate(n_ratings, seed=seed, ratings_per_note=20, ratings_per_rater=30)
    now = timezone.now()
    people = Participant.objects.bulk_create(
        [Participant(external_id=synthetic.participant_id(i)) for i in range(data.n_raters)]
    )
    post = Post.objects.create(text="Synthetic post", text_hash="x" * 64)
    notes = Note.objects.bulk_create(
        [
            Note(
                post=post, author=people[int(data.note_author[i])], text=f"note {i}", created_at=now - timedelta(days=1)
            )
            for i in range(data.n_notes)
        ]
    )
    Rating.objects.bulk_create(
        [
            Rating(note=notes[n], rater=people[u], level=LEVELS[v], created_at=now - timedelta(hours=12))
            for u, n, v in zip(data.rater.tolist(), data.note.tolist(), data.value.tolist(), strict=True)
        ]
    )
    return data


@pytest.mark.django_db
def test_it_writes_statuses_parameters_and_status_history() -> None:
    _load_synthetic()
    now = timezone.now()
    summary = scoring_services.notes_rescore(now=now)
    assert summary["status_changes"] > 0
    # The database now holds exactly what the pure scorer computes from the same rows.
    inputs = scoring_reader.scoring_inputs(now=now, lock_after_days=None)
    expected = scoring.score(inputs.ratings, inputs.meta, len(inputs.participant_pks))
    by_pk = {n.pk: n for n in Note.objects.all()}
    for i, pk in enumerate(inputs.note_pks.tolist()):
        assert by_pk[pk].status == scoring.STATUS_NAMES[int(expected.status[i])]
        if np.isnan(expected.note_intercept[i]):
            assert by_pk[pk].intercept is None
        else:
            assert by_pk[pk].intercept == pytest.approx(expected.note_intercept[i], abs=1e-6)
    helpful = Note.objects.filter(status=NoteStatus.HELPFUL)
    assert helpful.exists()
    changes = NoteStatusChange.objects.filter(note__in=helpful)
    assert changes.count() == helpful.count()
    assert {(c.previous_status, c.changed_at) for c in changes} == {(NoteStatus.NEEDS_MORE_RATINGS, now)}
    rated = Participant.objects.exclude(rater_factor=None)
    assert rated.exists() and rated.filter(rater_factor__lt=0).count() >= rated.count() / 2

    # Everyone turns against one Helpful note: the next run records the change with its time.
    target = helpful.first()
    assert target is not None
    Rating.objects.filter(note=target).update(level=RatingLevel.NOT_HELPFUL)
    later = now + timedelta(hours=1)
    again = scoring_services.notes_rescore(now=later)
    assert again["status_changes"] >= 1
    target.refresh_from_db()
    assert target.status == NoteStatus.NOT_HELPFUL
    last = NoteStatusChange.objects.filter(note=target).order_by("changed_at").last()
    assert last is not None
    assert (last.previous_status, last.status, last.changed_at) == (NoteStatus.HELPFUL, NoteStatus.NOT_HELPFUL, later)
    # Nothing changed since: no new history.
    before = NoteStatusChange.objects.count()
    assert scoring_services.notes_rescore(now=later + timedelta(minutes=5))["status_changes"] == 0
    assert NoteStatusChange.objects.count() == before


@pytest.mark.django_db
def test_it_locks_statuses_of_old_scored_notes() -> None:
    _load_synthetic(seed=4)
    now = timezone.now()
    scoring_services.notes_rescore(now=now)
    target = Note.objects.filter(status=NoteStatus.HELPFUL).first()
    assert target is not None
    Rating.objects.filter(note=target).update(level=RatingLevel.NOT_HELPFUL)
    scoring_services.notes_rescore(now=now + timedelta(days=15))  # note created a day before `now`: now locked
    target.refresh_from_db()
    assert target.status == NoteStatus.HELPFUL


@pytest.mark.django_db
def test_it_queues_rescoring_from_the_admin(admin_client: Any, django_capture_on_commit_callbacks: Any) -> None:
    post = Post.objects.create(text="p", text_hash="y" * 64)
    note = Note.objects.create(post=post, text="n")
    url = reverse("admin:notes_note_changelist")
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = admin_client.post(url, {"action": "rescore_notes", "_selected_action": [note.pk], "index": 0})
    assert response.status_code == 302
    assert "Rescoring queued" in admin_client.get(response["Location"]).content.decode()
    run = ScoringRun.objects.get()
    assert callbacks == [Enqueued("notes.tasks.score_notes", (run.pk,))]


@pytest.mark.django_db
def test_it_queues_rescoring_from_the_button(admin_client: Any, django_capture_on_commit_callbacks: Any) -> None:
    assert 'href="/scoring/"' in admin_client.get("/rate/").content.decode()
    assert "Rescore now" in admin_client.get("/scoring/").content.decode()
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = admin_client.post("/scoring/rescore/")
    assert response.status_code == 302
    assert callbacks == [Enqueued("notes.tasks.score_notes", (ScoringRun.objects.get().pk,))]


@pytest.mark.django_db
def test_it_refuses_the_button_to_raters(rater_client: Any) -> None:
    assert rater_client.post("/scoring/rescore/").status_code == 403


def test_it_schedules_rescoring_on_the_cpu_queue() -> None:
    entry = settings.CELERY_BEAT_SCHEDULE["score-notes"]
    assert entry["task"] == score_notes.name == "notes.tasks.score_notes"
    assert float(entry["schedule"]) > 0  # type: ignore[arg-type]
    route = app.amqp.router.route({}, score_notes.name)
    assert route["queue"].name == "cpu"


@pytest.mark.worker
def test_it_rescores_in_a_real_worker(celery_worker: Any) -> None:
    _load_synthetic(3000, seed=6)
    score_notes.delay()
    wait_for(lambda: ScoringRun.objects.filter(state=ScoringRun.State.DONE).exists(), timeout=120)
    assert Note.objects.exclude(scored_at=None).exists()
    assert NoteStatusChange.objects.exists()
    assert Participant.objects.exclude(rater_factor=None).exists()


def test_it_uses_utc_times() -> None:
    assert scoring_reader._millis(datetime(1970, 1, 1, 0, 0, 1, tzinfo=UTC)) == 1000


@pytest.mark.django_db
def test_it_rescores_an_empty_database() -> None:
    summary = scoring_services.notes_rescore()
    assert summary["notes"] == 0 and summary["status_changes"] == 0


@pytest.mark.django_db
def test_it_counts_ratings_made_long_after_the_note() -> None:
    # Notes written 10 days before their ratings: the reference's 48-hour window would leave no
    # rater with a valid rating, so nobody would pass the reputation filter.
    _load_synthetic(seed=9, note_age=timedelta(days=10))
    scoring_services.notes_rescore()
    assert Participant.objects.exclude(rater_factor=None).count() > 50
    assert Note.objects.filter(status=NoteStatus.HELPFUL).exists()


@pytest.mark.django_db
def test_it_reads_ratings_into_scorer_arrays() -> None:
    post = Post.objects.create(text="p", text_hash="z" * 64)
    a, b = Participant.objects.create(external_id="a"), Participant.objects.create(external_id="b")
    note = Note.objects.create(post=post, text="n", author=a)
    when = datetime(2025, 3, 1, 12, 0, 0, 123456, tzinfo=UTC)
    Rating.objects.create(
        note=note, rater=a, level=RatingLevel.NOT_HELPFUL, tags=["notHelpfulIncorrect"], created_at=when
    )
    Rating.objects.create(
        note=note, rater=b, level=RatingLevel.SOMEWHAT_HELPFUL, tags=["helpfulClear", "notHelpfulHardToUnderstand"],
        created_at=when + timedelta(seconds=1),
    )  # fmt: skip
    inputs = scoring_reader.scoring_inputs(now=timezone.now(), lock_after_days=None)
    r = inputs.ratings
    assert r.created_at_ms is not None
    order = np.argsort(r.created_at_ms)
    assert r.value[order].tolist() == [0.0, 0.5]
    assert r.incorrect_tag is not None and r.incorrect_tag[order].tolist() == [True, False]
    assert r.any_not_helpful_tag is not None and r.any_not_helpful_tag[order].tolist() == [True, True]
    assert r.not_helpful_tags is not None and r.not_helpful_tags[order].tolist() == [
        scoring.TAG_BIT["notHelpfulIncorrect"],
        scoring.TAG_BIT["notHelpfulHardToUnderstand"],
    ]
    assert r.created_at_ms[order].tolist() == [1740830400123, 1740830401123]
    assert [inputs.participant_pks[u] for u in r.rater[order]] == [a.pk, b.pk]
    assert inputs.meta.author is not None and inputs.participant_pks[inputs.meta.author[0]] == a.pk


@pytest.mark.django_db
def test_it_stores_why_each_note_has_its_status_and_shows_it(admin_client: Any, anon_client: Any) -> None:
    _load_synthetic(seed=5)
    now = timezone.now()
    scoring_services.notes_rescore(now=now)
    inputs = scoring_reader.scoring_inputs(now=now, lock_after_days=None)
    expected = scoring.score(
        inputs.ratings, inputs.meta, len(inputs.participant_pks), scoring_selectors.APP_SCORING_CONFIG
    )
    whys = scoring_explain.why_rows(expected)
    by_pk = {n.pk: n for n in Note.objects.all()}
    deciding = set()
    for i, pk in enumerate(inputs.note_pks.tolist()):
        note = by_pk[pk]
        assert note.score_rules == list(whys[i].rules)
        assert note.score_explanation == scoring_explain.explain(whys[i], scoring_selectors.APP_SCORING_CONFIG)
        assert (note.neg_side_ratings, note.pos_side_ratings) == (whys[i].neg_count, whys[i].pos_count)
        deciding.add((note.status, note.score_rules[-1]))
    # Several status paths occur, each with its own rule.
    assert (NoteStatus.HELPFUL, "GeneralCRH") in deciding
    assert any(status == NoteStatus.NOT_HELPFUL for status, _ in deciding)
    assert any(status == NoteStatus.NEEDS_MORE_RATINGS for status, _ in deciding)
    helpful = Note.objects.filter(status=NoteStatus.HELPFUL, score_rules__contains=["GeneralCRH"]).first()
    assert helpful is not None and helpful.intercept is not None
    assert helpful.score_explanation.startswith(f"Currently Rated Helpful: intercept {helpful.intercept:.2f} ≥ 0.40")
    url = reverse("post_detail", args=[helpful.post_id])
    admin_page = admin_client.get(url).content.decode()
    assert f"Why: {helpful.score_explanation}" in admin_page
    public = anon_client.get(url).content.decode()
    assert "Why: Currently Rated Helpful: raters who usually disagree with each other both found it helpful." in public
    assert helpful.score_explanation not in public  # no intercepts for readers without view_scores
    # An unchanged rescoring rewrites nothing (the explanation is compared too).
    assert scoring_services.notes_rescore(now=now + timedelta(minutes=1))["notes_updated"] == 0


@pytest.mark.django_db
@pytest.mark.parametrize("slice_rows", [1_000_000, 7, 250])  # one slice; slices cut mid-row anyhow
def test_binary_copy_reads_the_same_arrays_as_the_query_path(slice_rows: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scoring_reader, "_COPY_SLICE_BYTES", slice_rows * scoring_reader._COPY_ROW.itemsize + 3)
    _load_synthetic(n_ratings=3000, seed=6)
    first = Rating.objects.order_by("pk")[:50]
    tagged = [r.pk for r in first]
    Rating.objects.filter(pk__in=tagged[:25]).update(tags=["notHelpfulIncorrect", "notHelpfulOffTopic"])
    Rating.objects.filter(pk__in=tagged[25:]).update(tags=["helpfulClear", "notHelpfulSpamHarassmentOrAbuse"])
    people = np.array(sorted(Participant.objects.values_list("pk", flat=True)), dtype=np.int64)
    notes = np.array(sorted(Note.objects.values_list("pk", flat=True)), dtype=np.int64)
    copied = scoring_reader._rating_arrays_copy(people, notes)
    queried = scoring_reader._rating_arrays(
        {int(p): i for i, p in enumerate(people)}, {int(n): i for i, n in enumerate(notes)}
    )
    assert len(copied.value) == Rating.objects.count() == len(queried.value)

    def rows(r: scoring.Ratings) -> list[tuple[object, ...]]:
        cols = (r.rater, r.note, r.value, r.created_at_ms, r.incorrect_tag, r.any_not_helpful_tag, r.not_helpful_tags)
        return sorted(zip(*(np.asarray(c).tolist() for c in cols), strict=True))

    assert rows(copied) == rows(queried)
    assert copied.not_helpful_tags is not None
    assert int((copied.not_helpful_tags == scoring.TAG_BIT["notHelpfulSpamHarassmentOrAbuse"]).sum()) == 25
    Rating.objects.all().delete()
    empty = scoring_reader._rating_arrays_copy(people, notes)
    assert len(empty.value) == len(empty.rater) == 0


def _planner_statuses() -> set[str]:
    """The status values the planner's statistics know of (ANALYZE's most common values)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT most_common_vals::text FROM pg_stats WHERE tablename = %s AND attname = 'status'",
            [Note._meta.db_table],
        )
        row = cursor.fetchone()
    return set(row[0].strip("{}").split(",")) if row and row[0] else set()


@pytest.mark.django_db
@pytest.mark.parametrize(("threshold", "refreshed"), [(10, True), (1_000_000, False)])
def test_a_rescoring_that_rewrites_most_notes_refreshes_the_planners_statistics(
    monkeypatch: pytest.MonkeyPatch, threshold: int, refreshed: bool
) -> None:
    from crowdnotes_site.dbstats import refresh_planner_statistics

    monkeypatch.setattr(scoring_services, "RESCORE_ANALYZE_MIN_ROWS", threshold)
    _load_synthetic()
    refresh_planner_statistics(Note)  # the planner knows these notes, all Needs More Ratings
    assert _planner_statuses() == {NoteStatus.NEEDS_MORE_RATINGS}
    summary = scoring_services.notes_rescore()
    assert summary["notes_updated"] >= Note.objects.count() // 10 and summary["not_helpful"] > 0
    assert (NoteStatus.NOT_HELPFUL in _planner_statuses()) is refreshed


def test_the_rescoring_tasks_time_limits_come_from_the_setting() -> None:
    # The whole download's rescoring outlasts a fixed short limit: a deployment sizes the limit with
    # SCORING_SOFT_TIME_LIMIT_S (read when the worker imports its tasks).
    assert score_notes.soft_time_limit == settings.SCORING_SOFT_TIME_LIMIT_S >= 1200
    env = {**os.environ, "SCORING_SOFT_TIME_LIMIT_S": "4321", "DJANGO_SETTINGS_MODULE": "tests.settings"}
    code = "import django; django.setup(); from notes.tasks import score_notes as t; print(t.soft_time_limit, t.time_limit)"
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True, cwd=settings.BASE_DIR
    )
    assert out.stdout.split() == ["4321", "4381"]
