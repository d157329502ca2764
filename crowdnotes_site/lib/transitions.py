"""Which state a row may move to from which: one declared table per model (pure: no Django).

Each stateful model (drafts, snippets, claimed runs, proposals to X, pulls from X) declares
`TRANSITIONS = Transitions("draft", {from: {to, ...}, ...})`; every state is a key, a final state
maps to nothing. Services and tasks never set a state themselves: they call the model's
`transition(to)` (crowdnotes_site.transitions.Stateful), or `transition_rows(queryset, to)` for a
compare-and-set UPDATE, and both ask this table. A move the table does not list is refused and
changes nothing.

The runs a worker claims start from one table, RUN_STEPS, the default of their abstract model
(crowdnotes_site.leases.ClaimedRun; a run model may extend it): queued → running (a claim;
running → running is a claim taken over after the worker was lost), running → queued (the claim
handed back with the next stage queued, or swept), running → done or failed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

QUEUED, RUNNING, DONE, FAILED = "queued", "running", "done", "failed"

# A run claimed one stage (or slice) at a time by a worker, which no one retries once it ended.
RUN_STEPS: dict[str, set[str]] = {
    QUEUED: {RUNNING, FAILED},
    RUNNING: {RUNNING, QUEUED, DONE, FAILED},
    DONE: set(),
    FAILED: set(),
}


class TransitionRefused(ValueError):
    """A state change the model's table does not allow (nothing was changed)."""

    def __init__(self, what: str, current: str, target: str, allowed: Iterable[str]) -> None:
        self.what, self.current, self.target = what, current, target
        options = ", ".join(sorted(allowed))
        then = f"from {current!r} only to {options}" if options else f"{current!r} is final"
        super().__init__(f"A {what} cannot go from {current!r} to {target!r} ({then}).")


@dataclass(frozen=True)
class Transitions:
    """A model's allowed state changes: `table[current]` is the set of states it may move to."""

    what: str
    table: Mapping[str, frozenset[str]]

    def __init__(self, what: str, table: Mapping[str, Iterable[str]]) -> None:
        frozen = {str(state): frozenset(str(t) for t in targets) for state, targets in table.items()}
        unknown = {t for targets in frozen.values() for t in targets} - set(frozen)
        if unknown:
            raise ValueError(f"{what}: transitions to states that are not in the table: {sorted(unknown)}")
        object.__setattr__(self, "what", what)
        object.__setattr__(self, "table", frozen)

    @property
    def states(self) -> frozenset[str]:
        return frozenset(self.table)

    def allows(self, current: str, target: str) -> bool:
        return str(target) in self.table.get(str(current), frozenset())

    def sources(self, target: str) -> frozenset[str]:
        """The states from which `target` may be reached (for a compare-and-set UPDATE)."""
        return frozenset(state for state, targets in self.table.items() if str(target) in targets)

    def check(self, current: str, target: str) -> None:
        """Raise TransitionRefused unless `current` → `target` is allowed."""
        if not self.allows(current, target):
            raise TransitionRefused(self.what, str(current), str(target), self.table.get(str(current), ()))

    def final(self, state: str) -> bool:
        """Nothing may follow this state."""
        return not self.table.get(str(state))
