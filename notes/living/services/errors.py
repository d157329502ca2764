"""What a living-note action refuses, with a message for the person."""

from __future__ import annotations


class LivingError(Exception):
    """An action the rules do not allow; the message is for the user."""


class StaleSuggestionError(LivingError):
    """The suggestion's rating is of a version that is no longer the note's text."""


class ProposalError(LivingError):
    """The proposal cannot be decided (already decided, superseded, or not this person's to decide)."""
