"""Supernote runs on the database: stuck posts page, start (queued after commit), the run itself
with the LLM (loopback server) and offline, the filter log, the PHM and the proposed note."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from django.urls import reverse

from crowdnotes_site.lib.communitynotes.supernotes import phm
from crowdnotes_site.lib.llm.steps.common import split_data_block
from judging.models import JudgeRun
from notes.models import Note, NoteStatus, Participant, Post, Rating, SupernoteRun
from notes.services import post_create
from notes.supernotes import selectors, services
from tests.support.llm_server import ScriptedLLM

NOTE_TEXTS = [
    "Large studies of millions of children found no link between vaccines and autism. https://cdc.gov/autism",
    "The 1998 paper claiming a link was retracted for fraud. https://thelancet.com/retraction",
    "Vaccines are safe and this post is wrong. https://who.int/vaccines",
]


def _participants(n: int) -> list[Participant]:
    rng = np.random.default_rng(0)
    out = []
    for i in range(n):
        side = -1.0 if i % 2 else 1.0
        out.append(Participant(external_id=f"J{i:04d}", rater_intercept=float(rng.normal(0, 0.05)),
                               rater_factor=side * float(rng.uniform(0.3, 0.9))))  # fmt: skip
    return Participant.objects.bulk_create(out)


def _stuck_post(n_notes: int = 3) -> tuple[Post, list[Note], list[Participant]]:
    post = post_create(text="Vaccines cause autism, new report shows.")
    raters = _participants(40)
    notes = [Note.objects.create(post=post, text=t, author=raters[k]) for k, t in enumerate(NOTE_TEXTS[:n_notes])]
    # Training signal for the PHM: every rater likes notes 0 and 1, only one side likes note 2.
    ratings = []
    for r in raters:
        for k, note in enumerate(notes):
            if note.author_id == r.pk:
                continue
            helpful = k < 2 or (r.rater_factor or 0) > 0
            ratings.append(Rating(note=note, rater=r, level="HELPFUL" if helpful else "NOT_HELPFUL",
                                  tags=["helpfulGoodSources"] if helpful else ["notHelpfulArgumentativeOrBiased"]))  # fmt: skip
    # Background: another post whose notes every rater found not helpful. Its stored parameters are
    # chosen so the μ re-derived from them is about 0.2, as on the live system.
    other = post_create(text="5G towers spread viruses.")
    for k in range(3):
        bad = Note.objects.create(post=other, text=f"Unsupported rant number {k} about towers.",
                                  status=NoteStatus.NOT_HELPFUL, intercept=0.3, factor=0.0)  # fmt: skip
        ratings += [Rating(note=bad, rater=r, level="NOT_HELPFUL") for r in raters]
    Rating.objects.bulk_create(ratings)
    for note, (intercept, factor) in zip(notes, [(0.3, 0.0), (0.3, 0.0), (0.0, 0.6)], strict=False):
        note.intercept, note.factor = intercept, factor
        note.save(update_fields=["intercept", "factor"])
    return post, notes, raters


@pytest.fixture
def phm_dir(tmp_path: Any, settings: Any) -> Any:
    settings.PHM_DIR = tmp_path / "phm"
    return settings.PHM_DIR


def test_stuck_posts_lists_eligible_posts_with_counts(admin_client: Any, db: None) -> None:
    post, _notes, _ = _stuck_post()
    other = post_create(text="Not stuck: one note")
    Note.objects.create(post=other, text="Only one note")
    helped = post_create(text="Has a helpful note")
    Note.objects.create(post=helped, text="a")
    Note.objects.create(post=helped, text="b")
    Note.objects.create(post=helped, text="c", status=NoteStatus.HELPFUL)
    stuck = selectors.stuck_posts()
    assert [s.post.pk for s in stuck] == [post.pk]
    assert [n.n_ratings for n in stuck[0].notes] == [39, 39, 39]  # type: ignore[attr-defined]
    page = admin_client.get(reverse("stuck_posts"))
    assert page.status_code == 200
    html = page.content.decode()
    assert "Generate Supernote" in html and "39 ratings" in html and "Not stuck" not in html


def test_raters_cannot_open_stuck_posts(rater_client: Any) -> None:
    assert rater_client.get(reverse("stuck_posts")).status_code == 403


def test_generate_queues_one_run_after_commit(
    admin_client: Any, django_capture_on_commit_callbacks: Any, db: None
) -> None:
    post, _, _ = _stuck_post()
    with django_capture_on_commit_callbacks() as callbacks:
        response = admin_client.post(reverse("supernote_generate", args=[post.pk]))
    run = SupernoteRun.objects.get(post=post)
    assert response.status_code == 302 and response["Location"] == reverse("supernote_run", args=[run.pk])
    assert [c.task for c in callbacks] == ["notes.tasks.supernote_run_execute"]
    assert callbacks[0].args == (run.pk,)
    # A second request while the first is queued is refused.
    admin_client.post(reverse("supernote_generate", args=[post.pk]))
    assert SupernoteRun.objects.filter(post=post).count() == 1
    page = admin_client.get(reverse("supernote_run", args=[run.pk]))
    assert 'hx-trigger="every 2s"' in page.content.decode() and "Queued" in page.content.decode()


def test_offline_run_proposes_an_extractive_supernote_scored_by_the_jury(
    phm_dir: Any, settings: Any, admin_client: Any, db: None
) -> None:
    settings.LLM_BASE_URL = ""
    post, _notes, _ = _stuck_post()
    model = services.phm_train_from_db(embedder_name=phm.HASHING, epochs=30)
    assert model.meta.trained_on == "database ratings (237 app)"
    run = SupernoteRun.objects.create(post=post, n_candidates=12, jury_size=50, seed=3)
    services.supernote_run_execute(run_id=run.pk)
    run.refresh_from_db()
    assert run.state == SupernoteRun.State.DONE and run.progress == 100
    cands = list(run.candidates.all())
    assert len(cands) == 12 and all(c.producer == "baseline:extractive-merge-v3" for c in cands)
    # Offline, each of the 12 ordered subsets of the 3 notes is drawn once (the merge of one is always the same).
    assert len({tuple(c.source_note_ids) for c in cands}) == 12
    # Each distinct text is filtered and scored once; repeats say which candidate they repeat.
    from notes.supernotes.candidates import copied_source, normalized_text

    distinct = {normalized_text(c.text) for c in cands if c.text}
    assert run.n_drawn == 12 and run.n_distinct == len(distinct) and 2 <= len(distinct)
    repeats = [c for c in cands if c.filter_log and c.filter_log[0]["filter"] == "duplicate"]
    assert len(repeats) == 12 - len(distinct) and all(c.jury_intercept is None and not c.passed for c in repeats)
    assert f"{len(distinct)} distinct candidates of 12 drawn" in run.outcome
    # A merge: no candidate is one source note again, each holds sentences of two.
    sources = [(n.pk, n.text) for n in _notes]
    assert all(copied_source(c.text, sources) is None for c in cands)
    assert all(sum(n.text.split(". ")[0] in c.text for n in _notes) >= 2 for c in cands), [c.text for c in cands]
    scored_texts = [normalized_text(c.text) for c in cands if c.jury_intercept is not None]
    assert len(scored_texts) == len(set(scored_texts))
    # The argumentative sentence of note 3 fails the neutral filter whenever it is kept.
    rejected = [c for c in cands if not c.passed]
    assert all(c.failed_filters and c.failed_filters[0]["reason"] for c in rejected)
    scored = [c for c in cands if c.passed]
    assert scored and all(c.jury_intercept is not None and c.jury_intercept_sd is not None for c in scored)
    best = max(scored, key=lambda c: c.jury_intercept or 0)
    assert run.phm_version == model.meta.version
    # The winner's score is re-estimated on fresh jury draws, and the proposal is decided on it.
    assert run.winner_index == best.index and run.winner_intercept is not None
    assert run.winner_intercept != best.jury_intercept
    if run.proposed_note is not None:
        note = run.proposed_note
        assert note.origin == Note.Origin.SUPERNOTE and note.text == best.text
        assert run.winner_intercept > 0.40 and run.winner_intercept > (run.best_existing_intercept or 0)
        # A score within the jury's spread of the best existing note is a tie, never proposed.
        if run.best_existing_intercept is not None:
            assert run.winner_intercept - run.best_existing_intercept >= (run.winner_intercept_sd or 0)
        assert JudgeRun.objects.filter(note=note).exists()
    else:
        assert run.winner_intercept <= max(0.40, run.best_existing_intercept or 0)
    page = admin_client.get(reverse("post_detail", args=[post.pk])).content.decode()
    assert "Supernote" in page and run.outcome.split(" ")[0] in page
    detail = admin_client.get(reverse("supernote_run", args=[run.pk])).content.decode()
    assert "All 12 candidates" in detail and f"{len(distinct)} distinct candidates of 12 drawn" in detail
    stuck = admin_client.get(reverse("stuck_posts")).content.decode()
    assert "A Supernote run already happened" in stuck and "Generate again" in stuck


def test_llm_run_sends_sampled_prompts_and_proposes_when_the_jury_agrees(
    phm_dir: Any, llm_server: ScriptedLLM, admin_client: Any, db: None
) -> None:
    post, notes, _raters = _stuck_post()
    services.phm_train_from_db(embedder_name=phm.HASHING, epochs=30)
    good = (
        "Large studies of millions of children found no link between vaccines and autism, and the 1998 paper "
        "claiming a link was retracted for fraud. https://cdc.gov/autism https://thelancet.com/retraction"
    )

    def answer(messages: list[dict[str, Any]]) -> str:
        content = messages[-1]["content"]
        if "Question:" in content:
            return "Fine.\nFinal decision: yes"
        notes_shown = split_data_block(content)[1].get("existing_notes", [])
        if len(notes_shown) >= 3:
            return "My own link https://evil.example/x"
        shown = {n["text"] for n in notes_shown}
        return good if {NOTE_TEXTS[0], NOTE_TEXTS[1]} <= shown else notes_shown[0]["text"]

    llm_server.respond_with(answer)
    run = SupernoteRun.objects.create(post=post, n_candidates=6, jury_size=200, seed=5)
    services.supernote_run_execute(run_id=run.pk)
    run.refresh_from_db()
    gen = [r for r in llm_server.requests if "Instructions:" in r["messages"][-1]["content"]]
    assert len(gen) == 6 and all((r["temperature"], r["top_p"]) == (0.95, 0.8) for r in gen)
    cands = list(run.candidates.all())
    foreign = [c for c in cands if "evil.example" in c.text]
    # The first foreign text fails the links filter; its repeats are not filtered again.
    assert [c.failed_filters[0]["filter"] for c in foreign][:1] == ["links_from_sources"]
    assert all(not c.passed and c.failed_filters[0]["filter"] == "duplicate" for c in foreign[1:])
    # A text that is one source note again (the scripted model copies the first note it is shown when
    # the two notes every rater likes are not both shown) is dropped before the filters and the jury.
    copies = [c for c in cands if c.text in NOTE_TEXTS]
    assert copies and all(not c.passed and c.jury_intercept is None for c in copies)
    assert {c.failed_filters[0]["filter"] for c in copies} <= {"merge", "duplicate"}
    assert "merge" in {c.failed_filters[0]["filter"] for c in copies}
    assert run.n_drawn == 6 and run.n_distinct == 2, run.outcome  # the merge and the foreign link
    assert "only copied a source note" in run.outcome
    assert all(c.producer == "llm:scripted-model" for c in cands)
    assert run.state == SupernoteRun.State.DONE, run.error
    # The candidate every juror's PHM finds helpful beats 0.40 and the best existing note (0.30).
    assert run.best_existing_intercept == pytest.approx(0.3)
    best = max((c for c in cands if c.passed), key=lambda c: c.jury_intercept or 0)
    assert (best.jury_intercept or 0) > 0.4, run.outcome
    note = run.proposed_note
    assert note is not None and note.origin == Note.Origin.SUPERNOTE and note.text == good
    assert note.evidence_urls == ["https://cdc.gov/autism", "https://thelancet.com/retraction"]
    assert note.status == NoteStatus.NEEDS_MORE_RATINGS
    assert JudgeRun.objects.filter(note=note).exists()
    assert set(run.source_note_ids) == {n.pk for n in notes}
    page = admin_client.get(reverse("post_detail", args=[post.pk])).content.decode()
    assert run.winner_index == best.index and run.winner_intercept is not None and run.winner_intercept > 0.4
    fresh = (
        f"simulated jury intercept {run.winner_intercept:.3f} ± {run.winner_intercept_sd:.3f}, re-estimated on fresh"
    )
    assert fresh in page and f"it scored {best.jury_intercept:.3f} on the draws that selected it" in page
    # What the jury's model was trained on and how good it is, stored with the run and shown.
    assert run.phm_trained_on == "database ratings (237 app)" and run.phm_auc is not None
    assert f"trained on {run.phm_trained_on}; its held-out AUC is {run.phm_auc:.2f}" in page
    assert ("close to chance" in page) == (run.phm_auc < 0.6)


def test_run_without_phm_stops_after_filters(phm_dir: Any, settings: Any, db: None) -> None:
    settings.LLM_BASE_URL = ""
    post, _, _ = _stuck_post()
    run = SupernoteRun.objects.create(post=post, n_candidates=3, jury_size=10)
    services.supernote_run_execute(run_id=run.pk)
    run.refresh_from_db()
    assert run.state == SupernoteRun.State.DONE and run.proposed_note is None
    assert "No personalized helpfulness model" in run.outcome
    assert run.candidates.count() == 3


def test_a_run_refuses_a_phm_saved_in_the_old_format_and_says_so(phm_dir: Any, settings: Any, db: None) -> None:
    settings.LLM_BASE_URL = ""
    post, _, _ = _stuck_post()
    model = services.phm_train_from_db(embedder_name=phm.HASHING, epochs=1)
    meta_path = phm_dir / model.meta.version / "meta.json"
    assert json.loads(meta_path.read_text())["inputs"][2:5] == [
        "note features: sources",
        "note features: text",
        "note features: classification",
    ]  # what the database gives: no stated reasons, no writer record
    old = {k: v for k, v in json.loads(meta_path.read_text()).items() if k not in ("format", "features")}
    meta_path.write_text(json.dumps(old))  # as a model of the previous version was saved
    run = SupernoteRun.objects.create(post=post, n_candidates=3, jury_size=10)
    services.supernote_run_execute(run_id=run.pk)
    run.refresh_from_db()
    assert run.state == SupernoteRun.State.DONE and run.proposed_note is None and run.phm_version == ""
    assert "saved in format 1" in run.outcome and "python manage.py train_phm" in run.outcome
    assert "no jury scored them" in run.outcome


def test_a_post_imported_without_text_gets_a_run_but_its_placeholder_is_never_the_post(
    phm_dir: Any, settings: Any, db: None
) -> None:
    settings.LLM_BASE_URL = ""
    post, _notes, _ = _stuck_post()
    services.phm_train_from_db(embedder_name=phm.HASHING, epochs=30)
    Post.objects.filter(pk=post.pk).update(text="(imported post 123, text not available)", text_available=False)
    seen: list[list[str]] = []

    def embed(texts: Any) -> Any:
        seen.append(list(texts))
        return phm.hashing_embed(texts)

    run = SupernoteRun.objects.create(post=post, n_candidates=12, jury_size=50, seed=3)
    services.supernote_run_execute(run_id=run.pk, embed=embed)
    run.refresh_from_db()
    assert run.state == SupernoteRun.State.DONE, run.error  # a proposal is not sent to the judges either
    assert not any("imported post 123" in t for batch in seen for t in batch)
    if run.proposed_note is not None:
        assert not JudgeRun.objects.filter(note=run.proposed_note).exists()
