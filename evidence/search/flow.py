"""Automation mode as one flow: queries → search → pool → utility rounds (pure: no ORM, no
settings; the LLM client, the backends, the similarity function and the categorizer are passed in).

Two callers run the same stages: `evidence.search.services.find_evidence` runs them all in one go
(the `find_evidence` command and the benchmark), and the Celery run
(`evidence.search.services.automation_run_step`) runs one stage per task and stores the state
(`SearchState.to_json`) between them, then fetches the chosen sources for the snippet review.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import date
from typing import Any

from crowdnotes_site.lib.categories import DEFAULT_RELIABILITY_PRIOR, OTHER
from crowdnotes_site.lib.llm.client import LLMClient, LLMError
from crowdnotes_site.lib.llm.steps import search as steps
from crowdnotes_site.lib.llm.steps.common import Similarity, StepResult
from evidence.search.backends import Backend, BackendError, SearchHit
from evidence.search.pool import Candidate, build_pool

# (url) -> (registered domain, category)
Categorize = Callable[[str], tuple[str, str]]
# Adds what is known about URLs fetched before (final URL, content hash) to web results.
Enrich = Callable[[list[SearchHit]], list[SearchHit]]
# (post, candidate) -> cosine of the post with the document's best passage, None when unreadable.
Relevance = Callable[[str, Candidate], float | None]
# (the claim's key terms, candidate) -> share of the terms the document contains, None when unreadable.
Coverage = Callable[[Sequence[str], Candidate], float | None]

NO_RELEVANT = "No source in the index addresses this claim; add your own URLs."


@dataclass(frozen=True)
class SearchConfig:
    tau: int = 3
    cutoff: date | None = None
    single_query: bool = False  # ablation: one query instead of diverse queries
    rank_order: bool = False  # ablation: search rank order instead of utility judgment
    query_count: int = 5
    query_temperature: float = 0.7
    k_per_query: int = 8
    pool_limit: int = 40
    pick_attempts: int = 2
    prior: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_RELIABILITY_PRIOR))
    prior_weight: float = 0.05
    snippet_chars: int = 300
    # A candidate is eligible only when its best passage's cosine with the post reaches the floor
    # (checked for at most screen_limit candidates, most promising first, screen_batch per step).
    relevance_floor: float = 0.0
    # ... and lies within this of the best screened candidate's (None: no such condition): a
    # second source is proposed only when it addresses the claim nearly as closely as the first;
    # a page that merely shares the topic is not proposed beside the page that answers the claim.
    relevance_margin: float | None = None
    # The margin and the offline choice rank by support = relevance + this x the share of the
    # claim's key terms the page contains (the floor stays on relevance alone): of two pages on
    # the claim's topic, the one that names what the claim names ("NSW", "surgical masks") is
    # the one that answers it. 0: relevance alone.
    key_term_weight: float = 0.0
    screen_limit: int = 8
    screen_batch: int = 3


@dataclass
class Deps:
    backends: Sequence[Backend]
    client: LLMClient | None = None
    similarity: Similarity | None = None
    categorize: Categorize | None = None
    enrich: Enrich | None = None
    relevance: Relevance | None = None
    coverage: Coverage | None = None


@dataclass
class Round:
    number: int
    shown: list[int]  # pool indices, in the order the judge saw them
    chosen: int | None  # pool index
    producer: str
    reasoning: str
    prompt_version: str = ""
    prompt: str = ""
    raw_output: str = ""
    attempts: int = 1
    fallback: bool = False
    error: str = ""
    latency_ms: int = 0


@dataclass
class Choice:
    pool_index: int
    round: int
    reason: str
    producer: str
    dropped: str = ""  # why it was dropped after fetching (duplicate, fetch failed)


@dataclass
class SearchState:
    post: str
    queries: list[str] = field(default_factory=list)
    query_producer: str = ""
    query_reasoning: str = ""
    query_prompt: str = ""
    query_raw: str = ""
    searched: list[dict[str, Any]] = field(default_factory=list)  # per query and backend: hits or error
    results: list[list[dict[str, Any]]] = field(default_factory=list)
    pool: list[Candidate] = field(default_factory=list)
    rounds: list[Round] = field(default_factory=list)
    choices: list[Choice] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    pooled: bool = False
    screen_done: bool = False
    floor: float | None = None  # the relevance floor the screen applied (None: no screen)
    margin: float | None = None  # the margin below the best screened support it applied
    key_terms: list[str] = field(default_factory=list)  # the claim's key terms the screen looked for
    key_term_weight: float = 0.0  # SearchConfig.key_term_weight when the screen ran

    def support(self, candidate: Candidate) -> float:
        """Relevance plus key_term_weight x the share of the claim's key terms the page contains."""
        return (candidate.relevance or 0.0) + self.key_term_weight * (candidate.coverage or 0.0)

    @property
    def active(self) -> list[Choice]:
        return [c for c in self.choices if not c.dropped]

    def eligible(self, index: int) -> bool:
        """Cleared the relevance floor and lies within the margin of the best screened candidate
        (or no screen ran: the ablation and the no-model paths)."""
        candidate = self.pool[index]
        if self.floor is None:
            return True
        if candidate.relevance is None or candidate.relevance < self.floor:
            return False
        if self.margin is None:
            return True
        best = max(self.support(c) for c in self.pool if c.relevance is not None)
        return self.support(candidate) >= best - self.margin

    def remaining(self) -> list[int]:
        taken = {c.pool_index for c in self.choices}
        return [i for i in range(len(self.pool)) if i not in taken and self.eligible(i)]

    @property
    def relevant_count(self) -> int:
        return sum(self.eligible(i) for i in range(len(self.pool))) if self.screen_done else 0

    @property
    def no_relevant(self) -> bool:
        """The screen ran and nothing in the pool addresses the post."""
        return self.screen_done and self.floor is not None and self.relevant_count == 0

    def done_choosing(self, cfg: SearchConfig) -> bool:
        return self.pooled and self.screen_done and (len(self.active) >= cfg.tau or not self.remaining())

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["pool"] = [c.to_json() for c in self.pool]
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SearchState:
        values = dict(data)
        values["pool"] = [Candidate.from_json(c) for c in values.get("pool", [])]
        values["rounds"] = [Round(**r) for r in values.get("rounds", [])]
        values["choices"] = [Choice(**c) for c in values.get("choices", [])]
        return cls(**values)

    def summary(self) -> dict[str, Any]:
        """The `find_evidence --json` object."""
        return {
            "queries": self.queries,
            "pool_size": len(self.pool),
            "chosen": [
                {
                    "url": self.pool[c.pool_index].url,
                    "title": self.pool[c.pool_index].title,
                    "reason": c.reason,
                    "category": self.pool[c.pool_index].category,
                    "producer": c.producer,
                }
                for c in self.active
            ],
            "warnings": self.warnings,
        }


# --- Stages ---------------------------------------------------------------------------------------


def write_queries(state: SearchState, cfg: SearchConfig, deps: Deps) -> None:
    """The search queries: one (ablation) or cfg.query_count diverse ones, by the LLM when one is
    configured (falling back visibly to the offline baseline), near-duplicates dropped."""
    n = 1 if cfg.single_query else cfg.query_count
    result: StepResult | None = None
    if deps.client is not None:
        try:
            result = steps.search_queries_llm(deps.client, post=state.post, n=n, temperature=cfg.query_temperature)
        except LLMError as exc:
            state.warnings.append(f"The LLM could not write queries ({exc}); the offline baseline wrote them.")
        if result is not None and not result.value:
            state.warnings.append("The LLM's queries could not be read; the offline baseline wrote them.")
            result = None
    llm_result = result
    if result is None:
        result = steps.search_queries_baseline(post=state.post, n=n, similarity=deps.similarity)
    queries = list(result.value or [])
    if llm_result is not None:
        queries, dropped = steps.drop_near_duplicates(queries, similarity=deps.similarity)
        if dropped:
            state.warnings.append(f"Dropped near-duplicate queries: {'; '.join(dropped)}")
    state.queries = queries[:n] or [state.post[:200]]
    state.query_producer = result.producer.label
    state.query_reasoning = result.reasoning
    state.query_prompt = result.prompt
    state.query_raw = result.raw_output


def run_searches(state: SearchState, cfg: SearchConfig, deps: Deps) -> None:
    """Every query on every backend; a failing backend leaves a warning and the others go on."""
    state.results, state.searched = [], []
    failed: dict[str, str] = {}
    for query in state.queries:
        for backend in deps.backends:
            if backend.name in failed:
                continue
            started = time.monotonic()
            try:
                hits = backend.search(query, k=cfg.k_per_query, cutoff=cfg.cutoff)
            except BackendError as exc:
                failed[backend.name] = str(exc)
                state.searched.append({"query": query, "backend": backend.name, "hits": 0, "error": str(exc)})
                continue
            if deps.enrich is not None:
                hits = deps.enrich(hits)
            state.results.append([_hit_json(h) for h in hits])
            state.searched.append(
                {
                    "query": query,
                    "backend": backend.name,
                    "hits": len(hits),
                    "ms": int((time.monotonic() - started) * 1000),
                }
            )
    for name, error in failed.items():
        working = [b.name for b in deps.backends if b.name not in failed]
        rest = f"results come from {', '.join(working)}" if working else "no backend answered"
        state.warnings.append(f"Search backend {name} failed ({error}); {rest}.")


def make_pool(state: SearchState, cfg: SearchConfig, deps: Deps) -> None:
    hits = [[_hit_from_json(h) for h in results] for results in state.results]
    state.pool = build_pool(hits, limit=cfg.pool_limit)
    if deps.categorize is not None:
        for candidate in state.pool:
            domain, category = deps.categorize(candidate.final_url or candidate.url)
            candidate.domain = domain
            candidate.category = candidate.category or category
    state.pooled = True
    if not state.pool:
        state.warnings.append("The search found nothing: no source to propose.")
        state.screen_done = True


def _screen_order(state: SearchState, deps: Deps) -> list[int]:
    """Unchecked candidates, most promising first: title + snippet similarity to the post (one
    batch), else search rank order."""
    todo = [i for i, c in enumerate(state.pool) if not c.screened]
    if deps.similarity is None:
        return todo
    texts = {i: f"{state.pool[i].title}. {state.pool[i].snippet}" for i in todo}
    prime = getattr(deps.similarity, "prime", None)
    if prime is not None:
        prime([state.post, *texts.values()])
    scores = {i: float(deps.similarity(state.post, texts[i])) for i in todo}
    return sorted(todo, key=lambda i: (-scores[i], i))


def screen(state: SearchState, cfg: SearchConfig, deps: Deps) -> int:
    """Check up to cfg.screen_batch more candidates against the relevance floor: the cosine of the
    post with each document's best passage (deps.relevance). The screen ends when cfg.screen_limit
    candidates were checked, when τ + 2 cleared the floor (enough for the prior to break ties), or
    when none is left. Without deps.relevance (or with the rank-order ablation) nothing is
    screened and every candidate is eligible. Returns how many were checked now."""
    if deps.relevance is None or cfg.rank_order:
        state.screen_done = True
        return 0
    state.floor = cfg.relevance_floor
    state.margin = cfg.relevance_margin
    if deps.coverage is not None and cfg.key_term_weight and not state.key_terms:
        state.key_terms = steps.key_terms(state.post)
    state.key_term_weight = cfg.key_term_weight if deps.coverage is not None else 0.0
    checked = sum(c.screened for c in state.pool)
    order = _screen_order(state, deps)[: max(0, min(cfg.screen_batch, cfg.screen_limit - checked))]
    for i in order:
        candidate = state.pool[i]
        candidate.relevance = deps.relevance(state.post, candidate)
        if deps.coverage is not None and state.key_terms and candidate.relevance is not None:
            candidate.coverage = deps.coverage(state.key_terms, candidate)
        candidate.screened = True
    checked += len(order)
    passing = sum(c.screened and state.eligible(i) for i, c in enumerate(state.pool))
    if checked >= min(cfg.screen_limit, len(state.pool)) or passing >= cfg.tau + 2:
        state.screen_done = True
        if passing == 0:
            state.warnings.append(NO_RELEVANT)
        elif passing < cfg.tau:
            terms = ", counting the claim's key terms it contains," if state.key_term_weight else ""
            within = (
                ""
                if cfg.relevance_margin is None
                else f" and{terms} within {cfg.relevance_margin:.2f} of the best source's"
            )
            state.warnings.append(
                f"Only {passing} of the {checked} sources checked address this claim closely enough "
                f"(best passage similarity at least {cfg.relevance_floor:.2f}{within}); fewer than {cfg.tau} are proposed."
            )
    return len(order)


def choose_one(state: SearchState, cfg: SearchConfig, deps: Deps) -> Round:
    """One utility round over the remaining candidates: the LLM (robust parsing, retried, then a
    visible fallback), the offline baseline, or the rank-order ablation."""
    remaining = state.remaining()
    number = len(state.rounds) + 1
    shown = [state.pool[i] for i in remaining]
    items = [(c.title, c.snippet[: cfg.snippet_chars], c.url) for c in shown]
    screened = [c.relevance for c in shown]
    if cfg.rank_order:
        first = state.pool[remaining[0]]
        why = f"Rank-order ablation: the highest-ranked remaining result (rank {first.best_rank})."
        return _record(state, Round(number, remaining, remaining[0], "ablation:rank-order", why))
    record: Round | None = None
    errors: list[str] = []
    attempts = 0
    if deps.client is not None:
        for attempts in range(1, cfg.pick_attempts + 1):
            started = time.monotonic()
            try:
                result = steps.pick_most_useful_llm(deps.client, post=state.post, candidates=items)
            except LLMError as exc:
                errors.append(str(exc))
                break
            if result.value is not None:
                record = Round(
                    number, remaining, remaining[result.value], result.producer.label,
                    steps.pick_reasoning(result.raw_output), result.prompt_version, result.prompt,
                    result.raw_output, attempts, latency_ms=int((time.monotonic() - started) * 1000),
                )  # fmt: skip
                break
            errors.append(f"attempt {attempts}: no valid index in {result.raw_output[:200]!r}")
    if record is None:
        relevance = [float(r) for r in screened if r is not None]
        known = len(relevance) == len(shown)  # every candidate screened: its best passage decides
        coverage = [c.coverage or 0.0 for c in shown] if known and state.key_term_weight else None
        prime = getattr(deps.similarity, "prime", None)
        if prime is not None and not known:  # one batch instead of one model call per candidate
            prime([state.post, *(f"{t}. {s}" for t, s, _ in items)])
        priors = [(c.category or OTHER, cfg.prior.get(c.category or OTHER, 0.0)) for c in shown]
        result = steps.pick_most_useful_baseline(
            post=state.post, candidates=items, similarity=deps.similarity, priors=priors,
            prior_weight=cfg.prior_weight, relevance=relevance if known else None,
            coverage=coverage, coverage_weight=state.key_term_weight,
        )  # fmt: skip
        record = Round(
            number, remaining, remaining[result.value], result.producer.label, result.reasoning,
            result.prompt_version, attempts=attempts or 1, fallback=deps.client is not None, error="; ".join(errors),
            latency_ms=int(result.latency_s * 1000),
        )  # fmt: skip
        if deps.client is not None:
            state.warnings.append(
                f"Round {number}: the LLM gave no usable answer ({'; '.join(errors)[:300]}); the offline baseline chose."
            )
    return _record(state, record)


def _record(state: SearchState, record: Round) -> Round:
    state.rounds.append(record)
    if record.chosen is not None:
        reason = record.reasoning or "Chosen as the most useful remaining result (the judge gave no reason)."
        state.choices.append(Choice(record.chosen, record.number, reason, record.producer))
    return record


def run_all(state: SearchState, cfg: SearchConfig, deps: Deps) -> SearchState:
    """Every stage in one go (no fetching): what `find_evidence` prints."""
    write_queries(state, cfg, deps)
    run_searches(state, cfg, deps)
    make_pool(state, cfg, deps)
    while not state.screen_done:
        screen(state, cfg, deps)
    while not state.done_choosing(cfg):
        choose_one(state, cfg, deps)
    return state


def _hit_json(hit: SearchHit) -> dict[str, Any]:
    data = asdict(hit)
    data["published"] = hit.published.isoformat() if hit.published else None
    return data


def _hit_from_json(data: dict[str, Any]) -> SearchHit:
    values = dict(data)
    values["published"] = date.fromisoformat(values["published"]) if values.get("published") else None
    return SearchHit(**values)
