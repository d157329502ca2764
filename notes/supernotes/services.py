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
from django.db import IntegrityError, transaction
from django.utils import timezone

from crowdnotes_site import leases
from crowdnotes_site.lib.communitynotes.supernotes import comparison, features, jury, phm
from crowdnotes_site.lib.llm.steps import supernote as supernote_step
from crowdnotes_site.lib.text_rules import find_urls
from crowdnotes_site.llm import llm_client
from crowdnotes_site.queue import enqueue_on_commit
from crowdnotes_site.transitions import transition_rows
from evidence import embedding
from evidence import snippets as evidence_snippets
from evidence.errors import FetchError
from evidence.fetch import fetch
from evidence.models import Snippet
from evidence.services import fetch_policy
from judging.selectors import unjudgeable_reason
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
from notes.supernotes import filters, selectors

if TYPE_CHECKING:
    from django.contrib.auth.models import AnonymousUser, User

logger = logging.getLogger(__name__)

Embed = Callable[[Sequence[str]], np.ndarray]


class SupernoteError(Exception):
    """A run that cannot start (shown to the user as is)."""


# --- PHM -------------------------------------------------------------------------------------


def phm_dir() -> Path:
    return Path(settings.PHM_DIR)


def embedder(name: str) -> Embed:
    """The text embedding a PHM was trained with: the shipped MiniLM, or the hashing baseline."""
    if name == phm.HASHING:
        return phm.hashing_embed
    return embedding.encoder(name)


def phm_latest() -> phm.PHM | None:
    """The newest stored PHM, None when there is none; SupernoteError for a model saved in an older
    format (other inputs: refused, never misread)."""
    path = phm.latest(phm_dir())
    if path is None:
        return None
    try:
        return phm.load(path)
    except phm.OldModelError as exc:
        raise SupernoteError(str(exc)) from exc


# What the PHM sees of a note in the database: its text and links, its classification. The stated
# reasons and the writer's record are not kept for the app's notes (and a Supernote has no writer).
DB_FEATURE_GROUPS = ("sources", "text", "classification")


def phm_note_features(model: phm.PHM, texts: Sequence[str]) -> np.ndarray:
    """The model's note features for candidate texts (a Supernote: misleading, no reasons, no writer)."""
    return features.columns([features.NoteInput(t) for t in texts], model.meta.features)


def phm_train_from_db(*, embedder_name: str, epochs: int = 8, max_ratings: int | None = None, seed: int = 0) -> phm.PHM:
    """Train the PHM on every rating whose rater has scorer parameters; store it under PHM_DIR."""
    rows = selectors.phm_training_rows(max_ratings=max_ratings)
    if len(rows.label) == 0:
        raise SupernoteError("No ratings from raters with scorer parameters: run the scorer first.")
    embed = embedder(embedder_name)
    note_emb = embed(rows.note_texts)
    names = features.feature_names(DB_FEATURE_GROUPS)
    inputs = [features.NoteInput(t, c, links=links) for t, c, links in
              zip(rows.note_texts, rows.note_classifications, rows.note_links, strict=True)]  # fmt: skip
    has_post = np.array([bool(t.strip()) for t in rows.post_texts], dtype=np.float32)
    post_emb = np.zeros_like(note_emb)
    with_text = np.flatnonzero(has_post)
    if len(with_text):
        post_emb[with_text] = embed([rows.post_texts[i] for i in with_text])
    data = phm.TrainingData(
        note_emb,
        post_emb,
        has_post,
        rows.note,
        rows.rater_intercept,
        rows.rater_factor,
        rows.label,
        features.columns(inputs, names),
        names,
    )
    described = ", ".join(f"{n} {k}" for k, n in sorted(rows.sources.items()))
    model = phm.train(
        data, embedder=embedder_name, trained_on=f"database ratings ({described})", epochs=epochs, seed=seed
    )
    phm.save(model, phm_dir())
    return model


# --- Runs ------------------------------------------------------------------------------------


def supernote_run_visible_to(run: SupernoteRun, user: User | AnonymousUser) -> bool:
    """A run (its candidates, filters, provenance) is shown to admins and to whoever started it.
    Who may start one: permission notes.add_supernoterun (admins; see notes/auth.py)."""
    if not user.is_authenticated:
        return False
    if user.has_perm("notes.view_supernoterun"):
        return True
    return run.requested_by_id is not None and run.requested_by_id == user.pk


ACTIVE_STATES = [SupernoteRun.State.QUEUED, SupernoteRun.State.RUNNING]
ALREADY_RUNNING = "A Supernote run for this post is already under way."


def supernote_run_start(
    *, post: Post, user: User | None, n_candidates: int | None = None, jury_size: int | None = None,
    stratified: bool = False, seed: int | None = None,
) -> SupernoteRun:  # fmt: skip
    """Queue a Supernote run for a stuck post (refused when the post is not stuck or a run is going).
    `seed` fixes its draws (the demo's run); else SUPERNOTE_SEED, else a random one.

    One active run per post is the database's rule (partial unique constraint
    `one_active_supernote_run_per_post`): of two concurrent clicks one inserts, the other gets
    the same "already under way" message, never a 500."""
    missing = post.text_missing_reason()
    if missing:
        raise SupernoteError(
            f"No Supernote for this post: {missing}. A Supernote is written and judged against the post's "
            'claim; fill the post\'s text (from X, or paste it on "Write a note on this post") first.'
        )
    if not selectors.post_is_stuck(post=post):
        raise SupernoteError("This post is not stuck: it needs two misleading notes that Need More Ratings.")
    if post.supernote_runs.filter(state__in=ACTIVE_STATES).exists():
        raise SupernoteError(ALREADY_RUNNING)
    try:
        with transaction.atomic():
            run = SupernoteRun.objects.create(
                post=post,
                requested_by=user,
                n_candidates=n_candidates or settings.SUPERNOTE_CANDIDATES,
                jury_size=jury_size or settings.SUPERNOTE_JURY_SIZE,
                stratified=stratified,
                seed=seed or settings.SUPERNOTE_SEED or int(np.random.default_rng().integers(1, 2**31)),
                stage="Queued",
            )
            _enqueue(run)
    except IntegrityError as exc:  # a concurrent start won the race
        raise SupernoteError(ALREADY_RUNNING) from exc
    return run


def _enqueue(run: SupernoteRun) -> None:
    """Queue the run's next slice in its starter's fair turn (crowdnotes_site/queue.py): each slice
    of a long run is a new message with a later priority, so other people's single calls on the
    llm queue go between the slices. A run nobody started (the periodic job) waits behind people."""
    task = "notes.tasks.supernote_run_execute"
    if run.requested_by_id is not None:
        enqueue_on_commit(task, run.pk, owner=run.requested_by_id)
    else:
        enqueue_on_commit(task, run.pk, priority=settings.FAIR_QUEUE_PRIORITY_STEPS - 1)


@leases.sweep("supernote_runs")
def supernote_runs_sweep() -> list[int]:
    """Re-queue the Supernote runs whose worker stopped renewing the claim (beat: work_sweep)."""
    return leases.runs_sweep(SupernoteRun, lambda pk: _enqueue(SupernoteRun.objects.get(pk=pk)))


def supernote_runs_start_stuck(*, limit: int = 20) -> int:
    """The periodic job: a run for each stuck post that never had one."""
    started = 0
    for stuck in selectors.stuck_posts(limit=limit):
        if stuck.latest_run is None:
            try:
                supernote_run_start(post=stuck.post, user=None)
            except SupernoteError:
                continue
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


def supernote_run_step(*, run_id: int, embed: Embed | None = None) -> bool:
    """One delivery of a run (task `notes.tasks.supernote_run_execute`): claim it, write and check
    the next SUPERNOTE_SLICE_CANDIDATES candidates (or, once all are written, run the jury and the
    selection), then hand it back with the next slice queued. True when more slices follow.

    Idempotent: only a queued run (or one whose worker's claim expired) is claimed, candidates are
    unique per (run, index), and a slice redone after a lost worker stores nothing twice. A
    failure is recorded on the run."""
    if not leases.run_claim(SupernoteRun, run_id=run_id):
        return False
    try:
        with leases.heartbeat(SupernoteRun, run_id, field="claimed_until"):
            return _step_claimed(run_id, embed)
    except Exception as exc:
        logger.exception("supernote run %s failed", run_id)
        leases.run_fail(SupernoteRun, run_id=run_id, error=f"{type(exc).__name__}: {exc}")
        raise


def supernote_run_execute(*, run_id: int, embed: Embed | None = None) -> None:
    """Do a whole queued run here, slice after slice (commands and tests; workers run one slice
    per delivery through `supernote_run_step`)."""
    while supernote_run_step(run_id=run_id, embed=embed):
        pass


def _run_notes(run: SupernoteRun) -> list[cand.NoteSummary]:
    """The run's source notes: chosen at its first slice and stored, the same ones every slice."""
    notes = selectors.note_summaries(post=run.post)
    if not run.source_note_ids:
        if len(notes) < cand.MIN_SUBSET:
            raise SupernoteError("The post has fewer than two eligible notes now.")
        run.source_note_ids = [n.pk for n in notes]
        SupernoteRun.objects.filter(pk=run.pk).update(source_note_ids=run.source_note_ids)
        return notes
    by_pk = {n.pk: n for n in notes}
    missing = [pk for pk in run.source_note_ids if pk not in by_pk]
    if missing:
        raise SupernoteError(f"Source notes {missing} are no longer eligible; start a new run.")
    return [by_pk[pk] for pk in run.source_note_ids]


def _post_text(run: SupernoteRun) -> str:
    """A post imported without its text has only a placeholder: never given to the writer or the jury as the post."""
    return "" if run.post.text_missing_reason() else run.post.text


def _step_claimed(run_id: int, embed: Embed | None) -> bool:
    run = SupernoteRun.objects.select_related("post").get(pk=run_id)
    if run.attempts > settings.SUPERNOTE_MAX_CLAIMS:
        error = f"gave up after {run.attempts - 1} deliveries of one slice (workers lost)"
        leases.run_fail(SupernoteRun, run_id=run_id, error=error)
        return False
    notes = _run_notes(run)
    # Offline, a subset in a given order always gives the same merge: each is drawn once.
    offline = llm_client() is None
    subsets = cand.sample_subsets(len(notes), run.n_candidates, np.random.default_rng(run.seed), distinct=offline)
    if run.candidates_done < len(subsets):
        _candidates_slice(run, notes, subsets)
        return True
    _select(run, notes, embed)
    return False


def _candidates_slice(run: SupernoteRun, notes: list[cand.NoteSummary], subsets: list[list[int]]) -> None:
    """Write and check the next slice of candidates (0-80 % of the progress), then hand the run back."""
    client = llm_client(owner=run.requested_by_id)
    post_text = _post_text(run)
    first, total = run.candidates_done, len(subsets)
    last = min(first + settings.SUPERNOTE_SLICE_CANDIDATES, total)
    _progress(run, f"Writing candidates {first + 1}-{last} of {total}", int(80 * first / total))
    rows: list[SupernoteCandidate] = []
    for k in range(first, last):
        chosen = cand.pick(notes, subsets[k])
        if client is not None:
            step = supernote_step.supernote_candidate_llm(
                client, post=post_text, notes=[n.source_note() for n in chosen]
            )
        else:
            step = supernote_step.supernote_candidate_extractive(notes=[n.merge_source() for n in chosen])
        rows.append(
            SupernoteCandidate(
                run=run, index=k, text=step.value or "", producer=step.producer.label,
                source_note_ids=[n.pk for n in chosen],
                filter_log=[] if step.value else [{"filter": "generation", "ok": False,
                                                   "reason": step.error or step.reasoning or "No parsable answer.",
                                                   "by": step.producer.label}],
            )
        )  # fmt: skip
    # Repeats of a text (also of an earlier slice's) are not new candidates: each distinct
    # (normalized) text is filtered and scored once, so the jury's spread is not sampling noise on one text.
    earlier = list(run.candidates.filter(index__lt=first).order_by("index").values_list("text", flat=True))
    repeats = cand.first_of_each_text([*earlier, *(r.text for r in rows)])
    for k, original in repeats.items():
        if k >= first:
            rows[k - first].filter_log = [{"filter": "duplicate", "ok": False, "by": "normalized text",
                                           "reason": f"Same text as candidate {original}: filtered and scored once."}]  # fmt: skip
    texts = {n.pk: n.text for n in notes}
    copies: set[int] = set()
    for row in rows:
        copied = cand.copied_source(row.text, list(texts.items())) if row.index not in repeats else None
        if copied is not None:
            copies.add(row.index)
            row.filter_log = [{"filter": "merge", "ok": False, "by": "normalized text",
                               "reason": f"Same text as source note {copied}: a copy of one note is not a merge."}]  # fmt: skip
    reach = _reachable if settings.SUPERNOTE_CHECK_LINKS_REACHABLE else None
    _progress(run, f"Checking principles of candidates {first + 1}-{last} of {total}", int(80 * first / total))
    for row in rows:
        if row.text and row.index not in repeats and row.index not in copies:
            results = filters.run_filters(row.text, [texts[pk] for pk in row.source_note_ids], client=client,
                                          reachable=reach)  # fmt: skip
            row.filter_log = [r.as_log() for r in results]
            row.passed = all(r.ok for r in results)
    with transaction.atomic():
        SupernoteCandidate.objects.bulk_create(rows, ignore_conflicts=True)
        handed_back = transition_rows(
            SupernoteRun.objects.filter(pk=run.pk, state=SupernoteRun.State.RUNNING),
            SupernoteRun.State.QUEUED, claimed_until=None, attempts=0, candidates_done=last,
            progress=int(80 * last / total), stage=f"Candidates written and checked: {last} of {total}",
        )  # fmt: skip
        if handed_back:
            _enqueue(run)


def _select(run: SupernoteRun, notes: list[cand.NoteSummary], embed: Embed | None) -> None:
    """Jury and selection (80-100 %), once every candidate is written and checked."""
    texts = {n.pk: n.text for n in notes}
    post_text = _post_text(run)
    rows = list(run.candidates.order_by("index"))
    repeats = cand.first_of_each_text([r.text for r in rows])
    run.n_drawn = sum(1 for r in rows if r.text)
    copies = [r for r in rows if r.index not in repeats and cand.copied_source(r.text, list(texts.items()))]
    # Distinct: new texts that are not a copy of one source note (neither is scored twice, nor at all).
    run.n_distinct = run.n_drawn - len(repeats) - len(copies)
    distinct = f"{run.n_distinct} distinct candidate{'s' if run.n_distinct != 1 else ''} of {run.n_drawn} drawn"
    if copies:
        distinct += f" ({len(copies)} more only copied a source note)"
    passed = [r for r in rows if r.passed]
    try:
        model = phm_latest()
    except SupernoteError as exc:
        _finish(
            run, f"{distinct}. {exc} Candidates were written and filtered; no jury scored them, nothing is proposed."
        )
        return
    existing = list(run.post.notes.exclude(origin=Note.Origin.SUPERNOTE).exclude(intercept__isnull=True))
    stored_best = max(existing, key=lambda n: n.intercept or 0.0) if existing else None
    if stored_best is not None:
        run.best_existing_note, run.best_existing_intercept = stored_best, stored_best.intercept
    if model is None:
        _finish(run, f"{distinct}. No personalized helpfulness model is stored (run `manage.py train_phm`): "
                     "candidates were written and filtered, but no jury scored them and nothing is proposed.")  # fmt: skip
        return
    if not passed:
        _finish(run, f"{distinct}; none passed the principle filters, nothing is proposed.")
        return
    _progress(run, f"Jury: {len(passed)} candidates x {run.jury_size} jurors", 85)
    pool = selectors.jury_pool()
    if len(pool.participant_pks) == 0:
        _finish(run, f"{distinct}. No rater has scorer parameters yet (run the scorer): no jury, nothing proposed.")
        return
    run.phm_version, run.mu = model.meta.version, pool.mu
    run.phm_trained_on, run.phm_auc = model.meta.trained_on[:300], model.meta.auc
    embed = embed or embedder(model.meta.embedder)
    note_emb = embed([r.text for r in passed])
    note_feats = phm_note_features(model, [r.text for r in passed])
    post_emb = embed([post_text])[0] if post_text.strip() else None

    def score(emb: np.ndarray, feats: np.ndarray, seed: int) -> jury.JuryScores:
        def probs_for(jurors: np.ndarray) -> np.ndarray:
            return model.probabilities(emb, post_emb, pool.rater_intercept[jurors], pool.rater_factor[jurors], feats)

        return jury.jury_scores(
            probs_for,
            pool.rater_intercept, pool.rater_factor, mu=pool.mu, ratings_per_note=pool.ratings_per_note,
            jury_size=run.jury_size, stratified=run.stratified, seed=seed,
        )  # fmt: skip

    scores = score(note_emb, note_feats, run.seed)
    for k, row in enumerate(passed):
        row.jury_intercept = float(scores.intercept[k])
        row.jury_factor = float(scores.factor[k])
        row.jury_intercept_sd = float(scores.intercept_sd[k])
    SupernoteCandidate.objects.bulk_update(passed, ["jury_intercept", "jury_factor", "jury_intercept_sd"])
    # 4. Selection: the best candidate on these draws; whether it is proposed is decided on its
    # intercept re-estimated on fresh jury draws (another seed: new jurors, new sampled ratings), as
    # the maximum over noisy estimates overstates the winner.
    best = int(np.nanargmax([r.jury_intercept or 0.0 for r in passed]))
    winner = passed[best]
    fresh = score(note_emb[best : best + 1], note_feats[best : best + 1], run.seed + 1)
    run.winner_index = winner.index
    run.winner_intercept, run.winner_intercept_sd = float(fresh.intercept[0]), float(fresh.intercept_sd[0])
    choice = jury.select([run.winner_intercept], run.best_existing_intercept, sd=run.winner_intercept_sd)
    if choice.index is not None:
        with transaction.atomic():
            run.proposed_note = _propose(run, winner, texts)
    _finish(
        run,
        f"{distinct}; {len(passed)} passed the principle filters. "
        f"{jury.describe_best([r.index for r in passed], [r.jury_intercept or 0.0 for r in passed], [r.jury_intercept_sd or 0.0 for r in passed])}"
        f"; on fresh jury draws (± {run.winner_intercept_sd:.3f}): {choice.reason}",
    )


def _propose(run: SupernoteRun, row: SupernoteCandidate, texts: dict[int, str]) -> Note:
    """The chosen candidate as a note with origin supernote; it goes through the judges."""
    links = [u for u in find_urls(row.text, web_only=True)]
    note = Note.objects.create(
        post=run.post, author=None, text=row.text, origin=Note.Origin.SUPERNOTE, evidence_urls=links,
        draft_text=row.text,
    )  # fmt: skip
    NoteStatusChange.objects.create(note=note, status=note.status)
    _carry_evidence(note, links)
    # Linked before the judge run is queued: the run's starter is the judges' owner (their fair
    # turn and LLM budget; judging.services._judge_owner), as the note has no author.
    SupernoteRun.objects.filter(pk=run.pk).update(proposed_note=note)
    if unjudgeable_reason(note) is None:  # a post imported without text is never judged by its placeholder
        judge_run_request(note=note)
    return note


def _carry_evidence(note: Note, links: list[str]) -> int:
    """A Supernote cites its source notes' pages: the passages their writers confirmed of those pages
    come with it (each once), so the judges read what the cited pages say, as for any note."""
    seen: set[tuple[str, int]] = set()
    made = 0
    rows = (
        Snippet.objects.filter(note__post=note.post, url__in=links, passage__isnull=False)
        .exclude(note=note)
        .select_related("passage")
        .order_by("note_id", "position", "id")
    )
    for snip in rows:
        if not evidence_snippets.snippet_is_confirmed(snip) or snip.passage_id is None:
            continue
        if (snip.url, snip.passage_id) in seen:
            continue
        seen.add((snip.url, snip.passage_id))
        Snippet.objects.create(
            post=note.post, note=note, url=snip.url, position=made, state=Snippet.State.READY, source=snip.source,
            passage=snip.passage, similarity=snip.similarity, sentence_start=snip.sentence_start,
            sentence_end=snip.sentence_end, confirmation=snip.confirmation, confirmed_by=snip.confirmed_by,
            confirmed_at=snip.confirmed_at, confirmed_text_hash=snip.confirmed_text_hash,
        )  # fmt: skip
        made += 1
    return made


def _finish(run: SupernoteRun, outcome: str) -> None:
    run.transition(SupernoteRun.State.DONE)
    run.outcome, run.stage, run.progress = outcome, "Done", 100
    run.finished_at, run.claimed_until = timezone.now(), None
    run.save(update_fields=[
        "state", "outcome", "stage", "progress", "finished_at", "claimed_until", "best_existing_note",
        "best_existing_intercept", "phm_version", "mu", "phm_trained_on", "phm_auc", "proposed_note",
        "n_drawn", "n_distinct", "winner_index", "winner_intercept", "winner_intercept_sd",
    ])  # fmt: skip


# --- Blind comparison ------------------------------------------------------------------------


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
    Refused when it was answered already (the update only matches an unanswered row), unless with
    this same answer: a repeat (a double click, a retried POST) is answered as the first was."""
    if item.rater_id != rater.pk:
        raise ComparisonError("This comparison was given to another rater.", forbidden=True)
    if preferred not in ("A", "B"):
        raise ComparisonError("Choose Note A or Note B.")
    a_is_supernote = item.supernote_first
    sn_scores, other_scores = (scores_a, scores_b) if a_is_supernote else (scores_b, scores_a)
    answer = {
        "supernote_preferred": (preferred == "A") == a_is_supernote,
        "supernote_scores": sn_scores,
        "other_scores": other_scores,
    }
    updated = SupernoteComparison.objects.filter(pk=item.pk, answered_at__isnull=True).update(
        answered_at=timezone.now(), **answer
    )
    if not updated and SupernoteComparison.objects.filter(pk=item.pk).values(*answer).first() != answer:
        raise ComparisonError("You already answered this comparison: one answer per rater and pair.")
