"""State changes of the stateful models, decided by their one table (crowdnotes_site.lib.transitions).

`Stateful` gives a model `transition(to)` (an instance about to be saved: checks, then sets
`state`); `transition_rows(queryset, to, **fields)` is the compare-and-set form the workers use
(`UPDATE … SET state = to WHERE state IN <the states to may follow> AND …`): it returns how many rows
moved, 0 when the table refuses the move from every row's current state (nothing is changed).
"""

from __future__ import annotations

from typing import Any, ClassVar, cast

from django.db.models import QuerySet

from crowdnotes_site.lib.transitions import TransitionRefused, Transitions

__all__ = ["Stateful", "TransitionRefused", "Transitions", "transition_rows"]


class Stateful:
    """Mixin for a model with a `state` field and a `TRANSITIONS` table."""

    TRANSITIONS: ClassVar[Transitions]

    def transition(self, to: str) -> None:
        """Set `state` to `to` if the table allows it from the current state; otherwise raise
        TransitionRefused and leave the instance as it was. The caller saves (under its row lock)."""
        row = cast(Any, self)  # a model: its `state` field is declared there
        self.TRANSITIONS.check(row.state, to)
        row.state = to

    def can_move_to(self, to: str) -> bool:
        return self.TRANSITIONS.allows(cast(Any, self).state, to)


def transition_rows(queryset: QuerySet[Any], to: str, **fields: Any) -> int:
    """Move the rows of `queryset` whose state allows `to` there (and set `fields`) in one UPDATE;
    the number of rows moved. The queryset's own filters (a claim, a lease) narrow it further."""
    table: Transitions = queryset.model.TRANSITIONS
    return queryset.filter(state__in=sorted(table.sources(to))).update(state=to, **fields)
