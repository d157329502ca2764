from __future__ import annotations

import json
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

from notes.demo import DEMO_CORPUS
from notes.models import Note, NoteStatus, Post, Rating

pytestmark = pytest.mark.django_db


def test_it_loads_a_scored_demo_once_and_marks_it(anon_client: Any, cn_data: Path) -> None:
    out = StringIO()
    call_command("load_demo", "--no-public-sample", stdout=out)
    posts, notes, ratings = Post.objects.count(), Note.objects.count(), Rating.objects.count()
    corpus = json.loads(DEMO_CORPUS.read_text(encoding="utf-8"))["posts"]
    assert posts == len(corpus) and notes == sum(len(p["notes"]) for p in corpus)
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

    call_command("load_demo", "--no-public-sample", stdout=StringIO())
    assert (Post.objects.count(), Note.objects.count(), Rating.objects.count()) == (posts, notes, ratings)
    assert JudgeRun.objects.count() == notes  # judged once
    assert "demo content" in anon_client.get("/").content.decode()


def test_demo_content_is_labelled_in_the_rating_queue_rate_page_and_my_notes(cn_data: Path, client: Any) -> None:
    from django.urls import reverse

    call_command("load_demo", "--no-public-sample", "--no-judging", stdout=StringIO())
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

    out = StringIO()
    call_command("load_demo", "--no-judging", stdout=out)
    assert "demo status changes at their notes' last ratings" in out.getvalue()
    # The public samples are imported beside the demo as real data (not demo), with their history.
    from notes.models import ImportedNoteHistory

    # 4880 notes of the public sample and 85 of the slice of real 2025 posts (notes/communitynotes/real_slice.py).
    assert Note.objects.filter(is_demo=False, external_id__isnull=False).count() == 4880 + 85
    assert "30 posts and 85 notes added with their text" in out.getvalue()
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
    assert page.context["summary"].n_imported == 4965 and "4965 notes imported from the public data" in (
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

    source = DEMO_CORPUS
    call_command("load_demo", "--no-public-sample", "--no-judging", stdout=StringIO())
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
        call_command("demo_supernote", stdout=out)
    run = SupernoteRun.objects.get()
    assert run.post == post and run.state == SupernoteRun.State.QUEUED and run.requested_by is None
    assert f"Queued Supernote run {run.pk} for the demo's stuck post {post.pk}" in out.getvalue()
    assert len(callbacks) == 1
    # Once: a later start queues nothing (the post had its run).
    again = StringIO()
    call_command("demo_supernote", stdout=again)
    assert SupernoteRun.objects.count() == 1 and "had a Supernote run already" in again.getvalue()
    # A Supernote proposed on the post carries its source notes' confirmed passages of the pages it cites
    # (each once), so its judges read the pages' text like any note's.
    from evidence import snippets as evidence_snippets
    from evidence.models import Snippet
    from notes.supernotes.services import _carry_evidence

    links = sorted({u for n in eligible for u in n.evidence_urls})
    proposed = Note.objects.create(post=post, text="merged", origin=Note.Origin.SUPERNOTE, evidence_urls=links)
    sources = {(s.url, s.passage_id) for s in Snippet.objects.filter(note__in=eligible)}
    assert _carry_evidence(proposed, links) == len(sources) >= 1
    carried = list(Snippet.objects.filter(note=proposed))
    assert {(s.url, s.passage_id) for s in carried} == sources
    assert all(evidence_snippets.snippet_is_confirmed(s) for s in carried)


def test_every_demo_note_cites_local_copies_and_is_judged_on_their_real_text(shared_data: Path, settings: Any) -> None:
    """The demo's notes cite pages that have local copies, each with a confirmed passage of
    the page's own text, so the offline relevance judge decides on real text, never by the no-snippet rule."""
    from evidence import local_copies
    from evidence.models import Snippet
    from judging import services as judging
    from judging.models import JudgeDecision, JudgeRun
    from notes.demo import read_corpus_demo

    settings.EVIDENCE_LOCAL_COPIES_URL = "http://127.0.0.1:8001/"
    settings.EVIDENCE_LOCAL_COPIES_MANIFEST = str(shared_data / "webpages" / "manifest.tsv")
    call_command("load_demo", "--no-public-sample", stdout=StringIO())
    quotes = {d.note_id: d.sources for d in read_corpus_demo(DEMO_CORPUS)}
    notes = list(Note.objects.filter(is_demo=True).order_by("pk"))
    assert notes and {n.external_id for n in notes} == set(quotes)
    for note in notes:
        assert note.evidence_urls, note.external_id
        for url in note.evidence_urls:
            assert local_copies.copy_of(url), f"{note.external_id} cites {url}, which has no local copy"
        snippets = list(Snippet.objects.filter(note=note).select_related("passage", "source"))
        cited = quotes[str(note.external_id)]
        assert [s.url for s in snippets] == [u for u, _ in cited]
        for snip, (_, quote) in zip(snippets, cited, strict=True):
            # The quote is the page's own text (extracted from its local copy), in the confirmed passage.
            assert snip.confirmation == Snippet.Confirmation.CONFIRMED
            assert snip.passage is not None and snip.source is not None
            assert quote in snip.passage.text and snip.passage.text in snip.source.cleaned_text
            assert snip.sentence == quote
    for run in JudgeRun.objects.filter(note__is_demo=True):
        for _ in range(3):
            judging.judge_run_step(run_id=run.pk)
    relevance = {d.note.external_id: d for d in JudgeDecision.objects.filter(stage="relevance").select_related("note")}
    assert set(relevance) == set(quotes)
    for external_id, decision in relevance.items():
        assert decision.inputs["snippets"], external_id  # what the audit stores: the snippets judged
        assert "No evidence snippets" not in decision.reasoning and decision.judge_name != "no-evidence-rule-v1"
        assert decision.verdict == "yes", (external_id, decision.reasoning)
    # The deliberately weak notes fail for the reason they were written to show, on their real sources.
    weak = {d.note_id: d.weak for d in read_corpus_demo(DEMO_CORPUS) if d.weak}
    assert len(weak) == 2
    for external_id in weak:
        correctness = JudgeDecision.objects.get(note__external_id=external_id, stage="correctness")
        assert correctness.verdict == "no" and "occur in the snippets" in correctness.reasoning
    helpful = JudgeRun.objects.filter(note__is_demo=True, helpful=True).count()
    assert helpful == len(quotes) - len(weak)


def test_load_demo_makes_a_request_queue_and_with_a_jury_model_a_living_note_with_two_versions(
    settings: Any, tmp_path: Path, client: Any
) -> None:
    """The demo's living note, offline as on the demo's first start (the public sample, the warm-up's
    jury model): each round's revision adds a sentence of a real page a suggester confirmed, passes
    the checks, the judges and the jury, and is proposed; its author declines the first (waiting for
    a second rater to confirm the source) and accepts the second, from a second rater's confirmation
    of the same passage, which becomes version 2. One suggestion taken, one declined, one not used
    (with its reason), one pending."""
    from crowdnotes_site.lib.communitynotes.supernotes import phm
    from notes.living.selectors import request_queue
    from notes.models import NoteVersion, RevisionRun, Suggestion
    from notes.supernotes import services as supernote_services

    settings.PHM_DIR = tmp_path / "phm"
    settings.LLM_BASE_URL = ""
    out = StringIO()
    call_command("load_demo", "--no-judging", stdout=out)
    # The request queue at once (3, 2 and 1 requests); the living note waits for a jury model.
    assert [row.post.n_requests for row in request_queue()] == [3, 2, 1]  # type: ignore[attr-defined]
    assert "Living note: waits for a jury model" in out.getvalue() and not Suggestion.objects.exists()
    supernote_services.phm_train_from_db(embedder_name=phm.HASHING)  # as the demo's warm-up does (train_phm)
    again = StringIO()
    call_command("demo_living", stdout=again)
    declined, accepted = RevisionRun.objects.order_by("pk")
    for run in (declined, accepted):
        assert run.state == RevisionRun.State.DONE and run.producer.startswith("baseline:")
        assert run.judges_passed and [e["verdict"] for e in run.judge_log] == ["yes", "yes", "yes"], run.reasons
        assert all(c["passed"] for c in run.checks), run.checks
        assert run.jury_candidate is not None and run.jury_current is not None
        assert run.jury_candidate > run.jury_current + settings.REVISION_JURY_MARGIN, run.reasons
        assert run.decided_by is not None and run.decided_by.get_username() == "demo-author"
        assert f"Revision run {run.pk} of note {run.note_id}: {run.reasons}" in again.getvalue()
    assert declined.outcome == RevisionRun.Outcome.DECLINED and "second rater" in declined.decision_reason
    assert accepted.outcome == RevisionRun.Outcome.PUBLISHED
    assert "login demo-author / crowdnotes-demo" in again.getvalue()
    note = accepted.note
    assert list(NoteVersion.objects.filter(note=note).order_by("number").values_list("number", flat=True)) == [1, 2]
    assert NoteVersion.objects.get(note=note, number=1).producer == "demo"  # written for the demo, not imported
    assert NoteVersion.objects.get(note=note, number=2).accepted_by == accepted.decided_by
    # The accepted text adds the sentence of the real page the suggester confirmed; the declined one is kept.
    added = "Some evidence shows that IF may not be as beneficial for females."
    assert note.text.endswith(added) and any(added in s.passage.text for s in note.snippets.all() if s.passage)
    assert declined.candidate_text == note.text  # the second rater's source gave the same text, accepted
    suggestions = list(Suggestion.objects.filter(note=note).order_by("created_at"))
    assert [s.state for s in suggestions] == [
        Suggestion.State.USED_REJECTED, Suggestion.State.NOT_USED, Suggestion.State.USED_PUBLISHED,
        Suggestion.State.PENDING,
    ]  # fmt: skip
    assert "declined by demo-author" in suggestions[0].outcome_reason
    assert suggestions[1].outcome_reason == "the revision did not take up its words"
    page = client.get(f"/notes/{note.pk}/versions/").content.decode()
    assert "Waiting for a revision" in page
    # Version 1 was rated Helpful; the post keeps showing it, with its status, while version 2 gathers ratings.
    assert NoteVersion.objects.get(note=note, number=1).final_status == "CURRENTLY_RATED_HELPFUL"
    post_page = client.get(f"/posts/{note.post_id}/").content.decode()
    assert "Status of version 1" in post_page and "Version 2 of this note is gathering ratings" in post_page
    # Once: another run changes nothing.
    call_command("demo_living", stdout=StringIO())
    assert RevisionRun.objects.count() == 2 and Suggestion.objects.count() == 4


def _every_table() -> dict[str, int]:
    from django.apps import apps

    return {model._meta.label: model._default_manager.count() for model in apps.get_models()}


def _ratings() -> set[tuple[object, ...]]:
    return set(Rating.objects.values_list("note_id", "rater_id", "level", "created_at"))


def test_load_demo_is_idempotent_on_every_table_after_its_living_note_is_revised(
    settings: Any, tmp_path: Path, cn_data: Path, django_capture_on_commit_callbacks: Any
) -> None:
    """A demo restart runs load_demo again: once the warm-up's jury model is stored, the first load
    revises the living note (its version 1 ratings retired); every later load adds nothing: no
    rating given back to the replaced text, no scoring run, no row in any table."""
    from crowdnotes_site.lib.communitynotes.supernotes import phm
    from notes.models import RetiredRating, ScoringRun
    from notes.supernotes import services as supernote_services

    settings.PHM_DIR = tmp_path / "phm"
    settings.LLM_BASE_URL = ""

    def load() -> None:
        with django_capture_on_commit_callbacks(execute=False):
            call_command("load_demo", "--no-benchmark", stdout=StringIO())

    load()
    once = _every_table()
    load()
    assert _every_table() == once and ScoringRun.objects.count() == 1
    supernote_services.phm_train_from_db(embedder_name=phm.HASHING)  # the warm-up's train_phm
    load()  # the living note is revised now
    assert RetiredRating.objects.exists()
    revised, ratings = _every_table(), _ratings()
    load()
    assert _every_table() == revised
    assert _ratings() == ratings


def test_the_demos_supernote_run_merges_distinct_candidates_and_says_why_it_proposes_none(
    settings: Any, tmp_path: Path, cn_data: Path, django_capture_on_commit_callbacks: Any
) -> None:
    """The warm-up's Supernote run on the demo's stuck post, offline as the demo runs it: each
    candidate merges two or more of the post's notes with their link, no two scored candidates are
    one text, none is a source note again, and (README "Supernotes") with the demo's seed the
    jury's best merge does not clear 0.40, so nothing is proposed and no comparison is offered."""
    from crowdnotes_site.lib.text_rules import strip_urls
    from notes.demo import DEMO_SUPERNOTE_SEED
    from notes.models import SupernoteRun
    from notes.supernotes import selectors
    from notes.supernotes.candidates import copied_source, normalized_text
    from notes.supernotes.services import supernote_run_execute

    settings.PHM_DIR = tmp_path / "phm"
    settings.LLM_BASE_URL = ""
    with django_capture_on_commit_callbacks(execute=False):
        call_command("load_demo", "--no-judging", "--no-benchmark", "--no-living", stdout=StringIO())
    call_command("train_phm", "--embedder", "hashing-bow-256", stdout=StringIO())  # as the warm-up does
    with django_capture_on_commit_callbacks(execute=False):
        call_command("demo_supernote", stdout=StringIO())
    run = SupernoteRun.objects.get()
    assert run.seed == DEMO_SUPERNOTE_SEED
    supernote_run_execute(run_id=run.pk)
    run.refresh_from_db()
    sources = list(Note.objects.filter(pk__in=run.source_note_ids))
    assert len(sources) == 3
    rows = list(run.candidates.order_by("index"))
    written = [r for r in rows if r.text]
    assert len(rows) == 12 and len(written) >= 6  # each ordered subset once; some pairs do not fit in 280
    for row in written:
        body = strip_urls(row.text)
        assert copied_source(row.text, [(n.pk, n.text) for n in sources]) is None
        assert len(row.source_note_ids) >= 2 and row.text.endswith(sources[0].evidence_urls[0])
        # Its statements are the notes' own words, from at least two notes.
        quoted = {n.pk for n in sources for part in body.split(". ") if len(part) > 30 and part.rstrip(".") in n.text}
        assert len(quoted) >= 2, row.text
    scored = [r for r in rows if r.jury_intercept is not None]
    assert len(scored) >= 2 and len({normalized_text(r.text) for r in scored}) == len(scored) == run.n_distinct
    # What README says the demo shows: merges scored by the jury, the best under 0.40, nothing proposed.
    assert run.winner_intercept is not None and run.winner_intercept <= 0.40 and "is not above 0.40" in run.outcome
    assert run.proposed_note is None and selectors.comparison_pair(post=run.post) is None
