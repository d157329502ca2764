"""The notes app's models, one module per concept (the app label and migrations stay `notes`)."""

from notes.models.drafts import DraftJob
from notes.models.imports import ImportCheckpoint, ImportedNoteHistory
from notes.models.living import NoteRequest, NoteVersion, RetiredRating, RevisionRun, Suggestion, SuggestionKind
from notes.models.notes import (
    HELPFUL_TAGS,
    NOT_HELPFUL_TAGS,
    TAGS_FOR_LEVEL,
    Note,
    NoteStatus,
    NoteStatusChange,
    Participant,
    Rating,
    RatingLevel,
)
from notes.models.posts import (
    HIDDEN_COUNT_CAP,
    TEXT_ALL,
    TEXT_FILTER_CHOICES,
    TEXT_WITH,
    TEXT_WITHOUT,
    Post,
    PostQuerySet,
    Topic,
    count_hidden,
    filter_by_text,
    has_text_q,
    hidden_over,
    text_filter,
)
from notes.models.scoring import ScoringRun
from notes.models.supernotes import SupernoteCandidate, SupernoteComparison, SupernoteRun

__all__ = [
    "HELPFUL_TAGS",
    "HIDDEN_COUNT_CAP",
    "NOT_HELPFUL_TAGS",
    "TAGS_FOR_LEVEL",
    "TEXT_ALL",
    "TEXT_FILTER_CHOICES",
    "TEXT_WITH",
    "TEXT_WITHOUT",
    "DraftJob",
    "ImportCheckpoint",
    "ImportedNoteHistory",
    "Note",
    "NoteRequest",
    "NoteStatus",
    "NoteStatusChange",
    "NoteVersion",
    "Participant",
    "Post",
    "PostQuerySet",
    "Rating",
    "RatingLevel",
    "RetiredRating",
    "RevisionRun",
    "ScoringRun",
    "Suggestion",
    "SuggestionKind",
    "SupernoteCandidate",
    "SupernoteComparison",
    "SupernoteRun",
    "Topic",
    "count_hidden",
    "filter_by_text",
    "has_text_q",
    "hidden_over",
    "text_filter",
]
