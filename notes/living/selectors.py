"""Reads for living notes: the request queue, a note's versions with readable diffs,
each suggester's outcomes, invitations to rate a new version, and the revision audit."""

from __future__ import annotations

import difflib
from collections.abc import Collection
from dataclasses import dataclass
from datetime import date
from typing import TYPE_CHECKING

from django.db.models import Case, Count, IntegerField, Max, Min, QuerySet, Value, When
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from crowdnotes_site.lib.communitynotes.research.spikes import Spike
from notes.analytics.selectors import posts_in_current_spike
from notes.models import (
    DraftJob,
    Note,
    NoteRequest,
    NoteStatus,
    NoteStatusChange,
    NoteVersion,
    Participant,
    Post,
    Rating,
    RetiredRating,
    RevisionRun,
    Suggestion,
    SuggestionKind,
)

if TYPE_CHECKING:
    from django.contrib.auth.models import User


@dataclass(frozen=True)
class RequestedPost:
    post: Post  # annotated: n_requests, last_request, n_notes
    spike: Spike | None  # the current spike of flagged health posts the post belongs to


def request_queue(*, limit: int = 100, today: date | None = None) -> list[RequestedPost]:
    """Posts with note requests: those in a current spike of flagged health posts first (the rule
    of "Posts in a spike", notes.analytics), then the most requested, then the most recently
    requested."""
    in_spike = posts_in_current_spike(today=today)
    posts = (
        Post.objects.annotate(
            n_requests=Count("note_requests", distinct=True), last_request=Max("note_requests__created_at")
        )
        .filter(n_requests__gt=0)
        .annotate(
            n_notes=Count("notes", distinct=True),
            in_spike=Case(When(pk__in=list(in_spike), then=Value(1)), default=Value(0), output_field=IntegerField()),
        )
        .order_by("-in_spike", "-n_requests", "-last_request", "-pk")[:limit]
    )
    return [RequestedPost(post, in_spike.get(post.pk)) for post in posts]


def requests_of_post(*, post: Post) -> QuerySet[NoteRequest]:
    return NoteRequest.objects.filter(post=post).select_related("user", "started_draft").order_by("-created_at")


def word_diff(old: str, new: str) -> SafeString:
    """A readable word diff: removed words in <del>, added in <ins>; every word escaped."""
    a, b = old.split(), new.split()
    out: list[str] = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if op == "equal":
            out.append(escape(" ".join(a[i1:i2])))
            continue
        if op in ("delete", "replace"):
            out.append(f"<del>{escape(' '.join(a[i1:i2]))}</del>")
        if op in ("insert", "replace"):
            out.append(f"<ins>{escape(' '.join(b[j1:j2]))}</ins>")
    return mark_safe(" ".join(out))  # noqa: S308 - every piece of text above is escaped


@dataclass(frozen=True)
class VersionRow:
    version: NoteVersion
    diff: SafeString | None  # against the version before
    retired_ratings: int
    suggestions: list[Suggestion]


def note_history(*, note: Note) -> list[VersionRow]:
    """The note's versions, newest first, each with its diff against the one before."""
    versions = list(note.versions.order_by("number"))
    retired = dict(
        RetiredRating.objects.filter(version__note=note)
        .values("version")
        .annotate(n=Count("id"))
        .values_list("version", "n")
    )
    by_version: dict[int, list[Suggestion]] = {}
    for s in Suggestion.objects.filter(note=note).select_related("rater__user").order_by("created_at"):
        by_version.setdefault(s.version_id, []).append(s)
    rows = []
    for k, v in enumerate(versions):
        diff = word_diff(versions[k - 1].text, v.text) if k else None
        rows.append(VersionRow(v, diff, retired.get(v.pk, 0), by_version.get(v.pk, [])))
    return rows[::-1]


def suggestions_of(*, participant: Participant, hidden_notes: Collection[int] = frozenset()) -> QuerySet[Suggestion]:
    """The participant's suggestions, newest first, but those on notes in `hidden_notes` (their open
    blind comparison: notes.supernotes.selectors.hidden_note_ids)."""
    return (
        Suggestion.objects.filter(rater=participant)
        .exclude(note_id__in=hidden_notes)
        .select_related("note__post", "version", "revision__published_version", "snippet__passage")
        .order_by("-created_at")
    )


def invitations(*, participant: Participant, hidden_notes: Collection[int] = frozenset()) -> list[Note]:
    """Notes whose older version this participant rated and whose current version they have not
    (but those in `hidden_notes`, as for `suggestions_of`)."""
    rated_old = RetiredRating.objects.filter(rater=participant).values_list("version__note_id", flat=True).distinct()
    rated_now = Rating.objects.filter(rater=participant).values_list("note_id", flat=True)
    return list(
        Note.objects.filter(pk__in=rated_old)
        .exclude(pk__in=rated_now)
        .exclude(pk__in=hidden_notes)
        .select_related("current_version", "post")
    )


def revision_runs(*, note: Note | None = None, limit: int = 100) -> QuerySet[RevisionRun]:
    runs = RevisionRun.objects.select_related("note__post", "base_version", "published_version", "decided_by")
    if note is not None:
        runs = runs.filter(note=note)
    return runs.order_by("-created_at")[:limit]


def proposals(*, note: Note | None = None) -> QuerySet[RevisionRun]:
    """Proposed revisions waiting for a person, oldest first."""
    runs = RevisionRun.objects.filter(outcome=RevisionRun.Outcome.PROPOSED).select_related(
        "note__post", "note__author__user", "base_version"
    )
    return (runs.filter(note=note) if note is not None else runs).order_by("finished_at", "pk")


def proposals_for_author(*, user: User) -> QuerySet[RevisionRun]:
    """Proposed revisions of this user's notes (theirs to decide)."""
    return proposals().filter(note__author__user=user).exclude(note__origin=Note.Origin.SUPERNOTE)


def proposal_suggestions(*, run: RevisionRun) -> QuerySet[Suggestion]:
    """The suggestions a revision run read, with what became of each."""
    return (
        Suggestion.objects.filter(revision=run).select_related("snippet__passage", "rater__user").order_by("created_at")
    )


@dataclass(frozen=True)
class ShownStatus:
    """The version whose status a post shows for a note while its current version gathers ratings."""

    version: NoteVersion
    current_number: int


def shown_statuses(*, notes: list[Note]) -> dict[int, ShownStatus]:
    """For each note whose current version is still "Needs more ratings" after replacing a version
    the crowd had rated (Helpful or Not Helpful), that earlier version: the post keeps showing it,
    with its status, until the current version has a status of its own. Notes not in the dict show
    their current version."""
    waiting = {n.pk: n for n in notes if n.status == NoteStatus.NEEDS_MORE_RATINGS and n.current_version_id}
    if not waiting:
        return {}
    numbers = dict(NoteVersion.objects.filter(pk__in=[n.current_version_id for n in waiting.values()])
                   .values_list("note_id", "number"))  # fmt: skip
    rated = (
        NoteVersion.objects.filter(note_id__in=[pk for pk, number in numbers.items() if number > 1])
        .exclude(final_status__in=["", NoteStatus.NEEDS_MORE_RATINGS])
        .order_by("note_id", "-number")
    )
    shown: dict[int, ShownStatus] = {}
    for version in rated:
        if version.note_id not in shown and version.number < numbers[version.note_id]:
            shown[version.note_id] = ShownStatus(version, numbers[version.note_id])
    return shown


# --- Analytics (as the study measured X's Collaborative Notes) ----------------------------------


@dataclass(frozen=True)
class KindRow:
    kind: str
    label: str
    total: int
    used_published: int
    used_rejected: int
    not_used: int
    in_proposal: int
    pending: int
    withdrawn: int

    @property
    def decided(self) -> int:
        return self.used_published + self.used_rejected + self.not_used

    @property
    def taken_share(self) -> float | None:
        """Share of the decided suggestions of this kind that a published version took up."""
        return self.used_published / self.decided if self.decided else None


def suggestions_by_kind() -> list[KindRow]:
    counts: dict[tuple[str, str], int] = {
        (k, st): n for k, st, n in Suggestion.objects.values_list("kind", "state").annotate(n=Count("id"))
    }
    rows = []
    for kind, label in SuggestionKind.choices:
        c = {st: counts.get((kind, st), 0) for st in Suggestion.State.values}
        rows.append(KindRow(kind, str(label), sum(c.values()), c["used_published"], c["used_rejected"], c["not_used"],
                            c["in_proposal"], c["pending"], c["withdrawn"]))  # fmt: skip
    return rows


@dataclass(frozen=True)
class RevisionRow:
    run: RevisionRun
    predicted_before: float | None
    predicted_after: float | None
    rated_before: float | None  # the old version's intercept when it was replaced
    rated_after: float | None  # the new version's intercept (None until scored)


def revisions_before_after() -> list[RevisionRow]:
    rows = []
    runs = RevisionRun.objects.filter(outcome=RevisionRun.Outcome.PUBLISHED).select_related(
        "base_version", "published_version", "note"
    )
    for run in runs.order_by("-created_at")[:200]:
        current = run.note.current_version_id == run.published_version_id
        rows.append(RevisionRow(run, run.jury_current, run.jury_candidate, run.base_version.final_intercept,
                                run.note.intercept if current else None))  # fmt: skip
    return rows


@dataclass(frozen=True)
class Delays:
    n_requested_posts: int
    n_drafted: int
    n_helpful: int
    median_to_draft_h: float | None
    median_to_helpful_h: float | None


def _median(values: list[float]) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def request_delays() -> Delays:
    """Per requested post: first request → first draft started on it after that request, and →
    first time one of its notes became Helpful (NoteStatusChange) after that request."""
    firsts = dict(NoteRequest.objects.values("post").annotate(first=Min("created_at")).values_list("post", "first"))
    to_draft, to_helpful = [], []
    for post_id, first in firsts.items():
        draft = DraftJob.objects.filter(post_id=post_id, created_at__gte=first).aggregate(t=Min("created_at"))["t"]
        if draft is not None:
            to_draft.append((draft - first).total_seconds() / 3600)
        helpful = NoteStatusChange.objects.filter(
            note__post_id=post_id, status=NoteStatus.HELPFUL, changed_at__gte=first
        ).aggregate(t=Min("changed_at"))["t"]
        if helpful is not None:
            to_helpful.append((helpful - first).total_seconds() / 3600)
    return Delays(len(firsts), len(to_draft), len(to_helpful), _median(to_draft), _median(to_helpful))
