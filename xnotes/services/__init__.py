"""X integration services, one module per step: pull the posts eligible for notes (`eligible`),
give imported posts their text (`hydrate`), ask X's evaluator (`evaluator`), propose a note exactly
once (`proposals`), follow the notes written (`written`), and the runs of the hydrate and sync
tasks (`runs`). Every X call goes through xnotes.client."""

from __future__ import annotations


class XFlowError(Exception):
    """An X action that is not allowed now; the message is for the person (or the operator)."""
