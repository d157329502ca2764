"""Reads of automation runs for the contributor's page: progress steps, the queries, the pool
with what was chosen and why, and every utility round."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from crowdnotes_site.lib.categories import CATEGORY_LABELS
from evidence.models import AutomationRun
from evidence.search.flow import NO_RELEVANT, SearchState
from evidence.search.pool import Candidate

if TYPE_CHECKING:
    from notes.models import DraftJob  # type hints only: evidence never imports notes

ACTIVE = [AutomationRun.State.QUEUED, AutomationRun.State.RUNNING]


@dataclass(frozen=True)
class Step:
    label: str
    status: str  # done | current | todo


@dataclass(frozen=True)
class PoolRow:
    number: int  # 1-based position in the pool (search rank order)
    candidate: Candidate
    category_label: str
    chosen_in_round: int | None
    dropped: str


@dataclass(frozen=True)
class ChosenRow:
    candidate: Candidate
    category_label: str
    reason: str
    producer: str
    round: int


@dataclass
class AutomationView:
    run: AutomationRun
    state: SearchState
    active: bool
    steps: list[Step]
    pool: list[PoolRow] = field(default_factory=list)
    chosen: list[ChosenRow] = field(default_factory=list)
    rounds: list[Any] = field(default_factory=list)
    no_relevant_text: str = NO_RELEVANT


def automation_running(*, job: DraftJob) -> bool:
    return job.automation_runs.filter(state__in=ACTIVE).exists()


def automation_view(*, job: DraftJob) -> AutomationView | None:
    """The draft's latest automation run, ready to show (None when it never asked for one)."""
    run = job.automation_runs.order_by("-created_at").first()
    if run is None:
        return None
    state = SearchState.from_json(run.flow) if run.flow else SearchState(post=run.post_text)
    Stage = AutomationRun.Stage
    order = [Stage.QUERIES, Stage.SEARCH, Stage.POOL, Stage.CHOOSING, Stage.FETCHING, Stage.DONE]
    at = order.index(Stage(run.stage)) if run.stage in order else 0
    failed = run.state == AutomationRun.State.FAILED
    backends = sorted({s["backend"] for s in state.searched})
    checked = sum(c.screened for c in state.pool)
    if state.pooled and not state.screen_done:
        choosing = f"Checking the candidates' best passages against the post: {checked} checked"
    elif state.floor is not None:
        choosing = (
            f"{state.relevant_count} of {checked} checked candidates address the post; "
            f"choosing {min(len(state.active), run.tau)} of {min(run.tau, state.relevant_count)}"
        )
    else:
        choosing = f"Choosing {min(len(state.active), run.tau)} of {run.tau}"
    labels = [
        f"{len(state.queries)} search queries written" if state.queries else "Writing search queries",
        f"Searched {', '.join(backends)}" if backends else "Searching",
        f"Pool of {len(state.pool)} candidates" if state.pooled else "Building the pool",
        choosing,
        "Fetching the chosen sources",
        f"{len(state.active)} source(s) proposed for your review"
        if run.state == AutomationRun.State.DONE
        else "Proposing",
    ]
    steps = []
    for i, label in enumerate(labels):
        status = "done" if i < at or run.state == AutomationRun.State.DONE else ("current" if i == at else "todo")
        if failed and i == at:
            status = "failed"
        steps.append(Step(label, status))
    chosen_round = {c.pool_index: c for c in state.choices}
    pool = [
        PoolRow(
            i + 1,
            c,
            CATEGORY_LABELS.get(c.category, c.category),
            chosen_round[i].round if i in chosen_round else None,
            chosen_round[i].dropped if i in chosen_round else "",
        )
        for i, c in enumerate(state.pool)
    ]
    chosen = [
        ChosenRow(state.pool[c.pool_index], CATEGORY_LABELS.get(state.pool[c.pool_index].category, ""), c.reason,
                  c.producer, c.round)
        for c in state.active
    ]  # fmt: skip
    return AutomationView(
        run=run,
        state=state,
        active=run.state in ACTIVE,
        steps=steps,
        pool=pool,
        chosen=chosen,
        rounds=list(run.rounds.all()),
    )
