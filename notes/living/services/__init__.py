"""Living notes: note requests, a note's versions, suggestions attached to ratings, and revisions. A
revision that passes the checks independent of its writer (notes/living/checks.py), the judges and
the jury (it must beat the current text) becomes a proposal; only a person (the note's author, or an
admin for a note without one) makes it the note's next version, or declines it with a reason.

A revision run follows the claimed-run protocol of crowdnotes_site.leases: one active run per note
(a partial unique constraint), a compare-and-set claim renewed by a heartbeat, and the work sweep
re-queues a run whose worker was lost. Accepting re-checks, under the note's row lock, that the
proposal is still open and the version it revised still current, so a proposal is decided once.

One module per concept: versions.py, note_requests.py, suggestions.py, revisions.py, errors.py (what
the actions refuse). The names below are the feature's public API: callers import `services` and
use `services.suggestion_add`, etc."""

from __future__ import annotations

from notes.living.services.errors import LivingError, ProposalError, StaleSuggestionError
from notes.living.services.note_requests import RequestResult, note_request_by_x_id, note_request_create
from notes.living.services.revisions import (
    REVISABLE,
    jury_predict,
    may_decide,
    notes_due_for_revision,
    proposal_decider,
    revision_proposal_decide,
    revision_run_execute,
    revision_run_start,
    revision_runs_sweep,
    revisions_start_due,
    suggestion_taken,
)
from notes.living.services.suggestions import (
    rating_withdraw,
    suggestion_add,
    suggestion_kind,
    suggestion_snippet_review,
    suggestion_source_refusal,
    suggestion_tag_kind,
    suggestions_withdraw,
)
from notes.living.services.versions import current_version

__all__ = [
    "REVISABLE",
    "LivingError",
    "ProposalError",
    "RequestResult",
    "StaleSuggestionError",
    "current_version",
    "jury_predict",
    "may_decide",
    "note_request_by_x_id",
    "note_request_create",
    "notes_due_for_revision",
    "proposal_decider",
    "rating_withdraw",
    "revision_proposal_decide",
    "revision_run_execute",
    "revision_run_start",
    "revision_runs_sweep",
    "revisions_start_due",
    "suggestion_add",
    "suggestion_kind",
    "suggestion_snippet_review",
    "suggestion_source_refusal",
    "suggestion_tag_kind",
    "suggestion_taken",
    "suggestions_withdraw",
]
