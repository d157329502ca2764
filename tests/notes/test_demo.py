from __future__ import annotations

from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

from notes.models import Note, NoteStatus, Post, Rating

pytestmark = pytest.mark.django_db


def test_it_loads_a_scored_demo_once_and_marks_it(anon_client: Any, cn_data: Path) -> None:
    source = cn_data / "aaronbergman" / "tweet_data_checkpoint_1_subset.csv"
    out = StringIO()
    call_command("load_demo", "--source", str(source), "--no-public-sample", stdout=out)
    posts, notes, ratings = Post.objects.count(), Note.objects.count(), Rating.objects.count()
    assert 10 <= posts <= 25  # health posts only (see notes.demo.is_health_post)
    assert notes > posts
    assert ratings > 5 * notes
    assert not Post.objects.filter(is_demo=False).exists()
    assert "login demo-contributor / crowdnotes-demo" in out.getvalue()
    # The load's scoring is a recorded run, so /scoring/ does not say "No finished run yet".
    from notes.models import ScoringRun

    assert ScoringRun.objects.filter(trigger=ScoringRun.Trigger.DEMO_LOAD, state=ScoringRun.State.DONE).count() == 1
    # Every demo post has text, so every one is classified (the offline baseline, labelled).
    assert not Post.objects.filter(topic="").exists()
    assert set(Post.objects.values_list("topic_method", flat=True)) == {"baseline:keywords-v1"}
    # The judges are queued on every demo note (a worker runs them).
    from judging.models import JudgeRun

    assert JudgeRun.objects.filter(note__is_demo=True).count() == notes
    assert "Judges queued on" in out.getvalue()
    # Rater logins of both simulated camps, printed, rating as simulated raters with a history.
    for login in ("demo-rater-a1", "demo-rater-a2", "demo-rater-b1", "demo-rater-b2"):
        assert f"login {login} / crowdnotes-demo" in out.getvalue()
        user = get_user_model().objects.get(username=login)
        assert user.has_perm("notes.add_rating") and Rating.objects.filter(rater__user=user).exists()
    a1 = get_user_model().objects.get(username="demo-rater-a1").participant
    b1 = get_user_model().objects.get(username="demo-rater-b1").participant
    assert a1.rater_factor is not None and b1.rater_factor is not None and a1.rater_factor * b1.rater_factor < 0
    # The scorer gave the demo real statuses, not only Needs More Ratings.
    statuses = set(Note.objects.values_list("status", flat=True))
    assert {NoteStatus.HELPFUL, NoteStatus.NOT_HELPFUL} <= statuses
    assert get_user_model().objects.get(username="demo-rater").has_perm("notes.add_rating")
    assert get_user_model().objects.get(username="demo-admin").has_perm("judging.view_judgedecision")

    call_command("load_demo", "--source", str(source), "--no-public-sample", stdout=StringIO())
    assert (Post.objects.count(), Note.objects.count(), Rating.objects.count()) == (posts, notes, ratings)
    assert JudgeRun.objects.count() == notes  # judged once
    assert "demo content" in anon_client.get("/").content.decode()


def test_demo_content_is_labelled_in_the_rating_queue_rate_page_and_my_notes(cn_data: Path, client: Any) -> None:
    from django.urls import reverse

    source = cn_data / "aaronbergman" / "tweet_data_checkpoint_1_subset.csv"
    call_command("load_demo", "--source", str(source), "--no-public-sample", "--no-judging", stdout=StringIO())
    from django.contrib.auth.models import User

    client.force_login(User.objects.get(username="demo-rater"))
    queue = client.get(reverse("rating_queue")).content.decode()
    assert "demo content" in queue
    note = Note.objects.filter(is_demo=True).exclude(author__user__username="demo-rater").first()
    assert note is not None
    assert "demo content" in client.get(reverse("rate_note", args=[note.pk])).content.decode()
    from notes.services import participant_for_user

    author = get_user_model().objects.get(username="demo-contributor")  # gets one demo note as its own
    Note.objects.filter(pk=note.pk).update(author=participant_for_user(user=author))
    client.force_login(author)
    assert "demo content" in client.get(reverse("my_notes")).content.decode()


def test_demo_times_are_consistent_so_every_delay_is_non_negative(cn_data: Path, admin_client: Any) -> None:
    from django.db.models import Max
    from django.urls import reverse

    from notes.models import NoteStatusChange

    source = cn_data / "aaronbergman" / "tweet_data_checkpoint_1_subset.csv"
    out = StringIO()
    call_command("load_demo", "--source", str(source), "--no-judging", stdout=out)
    assert "demo status changes at their notes' last ratings" in out.getvalue()
    # The public samples are imported beside the demo as real data (not demo), with their history.
    from notes.models import ImportedNoteHistory

    assert Note.objects.filter(is_demo=False, external_id__isnull=False).count() == 4880
    assert ImportedNoteHistory.objects.count() == 36118 and Post.objects.filter(is_demo=False).exists()
    posts = list(Post.objects.filter(is_demo=True))
    assert posts and all(p.posted_at is not None for p in posts)
    # Scraped card buttons are not part of a post.
    assert not [p.text for p in posts if "Copy link" in p.text or p.text.endswith("Reply") or "Show more" in p.text]
    for note in Note.objects.filter(is_demo=True).select_related("post"):
        assert note.post.posted_at is not None and note.created_at > note.post.posted_at, note.external_id
    last_rating = dict(Rating.objects.values("note_id").annotate(m=Max("created_at")).values_list("note_id", "m"))
    changes = list(NoteStatusChange.objects.filter(note__is_demo=True).select_related("note"))
    assert any(c.status in (NoteStatus.HELPFUL, NoteStatus.NOT_HELPFUL) for c in changes)
    for change in changes:
        assert change.changed_at >= change.note.created_at
        assert change.changed_at >= last_rating[change.note_id]  # a status follows its ratings
    summary = admin_client.get(reverse("analytics:delays")).context["summary"].report
    post, verdict = summary.post_to_first_note_hours, summary.note_to_first_verdict_hours
    assert post.n > 0 and verdict.n > 0
    assert post.n_negative == 0 and verdict.n_negative == 0 and post.p25 >= 0 and verdict.p25 >= 0
    assert verdict.p90 < 24 * 30  # ratings arrive within a day of a note: no years-long "delay"
    # Imported notes were scored here at import time: left out of note -> first verdict, and said so.
    page = admin_client.get(reverse("analytics:delays"))
    assert page.context["summary"].n_imported == 4880 and "4880 notes imported from the public data" in (
        page.content.decode()
    )
    imported = page.context["imported"].report.note_to_first_verdict_hours
    assert imported.n > 0 and imported.n_negative == 0
    # Topics: no post with text is left unclassified; posts without text are counted apart.
    judging_page = admin_client.get(reverse("analytics:judging"))
    topics = {label: n for _, label, n in judging_page.context["topics"]}
    assert topics["Not classified yet"] == 0 and topics["Imported without text (cannot be classified)"] > 0


def test_the_demo_has_a_stuck_post_and_queues_one_supernote_run_for_it_once(
    cn_data: Path, django_capture_on_commit_callbacks: Any
) -> None:
    from notes.demo import STUCK_MIN_NOTES, demo_stuck_post
    from notes.models import SupernoteRun
    from notes.supernotes import selectors

    source = cn_data / "aaronbergman" / "tweet_data_checkpoint_1_subset.csv"
    call_command("load_demo", "--source", str(source), "--no-public-sample", "--no-judging", stdout=StringIO())
    post = demo_stuck_post(source=source)
    assert post is not None and selectors.post_is_stuck(post=post)
    # Several misleading notes, each rated by every simulated rater of both camps, all still Needs More
    # Ratings: each liked by one camp only (the scorer gives each a clear factor).
    eligible = list(post.notes.filter(classification=Note.Classification.MISLEADING).order_by("created_at", "pk"))
    assert len(eligible) >= STUCK_MIN_NOTES
    raters = Rating.objects.filter(note__is_demo=True).values("rater").distinct().count()
    for note in eligible:
        assert note.status == NoteStatus.NEEDS_MORE_RATINGS and note.num_ratings == raters
        assert note.factor is not None and abs(note.factor) > 0.5, note.factor
    assert {note.factor > 0 for note in eligible if note.factor is not None} == {True, False}
    # The Supernote's source notes carry the demo notes' links (stored apart from their text).
    summaries = selectors.note_summaries(post=post)
    assert all(url in s.text for s, n in zip(summaries, eligible, strict=True) for url in n.evidence_urls)
    assert any(n.evidence_urls for n in eligible)

    out = StringIO()
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        call_command("demo_supernote", "--source", str(source), stdout=out)
    run = SupernoteRun.objects.get()
    assert run.post == post and run.state == SupernoteRun.State.QUEUED and run.requested_by is None
    assert f"Queued Supernote run {run.pk} for the demo's stuck post {post.pk}" in out.getvalue()
    assert len(callbacks) == 1
    # Once: a later start queues nothing (the post had its run).
    again = StringIO()
    call_command("demo_supernote", "--source", str(source), stdout=again)
    assert SupernoteRun.objects.count() == 1 and "had a Supernote run already" in again.getvalue()


def test_load_demo_makes_a_request_queue_and_with_a_jury_model_a_living_note(
    cn_data: Path, llm_server: Any, settings: Any, tmp_path: Path, client: Any
) -> None:
    from crowdnotes_site.lib.llm.steps.common import split_data_block
    from notes.living.selectors import request_queue
    from notes.models import NoteVersion, RevisionRun, Suggestion
    from notes.supernotes import phm
    from notes.supernotes import services as supernote_services

    settings.PHM_DIR = tmp_path / "phm"

    def answer(messages: list[dict[str, Any]]) -> str:
        user = messages[-1]["content"]
        if "Revise the current note" in user:
            assert len(split_data_block(user)[1]["rater_suggestions"]) == 2
            return "In context: the finding of this old quote was about the flu, not about infection with Covid-19."
        return "Checked against the evidence.\nFinal decision: yes"

    llm_server.respond_with(answer)
    source = cn_data / "aaronbergman" / "tweet_data_checkpoint_1_subset.csv"
    out = StringIO()
    call_command("load_demo", "--source", str(source), "--no-public-sample", "--no-judging", stdout=out)
    # The request queue at once (3, 2 and 1 requests); the living note waits for a jury model.
    assert [row.post.n_requests for row in request_queue()] == [3, 2, 1]  # type: ignore[attr-defined]
    assert "Living note: waits for a jury model" in out.getvalue() and not Suggestion.objects.exists()
    supernote_services.phm_train_from_db(embedder_name=phm.HASHING, epochs=3)  # as the demo's warm-up does
    again = StringIO()
    call_command("load_demo", "--source", str(source), "--no-public-sample", "--no-judging", stdout=again)
    assert "Living notes: 0 note request(s) added" in again.getvalue()
    # A real revision run decided it, with the LLM, the judges and the jury. The demo notes have no fetched
    # evidence, so the relevance judge rejects the candidate: the note keeps one version, and the
    # suggesters are told (one suggestion used in the rejected candidate, one not used, one pending).
    run = RevisionRun.objects.get()
    assert run.state == RevisionRun.State.DONE and run.jury_candidate is not None and run.candidate_text
    assert run.outcome == RevisionRun.Outcome.REJECTED and "the judges did not pass it (relevance)" in run.reasons
    assert f"Revision run {run.pk} of note {run.note_id}: {run.reasons}" in again.getvalue()
    note = run.note
    assert list(NoteVersion.objects.filter(note=note).values_list("number", flat=True)) == [1]
    states = list(Suggestion.objects.filter(note=note).order_by("created_at").values_list("state", flat=True))
    assert states == [Suggestion.State.USED_REJECTED, Suggestion.State.NOT_USED, Suggestion.State.PENDING]
    page = client.get(f"/notes/{note.pk}/versions/").content.decode()
    assert "Used in a revision that was rejected" in page and "Waiting for a revision" in page
    # Once: a third load changes nothing.
    call_command("load_demo", "--source", str(source), "--no-public-sample", "--no-judging", stdout=StringIO())
    assert RevisionRun.objects.count() == 1 and Suggestion.objects.count() == 3
