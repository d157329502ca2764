"""Revisions: a run gathers a note's revisable suggestions, writes a candidate, checks it (the
writer-independent checks, the judges, the jury: it must beat the current text) and proposes it; only
a person (the note's author, or an admin for a note without one) accepts or declines the proposal."""

from __future__ import annotations

import hashlib
import re
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

import numpy as np
from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Count, Max, Q
from django.utils import timezone

from crowdnotes_site import leases
from crowdnotes_site.lib.communitynotes.supernotes import jury
from crowdnotes_site.lib.llm.drafting import draft_budget
from crowdnotes_site.lib.llm.steps import revision as revision_step
from crowdnotes_site.lib.llm.steps.common import Evidence
from crowdnotes_site.llm import llm_client
from crowdnotes_site.queue import enqueue_on_commit
from crowdnotes_site.transitions import transition_rows
from evidence import embedding
from evidence import snippets as evidence_snippets
from evidence.models import Snippet
from judging.selectors import unjudgeable_reason
from judging.services import judge_run_request, preflight_run
from notes.living import checks as revision_checks
from notes.living.services.errors import ProposalError
from notes.living.services.versions import current_version
from notes.models import Note, NoteStatus, NoteStatusChange, NoteVersion, Rating, RetiredRating, RevisionRun, Suggestion
from notes.supernotes import selectors as supernote_selectors
from notes.supernotes import services as supernote_services

if TYPE_CHECKING:
    from django.contrib.auth.models import User


def _enqueue(run_id: int) -> None:
    enqueue_on_commit("notes.tasks.revision_run_execute", run_id)


def revision_run_start(*, note: Note) -> RevisionRun | None:
    """Queue a revision of the note unless one is queued or running (the constraint decides)."""
    version = current_version(note)
    try:
        with transaction.atomic():
            run = RevisionRun.objects.create(note=note, base_version=version)
            _enqueue(run.pk)
    except IntegrityError:
        return None
    return run


# A suggestion reaches the reviser when it names no source, or once its suggester confirmed the
# passage of its source (the passage's hash is checked again when the revision reads it).
REVISABLE = Q(source_url="") | Q(snippet__confirmation=Snippet.Confirmation.CONFIRMED)


def notes_due_for_revision(*, now: datetime | None = None) -> list[int]:
    """Notes with at least REVISION_MIN_SUGGESTIONS pending suggestions that may reach the reviser,
    the newest older than REVISION_QUIET_SECONDS, no active revision, no proposal waiting for a
    person, and a suggestion newer than their last revision."""
    now = now or timezone.now()
    rows = (
        Suggestion.objects.filter(REVISABLE, state=Suggestion.State.PENDING)
        .exclude(note__revision_runs__outcome=RevisionRun.Outcome.PROPOSED)
        .values("note_id")
        .annotate(n=Count("id"), newest=Max("created_at"))
        .filter(
            n__gte=settings.REVISION_MIN_SUGGESTIONS,
            newest__lte=now - timedelta(seconds=settings.REVISION_QUIET_SECONDS),
        )
    )
    due = []
    for row in rows:
        last = RevisionRun.objects.filter(note_id=row["note_id"]).order_by("-created_at").first()
        if last is not None and (last.state in (RevisionRun.State.QUEUED, RevisionRun.State.RUNNING)
                                 or last.created_at >= row["newest"]):  # fmt: skip
            continue
        due.append(row["note_id"])
    return due


def revisions_start_due(*, now: datetime | None = None) -> list[int]:
    """Beat: start a revision of every note due one; returns the runs started."""
    started = []
    for note in Note.objects.filter(pk__in=notes_due_for_revision(now=now)):
        run = revision_run_start(note=note)
        if run is not None:
            started.append(run.pk)
    return started


@leases.sweep("revision_runs")
def revision_runs_sweep() -> list[int]:
    """Re-queue revision runs whose worker stopped renewing the claim (beat: work_sweep)."""
    return leases.runs_sweep(RevisionRun, _enqueue)


def revision_run_execute(*, run_id: int) -> RevisionRun | None:
    """Work a revision run if this caller wins the claim (a duplicate delivery does nothing)."""
    if not leases.run_claim(RevisionRun, run_id=run_id):
        return None
    run = RevisionRun.objects.select_related("note__post", "base_version").get(pk=run_id)
    if run.attempts > settings.REVISION_MAX_CLAIMS:
        leases.run_fail(RevisionRun, run_id=run_id, error=f"gave up after {run.attempts - 1} attempts (workers lost)")
        return None
    with leases.heartbeat(RevisionRun, run_id, field="claimed_until"):
        try:
            _revise_claimed(run)
        except Exception as exc:
            leases.run_fail(RevisionRun, run_id=run_id, error=f"{type(exc).__name__}: {exc}")
            raise
    run.refresh_from_db()
    return run


def _revisable(suggestion: Suggestion) -> bool:
    """No source, or a source whose passage its suggester confirmed (and that passage unchanged)."""
    if not suggestion.source_url:
        return True
    return suggestion.snippet is not None and evidence_snippets.snippet_is_confirmed(suggestion.snippet)


def _confirmed_evidence(note: Note, suggestions: list[Suggestion]) -> list[tuple[str, str]]:
    """(url, passage) of the note's confirmed snippets and of the suggesters' confirmed sources."""
    rows = list(Snippet.objects.filter(note=note).select_related("passage"))
    rows += [s.snippet for s in suggestions if s.snippet is not None]
    out = []
    for snip in rows:
        if evidence_snippets.snippet_is_confirmed(snip) and snip.passage is not None:
            out.append((snip.url, snip.passage.text))
    return out


_WORD = re.compile(r"[a-z0-9][a-z0-9'-]{3,}")


def suggestion_taken(*, suggestion: str, current: str, candidate: str) -> bool:
    """Whether a candidate took up a suggestion: it has a word (4+ letters) of the suggestion (or of
    the passage its suggester confirmed) that the current text lacks. A lexical heuristic, stated as
    such on screen."""
    current_words = set(_WORD.findall(current.casefold()))
    candidate_words = set(_WORD.findall(candidate.casefold()))
    return bool((set(_WORD.findall(suggestion.casefold())) - current_words) & candidate_words)


def _jury_seed(*texts: str) -> int:
    """The jury's draws, fixed by what it compares: the same comparison always gets the same jurors
    and decision, so asking again cannot redraw a jury until a candidate passes, and the decision
    does not depend on a run's database id."""
    digest = hashlib.sha256("\x1f".join(texts).encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


def jury_predict(*, post_text: str, texts: list[str]) -> tuple[list[float] | None, str]:
    """The jury's predicted helpfulness (intercept) of each text on the same jurors and draws (seeded
    by the post and the texts: `_jury_seed`), or (None, why) without a stored PHM or raters with
    scorer parameters."""
    try:
        model = supernote_services.phm_latest()
    except supernote_services.SupernoteError as exc:  # a model saved in an older format
        return None, str(exc)
    if model is None:
        return None, "no personalized helpfulness model is stored (run `manage.py train_phm`)"
    pool = supernote_selectors.jury_pool()
    if len(pool.participant_pks) == 0:
        return None, "no rater has scorer parameters yet (run the scorer)"
    embed = supernote_services.embedder(model.meta.embedder)
    emb = embed(texts)
    feats = supernote_services.phm_note_features(model, texts)
    post_emb = embed([post_text])[0] if post_text.strip() else None
    scores = jury.jury_scores(
        lambda jurors: model.probabilities(
            emb, post_emb, pool.rater_intercept[jurors], pool.rater_factor[jurors], feats
        ),
        pool.rater_intercept, pool.rater_factor, mu=pool.mu, ratings_per_note=pool.ratings_per_note,
        jury_size=settings.REVISION_JURY_SIZE, stratified=True, seed=_jury_seed(post_text, *texts),
    )  # fmt: skip
    return [float(x) for x in np.asarray(scores.intercept)], f"PHM {model.meta.version}"


def _revise_claimed(run: RevisionRun) -> None:
    note = run.note
    base = run.base_version
    if note.current_version_id != base.pk:
        leases.run_fail(RevisionRun, run_id=run.pk, error="superseded: the note has a newer version")
        return
    if RevisionRun.objects.filter(note=note, outcome=RevisionRun.Outcome.PROPOSED).exists():
        _finish(run, outcome=RevisionRun.Outcome.REJECTED,
                reasons="A proposed revision of this note waits for a person's decision.")  # fmt: skip
        return
    pending = (
        Suggestion.objects.filter(note=note, state=Suggestion.State.PENDING, created_at__lte=run.created_at)
        .select_related("snippet__passage")
        .order_by("created_at")
    )
    suggestions = [s for s in pending if _revisable(s)]
    if not suggestions:
        _finish(run, outcome=RevisionRun.Outcome.REJECTED,
                reasons="No pending suggestion to revise from (a suggestion with a source waits for its suggester "
                        "to confirm the passage).")  # fmt: skip
        return
    missing = note.post.text_missing_reason()
    if missing:
        _decide(run, suggestions, candidate="", reasons=[f"not revised: {missing}"])
        return
    evidence = _confirmed_evidence(note, suggestions)
    urls = sorted(set(base.evidence_urls) | {u for u, _ in evidence})
    client = llm_client(owner=note.author.user_id if note.author else None)
    budget = draft_budget(urls)
    if client is None:
        # The sentence of the passage the suggester saw highlighted when confirming it (else the passage):
        # a passage is a window of the page that may start mid-sentence.
        passages = [s.snippet.sentence or s.snippet.passage.text for s in suggestions if s.snippet is not None
                    and s.snippet.passage and evidence_snippets.snippet_is_confirmed(s.snippet)]  # fmt: skip
        offline = revision_step.revise_baseline(note=base.text, suggestion_passages=passages, budget=budget)
        run.producer = f"baseline:{revision_step.BASELINE}"
        RevisionRun.objects.filter(pk=run.pk).update(producer=run.producer)
        if offline is None:
            _decide(run, suggestions, candidate="", reasons=[
                "no LLM is configured, and the offline revision (adding a sentence of a passage a suggester "
                "confirmed) had nothing to add within the length budget"])  # fmt: skip
            return
        _judge_and_score(run, suggestions, offline, urls, evidence)
        return
    step = revision_step.revise_llm(
        client, post=note.post.text, note=base.text,
        suggestions=[revision_step.SuggestionInput(kind=s.kind, text=s.text) for s in suggestions],
        snippets=[Evidence(text=t, source=u) for u, t in evidence], budget=budget,
    )  # fmt: skip
    RevisionRun.objects.filter(pk=run.pk).update(prompt=step.prompt, producer=step.producer.label)
    run.prompt, run.producer = step.prompt, step.producer.label
    if step.value is None:
        _decide(run, suggestions, candidate="", reasons=["the LLM's revision broke the note rules (one line, "
                                                          "no URL, within the length budget)"])  # fmt: skip
        return
    _judge_and_score(run, suggestions, str(step.value), urls, evidence)


def _judge_and_score(
    run: RevisionRun, suggestions: list[Suggestion], candidate: str, urls: list[str], evidence: list[tuple[str, str]]
) -> None:
    note, base = run.note, run.base_version
    reasons: list[str] = []
    if candidate.strip() == base.text.strip():
        reasons.append("the revision is the current text unchanged")
    # 1. Checks that do not depend on the model that wrote the candidate.
    taken = [s for s in suggestions if s.pk in _taken_ids(base.text, candidate, suggestions)]
    found = revision_checks.proposal_checks(
        embed=embedding.encoder(revision_checks.MODEL), post_text=note.post.text, current_text=base.text,
        candidate=candidate, current_urls=base.evidence_urls, candidate_urls=_version_urls(base, taken),
        confirmed_urls=sorted(set(base.evidence_urls) | {u for u, _ in evidence}),
    )  # fmt: skip
    run.checks = [c.as_dict() for c in found]
    reasons += revision_checks.failed(found)
    # 2. Judges on the candidate with the same inputs as the note's own judge run.
    result = preflight_run(
        post_text=note.post.text, note_text=candidate, urls=urls,
        snippets=[Evidence(text=t, source=u) for u, t in evidence], owner=note.author.user_id if note.author else None,
    )  # fmt: skip
    run.judge_log = [
        {"stage": st.stage, "verdict": st.verdict, "reasoning": st.reasoning, "judge_kind": st.judge_kind,
         "judge_name": st.judge_name, "error": st.error}
        for st in result.stages
    ]  # fmt: skip
    run.judges_passed = bool(result.helpful)
    if not run.judges_passed:
        failed = [st.stage for st in result.stages if st.verdict != "yes"]
        reasons.append(f"the judges did not pass it ({', '.join(failed) or 'no verdict'})")
    # 3. The jury: the candidate against the current version, same jurors and draws.
    predicted, why = jury_predict(post_text=note.post.text, texts=[base.text, candidate])
    margin = settings.REVISION_JURY_MARGIN
    run.jury_margin = margin
    if predicted is None:
        reasons.append(f"no jury prediction: {why}")
    else:
        run.jury_current, run.jury_candidate = predicted
        if not run.jury_candidate > run.jury_current + margin:
            reasons.append(
                f"the jury's predicted helpfulness {run.jury_candidate:.3f} does not beat the current version's "
                f"{run.jury_current:.3f} by the margin {margin:.2f}"
            )
    _decide(run, suggestions, candidate=candidate, reasons=reasons)


def _taken_ids(base_text: str, candidate: str, suggestions: list[Suggestion]) -> set[int]:
    if not candidate:
        return set()
    return {s.pk for s in suggestions
            if suggestion_taken(suggestion=f"{s.text} {_confirmed_passage(s)}", current=base_text,
                                candidate=candidate)}  # fmt: skip


def _confirmed_passage(suggestion: Suggestion) -> str:
    """The passage the suggester confirmed in their source ("" without one): its words count as theirs."""
    snip = suggestion.snippet
    if snip is None or snip.passage is None or not evidence_snippets.snippet_is_confirmed(snip):
        return ""
    return snip.passage.text


def _used_snippets(used: list[Suggestion]) -> list[dict[str, object]]:
    """The confirmed passages of the suggestions a revision took up, as a version stores them."""
    return [{"url": s.snippet.url, "text": s.snippet.passage.text, "snippet": s.snippet.pk}
            for s in used if s.snippet is not None and s.snippet.passage is not None
            and evidence_snippets.snippet_is_confirmed(s.snippet)]  # fmt: skip


def _version_urls(base: NoteVersion, used: list[Suggestion]) -> list[str]:
    """The sources a revision's version cites: the current version's and those of the suggestions it took up."""
    return sorted(set(base.evidence_urls) | {str(s["url"]) for s in _used_snippets(used)})


def proposal_decider(note: Note) -> User | None:
    """Who decides on a revision of this note: its author, while they have an active account; None
    means an admin with `notes.decide_revision` (imported notes, Supernotes, authors who are gone)."""
    if note.origin == Note.Origin.SUPERNOTE or note.author is None or note.author.user is None:
        return None
    user = note.author.user
    return user if user.is_active else None


def may_decide(*, run: RevisionRun, user: User) -> bool:
    decider = proposal_decider(run.note)
    if decider is not None:
        return bool(user.pk == decider.pk)
    return bool(user.has_perm("notes.decide_revision"))


def _decide(run: RevisionRun, suggestions: list[Suggestion], *, candidate: str, reasons: list[str]) -> None:
    """Reject with the reasons, or offer the candidate to a person as a proposal: no text changes here."""
    run.candidate_text = candidate
    taken = _taken_ids(run.base_version.text, candidate, suggestions)
    if reasons:
        with transaction.atomic():
            _resolve(run, suggestions, taken, state=Suggestion.State.USED_REJECTED,
                     reason=f"the revision that took it up was rejected: {'; '.join(reasons)}",
                     why_none="; ".join(reasons))  # fmt: skip
            _finish(run, outcome=RevisionRun.Outcome.REJECTED, reasons="Rejected: " + "; ".join(reasons) + ".")
        return
    why = (f"checks passed; judges passed; jury {run.jury_candidate:.3f} > current {run.jury_current:.3f} + margin "
           f"{run.jury_margin:.2f}")  # fmt: skip
    decider = proposal_decider(run.note)
    who = f"its author ({decider.get_username()})" if decider is not None else "an admin"
    with transaction.atomic():
        _resolve(run, suggestions, taken, state=Suggestion.State.IN_PROPOSAL,
                 reason=f"taken up by a proposed version that waits for {who} to decide")  # fmt: skip
        _finish(run, outcome=RevisionRun.Outcome.PROPOSED, reasons=f"Proposed: {why}. Waits for {who} to decide.")


@transaction.atomic
def revision_proposal_decide(*, run_id: int, user: User, accept: bool, reason: str) -> RevisionRun:
    """A person accepts (the candidate becomes the note's next version) or declines (kept with the
    reason) a proposed revision. Decided once: the run's outcome is checked under the note's row lock."""
    reason = reason.strip()
    run = RevisionRun.objects.select_related("note__author__user", "base_version").get(pk=run_id)
    if not may_decide(run=run, user=user):
        raise ProposalError("Only the note's author (or an admin, for a note without one) decides on its revisions.")
    if not accept and not reason:
        raise ProposalError("Say why you decline this revision: the suggesters see your reason.")
    note = Note.objects.select_for_update().select_related("post").get(pk=run.note_id)
    run.refresh_from_db()
    if run.outcome != RevisionRun.Outcome.PROPOSED:
        raise ProposalError(f"This revision was already decided ({run.get_outcome_display().lower()}).")
    decided = {"decided_by": user, "decided_at": timezone.now(), "decision_reason": reason[:2000]}
    base = run.base_version
    proposed = list(Suggestion.objects.filter(revision=run, state=Suggestion.State.IN_PROPOSAL)
                    .select_related("snippet__passage"))  # fmt: skip
    name = user.get_username()
    if note.current_version_id != base.pk:  # versions change only by an accepted proposal: a guard
        raise ProposalError("The note has a newer version than the one this revision started from.")
    if not accept:
        Suggestion.objects.filter(pk__in=[s.pk for s in proposed]).update(
            state=Suggestion.State.USED_REJECTED, outcome_reason=f"the revision that took it up was declined by {name}: {reason}"
        )  # fmt: skip
        RevisionRun.objects.filter(pk=run.pk).update(outcome=RevisionRun.Outcome.DECLINED, **decided)
    else:
        why = f"proposed by revision run {run.pk} ({run.reasons.removeprefix('Proposed: ')}); accepted by user:{name}"
        version = _publish(note, base, run, run.candidate_text, why, proposed, accepted_by=user)
        Suggestion.objects.filter(pk__in=[s.pk for s in proposed]).update(
            state=Suggestion.State.USED_PUBLISHED, outcome_reason=f"the version {name} accepted takes up its words"
        )
        RevisionRun.objects.filter(pk=run.pk).update(outcome=RevisionRun.Outcome.PUBLISHED, published_version=version,
                                                     **decided)  # fmt: skip
    run.refresh_from_db()
    return run


def _publish(
    note: Note, base: NoteVersion, run: RevisionRun, text: str, why: str, used: list[Suggestion], *, accepted_by: User
) -> NoteVersion:
    """The accepted candidate becomes the note's current version. The old version keeps its ratings
    (retired, no longer scored) and the status it had, which the post keeps showing until the new
    version has a status of its own; the new one starts its own ratings."""
    old = list(Rating.objects.filter(note=note))
    base.final_status, base.final_num_ratings, base.final_intercept = note.status, len(old), note.intercept
    base.predicted_intercept = run.jury_current
    base.save(update_fields=["final_status", "final_num_ratings", "final_intercept", "predicted_intercept"])
    snippets = _used_snippets(used)
    urls = _version_urls(base, used)
    version = NoteVersion.objects.create(
        note=note, number=base.number + 1, text=text, evidence_urls=urls, snippets=base.snippets + snippets,
        producer=run.producer, reason=f"{len(used)} suggestion(s) taken up; {why}",
        predicted_intercept=run.jury_candidate, accepted_by=accepted_by,
    )  # fmt: skip
    RetiredRating.objects.bulk_create(
        [RetiredRating(version=base, rater_id=r.rater_id, level=r.level, tags=r.tags, created_at=r.created_at)
         for r in old]
    )  # fmt: skip
    Rating.objects.filter(note=note).delete()
    Snippet.objects.filter(pk__in=[s["snippet"] for s in snippets]).update(note=note)
    previous = note.status
    Note.objects.filter(pk=note.pk).update(
        text=text, evidence_urls=urls, current_version=version, status=NoteStatus.NEEDS_MORE_RATINGS,
        num_ratings=0, neg_side_ratings=0, pos_side_ratings=0, intercept=None, factor=None, intercept_max=None,
        score_rules=[], score_explanation="", scored_at=None,
    )  # fmt: skip
    NoteStatusChange.objects.create(note=note, previous_status=previous, status=NoteStatus.NEEDS_MORE_RATINGS)
    note.refresh_from_db()
    if unjudgeable_reason(note) is None:
        judge_run_request(note=note)  # the accepted text's own judge run, on the judge audit
    return version


def _resolve(
    run: RevisionRun, suggestions: list[Suggestion], taken: set[int], *, state: str, reason: str, why_none: str = ""
) -> None:
    """Tell each suggester what became of theirs: `state` and `reason` for those the candidate took
    up; `why_none` says why there is no candidate text at all."""
    for s in suggestions:
        if s.pk in taken:
            new_state, why = state, reason
        else:
            new_state = Suggestion.State.NOT_USED
            why = ("the revision did not take up its words" if run.candidate_text
                   else f"no revision text was written: {why_none}")  # fmt: skip
        Suggestion.objects.filter(pk=s.pk, state=Suggestion.State.PENDING).update(
            state=new_state, outcome_reason=why, revision=run
        )


def _finish(run: RevisionRun, *, outcome: str, reasons: str) -> None:
    transition_rows(
        RevisionRun.objects.filter(pk=run.pk), RevisionRun.State.DONE, outcome=outcome, reasons=reasons, candidate_text=run.candidate_text,
        judge_log=run.judge_log, judges_passed=run.judges_passed, jury_current=run.jury_current,
        jury_candidate=run.jury_candidate, jury_margin=run.jury_margin, checks=run.checks,
        claimed_until=None, finished_at=timezone.now(),
    )  # fmt: skip
