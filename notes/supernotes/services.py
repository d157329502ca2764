"""Writes for Supernotes: start a run (a Celery task does the work with visible progress), execute
it (candidates → filters → jury → selection → proposed note), train and store the PHM; assign and
answer a blind comparison of a Supernote with the best existing note."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from crowdnotes_site.lib.llm.steps import supernote as supernote_step
from crowdnotes_site.lib.text_rules import find_urls
from crowdnotes_site.llm import llm_client
from crowdnotes_site.queue import enqueue_on_commit
from evidence import embedding
from evidence.errors import FetchError
from evidence.fetch import fetch
from evidence.services import fetch_policy
from judging.services import judge_run_request
from notes.models import (
    Note,
    NoteStatusChange,
    Participant,
    Post,
    SupernoteCandidate,
    SupernoteComparison,
    SupernoteRun,
)
from notes.supernotes import candidates as cand
from notes.supernotes import comparison, filters, jury, selectors

if TYPE_CHECKING:
    from django.contrib.auth.models import User

    from notes.supernotes import phm  # torch: only workers and commands load it, never a web request

# `notes.supernotes.phm` imports torch: it is imported inside the functions below, which run in
# workers and commands, so that serving a page (this module is imported by notes.views) loads no
# model library.

logger = logging.getLogger(__name__)

Embed = Callable[[Sequence[str]], np.ndarray]


class SupernoteError(Exception):
    """A run that cannot start (shown to the user as is)."""


# --- PHM -------------------------------------------------------------------------------------


def phm_dir() -> Path:
    return Path(settings.PHM_DIR)


def embedder(name: str) -> Embed:
    """The text embedding a PHM was trained with: the shipped MiniLM, or the hashing baseline."""
    from notes.supernotes import phm  # torch: only workers and commands load it, never a web request

    if name == phm.HASHING:
        return phm.hashing_embed
    return embedding.encoder(name)


def phm_latest() -> phm.PHM | None:
    from notes.supernotes import phm  # torch: only workers and commands load it, never a web request

    path = phm.latest(phm_dir())
    return phm.load(path) if path else None


def phm_train_from_db(*, embedder_name: str, epochs: int = 8, max_ratings: int | None = None, seed: int = 0) -> phm.PHM:
    """Train the PHM on every rating whose rater has scorer parameters; store it under PHM_DIR."""
    from notes.supernotes import phm  # torch: only workers and commands load it, never a web request

    rows = selectors.phm_training_rows(max_ratings=max_ratings)
    if len(rows.label) == 0:
        raise SupernoteError("No ratings from raters with scorer parameters: run the scorer first.")
    embed = embedder(embedder_name)
    note_emb = embed(rows.note_texts)
    has_post = np.array([bool(t.strip()) for t in rows.post_texts], dtype=np.float32)
    post_emb = np.zeros_like(note_emb)
    with_text = np.flatnonzero(has_post)
    if len(with_text):
        post_emb[with_text] = embed([rows.post_texts[i] for i in with_text])
    data = phm.TrainingData(
        note_emb, post_emb, has_post, rows.note, rows.rater_intercept, rows.rater_factor, rows.label
    )
    described = ", ".join(f"{n} {k}" for k, n in sorted(rows.sources.items()))
    model = phm.train(
        data, embedder=embedder_name, trained_on=f"database ratings ({described})", epochs=epochs, seed=seed
    )
    phm.save(model, phm_dir())
    return model


# --- Runs ------------------------------------------------------------------------------------


def supernote_run_start(
    *, post: Post, user: User | None, n_candidates: int | None = None, jury_size: int | None = None,
    stratified: bool = False,
) -> SupernoteRun:  # fmt: skip
    """Queue a Supernote run for a stuck post (refused when the post is not stuck or a run is going)."""
    if not selectors.post_is_stuck(post=post):
        raise SupernoteError("This post is not stuck: it needs two misleading notes that Need More Ratings.")
    if post.supernote_runs.filter(state__in=[SupernoteRun.State.QUEUED, SupernoteRun.State.RUNNING]).exists():
        raise SupernoteError("A Supernote run for this post is already under way.")
    run = SupernoteRun.objects.create(
        post=post,
        requested_by=user,
        n_candidates=n_candidates or settings.SUPERNOTE_CANDIDATES,
        jury_size=jury_size or settings.SUPERNOTE_JURY_SIZE,
        stratified=stratified,
        seed=int(np.random.default_rng().integers(0, 2**31)),
        stage="Queued",
    )
    enqueue_on_commit("notes.tasks.supernote_run_execute", run.pk)
    return run


def supernote_runs_start_stuck(*, limit: int = 20) -> int:
    """The periodic job: a run for each stuck post that never had one."""
    started = 0
    for stuck in selectors.stuck_posts(limit=limit):
        if stuck.latest_run is None:
            supernote_run_start(post=stuck.post, user=None)
            started += 1
    return started


def _progress(run: SupernoteRun, stage: str, progress: int) -> None:
    run.stage, run.progress = stage, progress
    SupernoteRun.objects.filter(pk=run.pk).update(stage=stage, progress=progress)


def _reachable(url: str) -> str | None:
    try:
        fetch(url, fetch_policy())
    except FetchError as exc:
        return exc.error_code
    return None


def supernote_run_execute(*, run_id: int, embed: Embed | None = None) -> None:
    """Do a queued run. Idempotent: only a queued run is claimed; a failure is recorded on the run."""
    if not SupernoteRun.objects.filter(pk=run_id, state=SupernoteRun.State.QUEUED).update(
        state=SupernoteRun.State.RUNNING, stage="Starting"
    ):
        return
    run = SupernoteRun.objects.select_related("post").get(pk=run_id)
    try:
        _execute(run, embed)
    except Exception as exc:
        logger.exception("supernote run %s failed", run_id)
        SupernoteRun.objects.filter(pk=run_id).update(
            state=SupernoteRun.State.FAILED, error=f"{type(exc).__name__}: {exc}"[:2000], finished_at=timezone.now()
        )
        raise


def _execute(run: SupernoteRun, embed: Embed | None) -> None:
    rng = np.random.default_rng(run.seed)
    notes = selectors.note_summaries(post=run.post)
    if len(notes) < cand.MIN_SUBSET:
        raise SupernoteError("The post has fewer than two eligible notes now.")
    run.source_note_ids = [n.pk for n in notes]
    run.save(update_fields=["source_note_ids"])
    client = llm_client()
    subsets = cand.sample_subsets(len(notes), run.n_candidates, rng)
    rows: list[SupernoteCandidate] = []
    # 1. Candidates (0-60 %)
    for k, subset in enumerate(subsets):
        chosen = cand.pick(notes, subset)
        if client is not None:
            step = supernote_step.supernote_candidate_llm(
                client, post=run.post.text, notes=[n.source_note() for n in chosen]
            )
        else:
            step = supernote_step.supernote_candidate_extractive(notes=[n.merge_source() for n in chosen])
        rows.append(
            SupernoteCandidate(
                run=run, index=k, text=step.value or "", producer=step.producer.label,
                source_note_ids=[n.pk for n in chosen],
                filter_log=[] if step.value else [{"filter": "generation", "ok": False,
                                                   "reason": step.error or "No parsable answer.",
                                                   "by": step.producer.label}],
            )
        )  # fmt: skip
        if k % 5 == 4 or k == len(subsets) - 1:
            _progress(run, f"Writing candidates ({k + 1}/{len(subsets)})", int(60 * (k + 1) / len(subsets)))
    # 2. Filters (60-80 %)
    texts = {n.pk: n.text for n in notes}
    reach = _reachable if settings.SUPERNOTE_CHECK_LINKS_REACHABLE else None
    for k, row in enumerate(rows):
        if row.text:
            results = filters.run_filters(row.text, [texts[pk] for pk in row.source_note_ids], client=client,
                                          reachable=reach)  # fmt: skip
            row.filter_log = [r.as_log() for r in results]
            row.passed = all(r.ok for r in results)
        if k % 10 == 9 or k == len(rows) - 1:
            _progress(run, f"Checking principles ({k + 1}/{len(rows)})", 60 + int(20 * (k + 1) / len(rows)))
    SupernoteCandidate.objects.bulk_create(rows)
    # 3. Jury (80-95 %)
    passed = [r for r in rows if r.passed]
    model = phm_latest()
    existing = list(run.post.notes.exclude(origin=Note.Origin.SUPERNOTE).exclude(intercept__isnull=True))
    stored_best = max(existing, key=lambda n: n.intercept or 0.0) if existing else None
    if stored_best is not None:
        run.best_existing_note, run.best_existing_intercept = stored_best, stored_best.intercept
    if model is None:
        _finish(run, "No personalized helpfulness model is stored (run `manage.py train_phm`): candidates "
                     "were written and filtered, but no jury scored them and nothing is proposed.")  # fmt: skip
        return
    if not passed:
        _finish(run, "No candidate passed the principle filters; nothing is proposed.")
        return
    _progress(run, f"Jury: {len(passed)} candidates x {run.jury_size} jurors", 85)
    pool = selectors.jury_pool()
    if len(pool.participant_pks) == 0:
        _finish(run, "No rater has scorer parameters yet (run the scorer): no jury, nothing proposed.")
        return
    run.phm_version, run.mu = model.meta.version, pool.mu
    run.phm_trained_on, run.phm_auc = model.meta.trained_on[:300], model.meta.auc
    embed = embed or embedder(model.meta.embedder)
    note_emb = embed([r.text for r in passed])
    post_emb = embed([run.post.text])[0] if run.post.text.strip() else None
    scores = jury.jury_scores(
        lambda jurors: model.probabilities(note_emb, post_emb, pool.rater_intercept[jurors], pool.rater_factor[jurors]),
        pool.rater_intercept, pool.rater_factor, mu=pool.mu, ratings_per_note=pool.ratings_per_note,
        jury_size=run.jury_size, stratified=run.stratified, seed=run.seed,
    )  # fmt: skip
    for k, row in enumerate(passed):
        row.jury_intercept = float(scores.intercept[k])
        row.jury_factor = float(scores.factor[k])
        row.jury_intercept_sd = float(scores.intercept_sd[k])
    SupernoteCandidate.objects.bulk_update(passed, ["jury_intercept", "jury_factor", "jury_intercept_sd"])
    # 4. Selection
    choice = jury.select([r.jury_intercept or 0.0 for r in passed], run.best_existing_intercept)
    if choice.index is not None:
        with transaction.atomic():
            run.proposed_note = _propose(run, passed[choice.index], texts)
    _finish(run, choice.reason)


def _propose(run: SupernoteRun, row: SupernoteCandidate, texts: dict[int, str]) -> Note:
    """The chosen candidate as a note with origin supernote; it goes through the judges."""
    links = [u for u in find_urls(row.text, web_only=True)]
    note = Note.objects.create(
        post=run.post, author=None, text=row.text, origin=Note.Origin.SUPERNOTE, evidence_urls=links,
        draft_text=row.text,
    )  # fmt: skip
    NoteStatusChange.objects.create(note=note, status=note.status)
    judge_run_request(note=note)
    return note


def _finish(run: SupernoteRun, outcome: str) -> None:
    run.state, run.outcome, run.stage, run.progress = SupernoteRun.State.DONE, outcome, "Done", 100
    run.finished_at = timezone.now()
    run.save()


# --- Blind comparison (item 7) ---------------------------------------------------------------


class ComparisonError(Exception):
    """A comparison that cannot be assigned or answered (shown to the rater as is). `forbidden`:
    the rater may not judge this pair at all (their own note)."""

    def __init__(self, message: str, *, forbidden: bool = False) -> None:
        super().__init__(message)
        self.forbidden = forbidden


def comparison_assign(*, rater: Participant, post: Post) -> SupernoteComparison:
    """The rater's comparison of this post's pair, created on first request with a server-drawn
    order (a reload or a second request returns the same row, so the same order)."""
    pair = selectors.comparison_pair(post=post)
    if pair is None:
        raise ComparisonError("This post has no proposed Supernote together with another note to compare.")
    if pair.involves(rater):
        raise ComparisonError("You wrote one of these two notes, so you cannot compare them.", forbidden=True)
    item, _ = SupernoteComparison.objects.get_or_create(
        rater=rater, supernote=pair.supernote, other_note=pair.other,
        defaults={"supernote_first": comparison.draw_supernote_first()},
    )  # fmt: skip
    return item


def comparison_answer(
    *, item: SupernoteComparison, rater: Participant, preferred: str, scores_a: dict[str, int],
    scores_b: dict[str, int],
) -> None:  # fmt: skip
    """Store the rater's one answer: which note ("A" or "B") is more helpful and each note's scores.
    Refused when it was answered already (the update only matches an unanswered row)."""
    if item.rater_id != rater.pk:
        raise ComparisonError("This comparison was given to another rater.", forbidden=True)
    if preferred not in ("A", "B"):
        raise ComparisonError("Choose Note A or Note B.")
    a_is_supernote = item.supernote_first
    sn_scores, other_scores = (scores_a, scores_b) if a_is_supernote else (scores_b, scores_a)
    updated = SupernoteComparison.objects.filter(pk=item.pk, answered_at__isnull=True).update(
        answered_at=timezone.now(),
        supernote_preferred=(preferred == "A") == a_is_supernote,
        supernote_scores=sn_scores,
        other_scores=other_scores,
    )
    if not updated:
        raise ComparisonError("You already answered this comparison: one answer per rater and pair.")
