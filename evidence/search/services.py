"""Automation mode: "find evidence for me". Services (writes) around the pure flow of
evidence.search.flow: its configuration from settings, the synchronous `find_evidence` (the
`find_evidence` command and the benchmark), and the Celery run behind the contributor's button
(`automation_run_start` → task `automation_run_step`, one stage per delivery under a lease, then
the chosen sources join the draft's snippet review as proposals).
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from collections.abc import Sequence
from datetime import date
from typing import TYPE_CHECKING

import numpy as np
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from crowdnotes_site import leases
from crowdnotes_site.lib import lexical
from crowdnotes_site.lib.categories import parse_prior
from crowdnotes_site.lib.llm.steps.common import Similarity
from crowdnotes_site.llm import llm_client
from crowdnotes_site.queue import enqueue_on_commit
from crowdnotes_site.transitions import transition_rows
from evidence import pipeline, services
from evidence.embedding import encode
from evidence.errors import ExtractionError, FetchError
from evidence.index.query import LocalIndexBackend
from evidence.models import AutomationRun, EvidenceSource, UtilityRound
from evidence.search import flow
from evidence.search.backends import Backend, BraveBackend, HttpJson, SearchHit, SearxngBackend
from evidence.search.pool import Candidate, url_key
from evidence.snippets import snippets_propose

if TYPE_CHECKING:
    from notes.models import DraftJob  # type hints only: evidence reaches a draft through its relations

log = logging.getLogger(__name__)


# --- Configuration ---------------------------------------------------------------------------------


def search_config(
    *,
    tau: int | None = None,
    cutoff: date | None = None,
    single_query: bool = False,
    rank_order: bool = False,
) -> flow.SearchConfig:
    """The flow's settings (SEARCH_*), with the per-run choices (the ablations are the benchmark's
    and `find_evidence`'s flags, never a deployment's)."""
    return flow.SearchConfig(
        tau=tau or settings.SEARCH_TAU,
        cutoff=cutoff,
        single_query=single_query,
        rank_order=rank_order,
        query_count=settings.SEARCH_QUERY_COUNT,
        query_temperature=settings.SEARCH_QUERY_TEMPERATURE,
        k_per_query=settings.SEARCH_RESULTS_PER_QUERY,
        pool_limit=settings.SEARCH_POOL_LIMIT,
        pick_attempts=settings.SEARCH_PICK_ATTEMPTS,
        prior=parse_prior(settings.SEARCH_RELIABILITY_PRIOR),
        prior_weight=settings.SEARCH_PRIOR_WEIGHT,
        relevance_floor=settings.EVIDENCE_RELEVANCE_FLOOR,
        relevance_margin=settings.EVIDENCE_RELEVANCE_MARGIN if settings.EVIDENCE_RELEVANCE_MARGIN >= 0 else None,
        key_term_weight=settings.EVIDENCE_KEY_TERM_WEIGHT,
        screen_limit=settings.SEARCH_SCREEN_LIMIT,
    )


def search_backends() -> list[Backend]:
    """The backends named in SEARCH_BACKENDS, in that order."""
    http = HttpJson(
        timeout_s=settings.SEARCH_HTTP_TIMEOUT_S,
        retries=settings.SEARCH_HTTP_RETRIES,
        backoff_s=settings.SEARCH_HTTP_BACKOFF_S,
    )
    backends: list[Backend] = []
    for name in settings.SEARCH_BACKENDS:
        if name == "local":
            backends.append(
                LocalIndexBackend(
                    undated=settings.SEARCH_UNDATED,
                    matcher=services.get_matcher if settings.SEARCH_LOCAL_RERANK else None,
                )
            )
        elif name == "searxng":
            if not settings.SEARXNG_URL:
                raise ValueError("SEARCH_BACKENDS names searxng but SEARXNG_URL is not set")
            backends.append(SearxngBackend(base_url=settings.SEARXNG_URL, http=http, undated=settings.SEARCH_UNDATED))
        elif name == "brave":
            if not settings.BRAVE_API_KEY:
                raise ValueError("SEARCH_BACKENDS names brave but BRAVE_API_KEY is not set")
            backends.append(
                BraveBackend(
                    api_key=settings.BRAVE_API_KEY,
                    base_url=settings.BRAVE_API_URL,
                    http=http,
                    undated=settings.SEARCH_UNDATED,
                )
            )
        else:
            raise ValueError(f"unknown search backend {name!r} in SEARCH_BACKENDS (local, searxng, brave)")
    return backends


class CachedSimilarity:
    """MiniLM cosine with every text embedded once (a pool is compared with the post τ times)."""

    def __init__(self) -> None:
        self.vectors: dict[str, np.ndarray] = {}

    def prime(self, texts: list[str]) -> None:
        """Embed these texts in one batch (the flow primes the post and the whole pool)."""
        missing = list(dict.fromkeys(t for t in texts if t not in self.vectors))
        if missing:
            for text, vector in zip(missing, encode(missing), strict=True):
                self.vectors[text] = vector

    def __call__(self, a: str, b: str) -> float:
        self.prime([a, b])
        return float(self.vectors[a] @ self.vectors[b])


def _similarity() -> Similarity | None:
    return CachedSimilarity() if settings.SEARCH_BASELINE_SIMILARITY == "embedding" else None


def categorize(url: str) -> tuple[str, str]:
    domain, category, _ = services.source_category(url=url)
    return domain, category


def enrich_known(hits: list[SearchHit]) -> list[SearchHit]:
    """Final URL and content hash of result URLs fetched before, so the pool merges redirects
    and copies it already knows about."""
    unknown = [h for h in hits if not h.content_hash]
    if not unknown:
        return hits
    known = {
        row[0]: row[1:]
        for row in EvidenceSource.objects.filter(
            url_hash__in=[services.url_hash(h.url) for h in unknown], error_code=""
        ).values_list("url_hash", "final_url", "content_hash")
    }
    enriched = []
    for hit in hits:
        found = None if hit.content_hash else known.get(services.url_hash(hit.url))
        enriched.append(dataclasses.replace(hit, final_url=found[0], content_hash=found[1]) if found else hit)
    return enriched


def candidate_source(candidate: Candidate, *, owner: int | None = None) -> EvidenceSource:
    """The candidate's stored source: the index document, a fresh cached fetch, or fetched now
    through the safe fetcher (`owner`: whose run this is, charged if the LLM classifies the new
    source's domain). Raises FetchError or ExtractionError."""
    matcher = services.get_matcher()
    source = None
    if candidate.source_id is not None:
        source = EvidenceSource.objects.filter(pk=candidate.source_id).first()
    if source is None:
        source = services.source_fresh(url=candidate.url, model_label=matcher.model_label())
    if source is None:
        run = pipeline.PipelineResult()
        pipeline.retrieve(candidate.url, run, policy=services.fetch_policy(), min_words=settings.EVIDENCE_MIN_WORDS)
        assert run.fetched is not None and run.extracted is not None
        source = services.source_store(
            url=candidate.url, fetched=run.fetched, extracted=run.extracted, matcher=matcher, timings={}, owner=owner
        )
    return source


def candidate_relevance(post: str, candidate: Candidate, *, owner: int | None = None) -> float | None:
    """Cosine of the post with the document's best passage, by the snippet's own first pick
    (pre-filter top-k, or exhaustive when every passage's embedding is stored), so the floor
    judges what the contributor will be shown. The embeddings are stored for the snippet. None
    when the document cannot be read."""
    matcher = services.get_matcher()
    try:
        source = candidate_source(candidate, owner=owner)
    except (FetchError, ExtractionError):
        return None
    passages = services.passages_for(source=source, matcher=matcher)
    if not passages:
        return None
    result = pipeline.match(post, [p.text for p in passages], pipeline.PipelineResult(), matcher=matcher)
    services.passage_vectors_store(matcher=matcher, passages=passages, indices=result.embedded)
    return result.best_score


def candidate_coverage(terms: Sequence[str], candidate: Candidate, *, owner: int | None = None) -> float | None:
    """Share of the claim's key terms the candidate's document contains (its stored text: the
    screen read it for the relevance just before). None when the document cannot be read."""
    try:
        source = candidate_source(candidate, owner=owner)
    except (FetchError, ExtractionError):
        return None
    return lexical.term_coverage(terms, source.cleaned_text or "")


def search_deps(*, owner: int | None = None) -> flow.Deps:
    """The flow's dependencies; `owner` (the contributor whose run this is) is charged for LLM calls."""
    relevance = functools.partial(candidate_relevance, owner=owner)
    return flow.Deps(
        backends=search_backends(),
        client=llm_client(owner=owner),
        similarity=_similarity(),
        categorize=categorize,
        enrich=enrich_known,
        relevance=relevance if settings.EVIDENCE_RELEVANCE_FLOOR > 0 else None,
        coverage=functools.partial(candidate_coverage, owner=owner),
    )


# --- One call: the command's and the benchmark's path -------------------------------------------------


def find_evidence(
    *,
    post_text: str,
    tau: int | None = None,
    cutoff: date | None = None,
    single_query: bool = False,
    rank_order: bool = False,
    deps: flow.Deps | None = None,
) -> flow.SearchState:
    """Queries → search → pool → utility selection on the configured backends, nothing stored.

    `state.summary()` is the `find_evidence --json` object; `state.active` the chosen candidates
    (pool indices, reasons, producers), `state.rounds` every utility round. The benchmark of
    HealthNotes-style automation calls this with tau = the human note's URL count and cutoff =
    the note's date (published strictly before it; undated documents per SEARCH_UNDATED)."""
    cfg = search_config(tau=tau, cutoff=cutoff, single_query=single_query, rank_order=rank_order)
    return flow.run_all(flow.SearchState(post=post_text), cfg, deps or search_deps())


# --- The Celery run (the contributor's "Find evidence for me") ------------------------------------------


class AutomationError(Exception):
    """An automation request that is not allowed now; the message is for the contributor."""


@transaction.atomic
def automation_run_start(*, job: DraftJob, tau: int | None = None, cutoff: date | None = None) -> AutomationRun:
    """Start finding evidence for the draft's post (one run at a time per draft)."""
    if job.TRANSITIONS.final(job.state):  # nothing follows a submitted or discarded draft (DraftJob.TRANSITIONS)
        submitted = job.state == job.State.SUBMITTED
        raise AutomationError("This note was already submitted." if submitted else "This draft was discarded.")
    missing = job.post.text_missing_reason()
    if missing:  # its placeholder would become the search query
        raise AutomationError(f"CrowdNotes cannot search for evidence: {missing}.")
    type(job).objects.select_for_update().filter(pk=job.pk).first()  # serialize two clicks
    active = job.automation_runs.filter(state__in=[AutomationRun.State.QUEUED, AutomationRun.State.RUNNING])
    if active.exists():
        raise AutomationError("CrowdNotes is already looking for evidence for this note.")
    cfg = search_config(tau=tau)
    run = AutomationRun.objects.create(
        draft_job=job,
        post_text=job.post.text,
        tau=min(cfg.tau, settings.MAX_EVIDENCE_URLS),
        cutoff=cutoff,
        single_query=cfg.single_query,
        rank_order=cfg.rank_order,
    )
    _enqueue(run.pk, owner=job.contributor_id)
    return run


def _enqueue(run_id: int, owner: int | None = None) -> None:
    if owner is None:
        owner = AutomationRun.objects.filter(pk=run_id).values_list("draft_job__contributor_id", flat=True).first()
    enqueue_on_commit("evidence.tasks.automation_run_step", run_id, owner=owner)


@leases.sweep("automation_runs")
def automation_runs_sweep() -> list[int]:
    """Re-queue the automation runs whose worker stopped renewing the claim (beat: work_sweep)."""
    return leases.runs_sweep(AutomationRun, _enqueue)


def automation_run_claim(*, run_id: int) -> bool:
    """Take the run if queued, or running under an expired lease (lost worker)."""
    return leases.run_claim(AutomationRun, run_id=run_id)


def automation_run_release(*, run_id: int, error: str = "") -> None:
    """Give the lease back so a retry can take the run."""
    transition_rows(
        AutomationRun.objects.filter(pk=run_id, state=AutomationRun.State.RUNNING),
        AutomationRun.State.QUEUED, claimed_until=None, error=error[:2000],
    )  # fmt: skip


def automation_run_fail(*, run_id: int, error: str) -> None:
    leases.run_fail(AutomationRun, run_id=run_id, error=error)
    log.warning("automation run %s failed: %s", run_id, error)


def automation_run_step(*, run_id: int) -> str | None:
    """Run the run's current stage if this caller wins the lease; store the state, queue the next
    stage. Returns the stage run (None when another worker has it or it is finished)."""
    if not automation_run_claim(run_id=run_id):
        return None
    with leases.heartbeat(AutomationRun, run_id, field="claimed_until"):
        return _step_claimed(run_id)


def _step_claimed(run_id: int) -> str | None:
    run = AutomationRun.objects.select_related("draft_job").get(pk=run_id)
    owner = run.draft_job.contributor_id if run.draft_job is not None else None
    if run.attempts > settings.SEARCH_MAX_CLAIMS:
        automation_run_fail(run_id=run_id, error=f"gave up after {run.attempts - 1} deliveries")
        return None
    state = flow.SearchState.from_json(run.flow) if run.flow else flow.SearchState(post=run.post_text)
    cfg = search_config(tau=run.tau, cutoff=run.cutoff, single_query=run.single_query, rank_order=run.rank_order)
    stage = run.stage
    Stage = AutomationRun.Stage
    new_round: flow.Round | None = None
    if stage == Stage.QUERIES:
        flow.write_queries(state, cfg, search_deps(owner=owner))
        following = Stage.SEARCH
    elif stage == Stage.SEARCH:
        flow.run_searches(state, cfg, search_deps(owner=owner))
        following = Stage.POOL
    elif stage == Stage.POOL:
        flow.make_pool(state, cfg, flow.Deps(backends=[], categorize=categorize))
        following = Stage.FETCHING if state.done_choosing(cfg) else Stage.CHOOSING
    elif stage == Stage.CHOOSING and not state.screen_done:
        # A few candidates per delivery (each a best-passage match), so a run never holds the
        # CPU worker for long: the next batch is queued at the back, like a refine slice.
        flow.screen(state, cfg, search_deps(owner=owner))
        following = Stage.FETCHING if state.done_choosing(cfg) else Stage.CHOOSING
    elif stage == Stage.CHOOSING:
        new_round = flow.choose_one(state, cfg, search_deps(owner=owner))
        following = Stage.FETCHING if state.done_choosing(cfg) else Stage.CHOOSING
    elif stage == Stage.FETCHING:
        following = Stage.CHOOSING if _fetch_chosen(state, cfg, owner=owner) else Stage.DONE
    else:
        return None
    _advance(run, state, following, new_round)
    return stage


@transaction.atomic
def _advance(run: AutomationRun, state: flow.SearchState, following: str, new_round: flow.Round | None) -> None:
    if new_round is not None:
        _store_round(run, state, new_round)
    done = following == AutomationRun.Stage.DONE
    if done and run.draft_job is not None:
        proposals = [(state.pool[c.pool_index].url, c.reason) for c in state.active]
        skipped = snippets_propose(job=run.draft_job, run=run, proposals=proposals)
        for url in skipped:
            state.warnings.append(f"{url} is already in your evidence; it was not added twice.")
    moved = transition_rows(
        AutomationRun.objects.filter(pk=run.pk),
        AutomationRun.State.DONE if done else AutomationRun.State.QUEUED,
        flow=state.to_json(),
        stage=following,
        claimed_until=None,
        error="",
        finished_at=timezone.now() if done else None,
    )
    if moved and not done:
        _enqueue(run.pk, owner=run.draft_job.contributor_id if run.draft_job is not None else None)


def _store_round(run: AutomationRun, state: flow.SearchState, record: flow.Round) -> None:
    pool = state.pool
    UtilityRound.objects.bulk_create(
        [
            UtilityRound(
                run=run,
                number=record.number,
                candidates=[
                    {
                        "index": i,
                        "pool_index": p,
                        "title": pool[p].title,
                        "url": pool[p].url,
                        "snippet": pool[p].snippet[:300],
                        "category": pool[p].category,
                    }
                    for i, p in enumerate(record.shown)
                ],
                chosen_index=record.shown.index(record.chosen) if record.chosen is not None else None,
                chosen_url=pool[record.chosen].url if record.chosen is not None else "",
                reasoning=record.reasoning,
                producer=record.producer[:160],
                prompt_version=record.prompt_version,
                prompt=record.prompt,
                raw_output=record.raw_output,
                attempts=record.attempts,
                fallback=record.fallback,
                error=record.error,
                latency_ms=record.latency_ms,
            )
        ],
        ignore_conflicts=True,
    )


def _fetch_chosen(state: flow.SearchState, cfg: flow.SearchConfig, *, owner: int | None) -> bool:
    """Make sure every chosen source is stored (local index documents already are; web results
    are fetched through the safe fetcher), and drop a choice whose final URL or content turns
    out to be one already chosen, or that cannot be fetched. True when a replacement round is
    needed (fewer than τ left and candidates remain)."""
    seen: dict[str, str] = {}
    for choice in state.active:
        candidate = state.pool[choice.pool_index]
        try:
            source = candidate_source(candidate, owner=owner)
        except (FetchError, ExtractionError) as exc:
            choice.dropped = f"could not be fetched ({exc.error_code})"
            state.warnings.append(f"{candidate.url} {choice.dropped}; another candidate replaces it.")
            continue
        candidate.final_url = source.final_url or candidate.url
        candidate.content_hash = source.content_hash
        keys = {"url:" + url_key(candidate.final_url), "content:" + source.content_hash}
        twin = next((seen[k] for k in keys if k in seen), None)
        if twin is not None:
            what = "content" if "content:" + source.content_hash in seen else "final URL"
            choice.dropped = f"same {what} as {twin} once fetched"
            state.warnings.append(f"{candidate.url} has the {choice.dropped.removeprefix('same ')}; dropped.")
            continue
        for key in keys:
            seen[key] = candidate.url
    return len(state.active) < cfg.tau and bool(state.remaining())
