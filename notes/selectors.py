from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db.models import (
    Exists,
    F,
    OuterRef,
    Prefetch,
    QuerySet,
)
from django.db.models.functions import Least
from django.http import Http404
from django.shortcuts import get_object_or_404

from crowdnotes_site.lib.memo import content_key
from crowdnotes_site.queue import outbox_key, outbox_waiting
from evidence.models import Snippet
from evidence.search.selectors import automation_running
from evidence.snippets import snippet_is_confirmed, snippet_refining, snippets_ahead
from evidence.warmup import TableWait, table_warmup_wait
from judging.models import PreflightCheck
from judging.selectors import judging_for_notes
from notes.models import (
    TEXT_ALL,
    TEXT_FILTER_CHOICES,
    TEXT_WITH,
    TEXT_WITHOUT,
    DraftJob,
    Note,
    NoteStatus,
    Participant,
    Post,
    Rating,
    count_hidden,
    filter_by_text,
    text_filter,
)
from notes.scoring.selectors import StatusExplanation, status_explanation

__all__ = ["TEXT_ALL", "TEXT_FILTER_CHOICES", "TEXT_WITH", "TEXT_WITHOUT", "text_filter"]

if TYPE_CHECKING:
    from django.contrib.auth.models import AnonymousUser, User


HOME_PAGE_SIZE = 20


@dataclass(frozen=True)
class HomePage:
    posts: list[Post]
    page: int
    has_next: bool
    # Imported posts without text left out by the default filter (0 when the filter shows them).
    hidden_without_text: int = 0

    def content_key(self) -> str:
        """A digest of every value the post list shows (posts, their notes in order, the pager):
        the key of its cached rendering, so a cached list is never older than its data."""
        rows = [
            (
                post.pk, post.text, post.text_available, post.external_id, post.author_handle, post.posted_at,
                post.created_at, post.topic, post.is_demo, [(n.pk, n.text, n.status) for n in post.notes.all()],
            )
            for post in self.posts
        ]  # fmt: skip
        return content_key(self.page, self.has_next, self.hidden_without_text, rows)


def posts_for_home(
    *, page: int = 1, topic: str = "", text: str = TEXT_WITH, size: int = HOME_PAGE_SIZE,
    hidden_notes: Collection[int] = frozenset(),
) -> HomePage:  # fmt: skip
    """One page of posts, newest first, with their notes but those in `hidden_notes` (the viewer's open
    blind comparison: notes.supernotes.selectors.hidden_note_ids). The page counts the prefetched
    notes (a COUNT annotation would group every post and note of the table before the limit), and
    reads one row past the page to know whether an older page exists (no COUNT of the whole table)."""
    # Only what the page shows of a note: no author join, and none of the scorer's stored fields
    # (rules JSON, explanation text) to read and decode for every note of 20 posts.
    notes = Note.objects.only("id", "post_id", "text", "status", "created_at", "current_version_id").order_by(
        "-created_at"
    )
    if hidden_notes:
        notes = notes.exclude(pk__in=hidden_notes)
    base = Post.objects.filter(topic=topic) if topic else Post.objects.all()
    hidden = count_hidden(base.without_text()) if text == TEXT_WITH else 0
    posts = filter_by_text(base, text)
    start = (page - 1) * size
    rows = list(
        posts.prefetch_related(Prefetch("notes", queryset=notes)).order_by("-created_at", "-pk")[
            start : start + size + 1
        ]
    )
    return HomePage(posts=rows[:size], page=page, has_next=len(rows) > size, hidden_without_text=hidden)


def post_notes(*, post: Post, hidden_notes: Collection[int] = frozenset()) -> tuple[list[Note], list[int]]:
    """The notes of a post's page, newest first, with their authors, but those in `hidden_notes` (the
    viewer's open blind comparison: notes.supernotes.selectors.hidden_note_ids); and the ids of the
    post's notes left out."""
    notes = list(post.notes.select_related("author__user").order_by("-created_at"))
    return [n for n in notes if n.pk not in hidden_notes], [n.pk for n in notes if n.pk in hidden_notes]


# How often the draft page asks for news (htmx), and reloads itself without JavaScript: every
# second while sources are processed or the draft is written (the contributor is waiting), every
# 3 s while only the refine task runs (the contributor is reading the first passage).
POLL_WAITING_S, POLL_READING_S, NOSCRIPT_REFRESH_S = 1, 3, 3


@dataclass(frozen=True)
class DraftGate:
    """Whether a draft may be requested (and a note submitted), and if not, why not; and when
    the draft page should look again."""

    can_draft: bool
    reasons: list[str]
    # Every snippet of the draft, in order, with its source and passage (the page lists these).
    snippets: list[Snippet]
    confirmed: list[Snippet]
    pending_review: list[Snippet]
    processing: list[Snippet]
    # Ready and unreviewed, while the refine task still compares the passages the pre-filter skipped.
    refining: list[Snippet] = field(default_factory=list)
    # CrowdNotes is still looking for evidence ("find evidence for me").
    finding: bool = False
    # Seconds until the page polls again (None: nothing is running), and the no-JS refresh.
    poll_seconds: int | None = None
    refresh_seconds: int | None = None
    # Some of this draft's work is stored in the outbox but the broker has not taken it yet.
    queue_waiting: bool = False
    # Queued snippet id -> how many sources' turns on the CPU queue come before it.
    ahead: dict[int, int] = field(default_factory=dict)
    # Ready snippets whose best passage is below EVIDENCE_RELEVANCE_FLOOR: "this page may not
    # address the post" (a mark, never a block), and the floor itself.
    weak: set[int] = field(default_factory=set)
    floor: float = 0.0
    # While sources are processed: the warm-up building the embedding table meanwhile (None: it is not).
    table_wait: TableWait | None = None

    @property
    def urls(self) -> list[str]:
        """The evidence links the note will carry: the confirmed sources, in order."""
        return [s.url for s in self.confirmed]


def draft_gate(*, job: DraftJob) -> DraftGate:
    snippets = list(job.snippets.select_related("passage", "source"))
    processing = [s for s in snippets if s.state not in (Snippet.State.READY, Snippet.State.FAILED)]
    ready = [s for s in snippets if s.state == Snippet.State.READY]
    confirmed = [s for s in ready if snippet_is_confirmed(s)]
    rejected = [s for s in ready if s.confirmation == Snippet.Confirmation.REJECTED]
    pending = [s for s in ready if s not in confirmed and s not in rejected]
    refining = [s for s in pending if snippet_refining(s)]
    finding = automation_running(job=job)
    reasons: list[str] = []
    missing = job.post.text_missing_reason()
    if missing:
        reasons.append(f'No draft: {missing}. Paste the post\'s text from "Write a note on this post" first.')
    if finding:
        reasons.append("CrowdNotes is still looking for evidence: wait for its proposals.")
    if processing:
        reasons.append(f"{len(processing)} source(s) are still being processed: wait for them or remove them.")
    if pending:
        reasons.append(f"Review every snippet first: {len(pending)} still need your confirm or reject.")
    if not confirmed and not finding:
        reasons.append("Confirm at least one snippet that supports the context you want to add.")
    waiting = bool(processing) or finding or job.state == DraftJob.State.DRAFTING
    queue_waiting = False
    if processing or job.state == DraftJob.State.DRAFTING:
        keys = [outbox_key("evidence.tasks.snippet_process", [s.pk]) for s in processing]
        keys.append(outbox_key("notes.tasks.draft_generate", [job.pk]))
        queue_waiting = bool(outbox_waiting(keys))
    floor = settings.EVIDENCE_RELEVANCE_FLOOR
    weak = {s.pk for s in ready if floor > 0 and s.similarity is not None and s.similarity < floor}
    return DraftGate(
        weak=weak,
        floor=floor,
        ahead=snippets_ahead(snippets=processing),
        queue_waiting=queue_waiting,
        can_draft=not reasons,
        reasons=reasons,
        snippets=snippets,
        confirmed=confirmed,
        pending_review=pending,
        processing=processing,
        refining=refining,
        finding=finding,
        poll_seconds=POLL_WAITING_S if waiting else (POLL_READING_S if refining else None),
        refresh_seconds=NOSCRIPT_REFRESH_S if waiting else None,
        table_wait=table_warmup_wait() if processing or finding else None,
    )


def submitted_note(*, job: DraftJob) -> Note | None:
    """The note a draft became (None while it is not submitted)."""
    return Note.objects.filter(draft_job=job).order_by("pk").first()


def unsent_text(*, job: DraftJob, note: Note | None) -> str | None:
    """A text saved on a submitted draft after its note, other than the note's own text (another
    tab's editor, or a second submit), kept for its writer to copy; None when there is none."""
    if note is None or job.edited_at is None or job.edited_at < note.created_at:
        return None
    return None if job.edited_text.split() == note.text.split() else job.edited_text


def preflight_of(*, job: DraftJob, check_id: int) -> PreflightCheck | None:
    """A pre-flight of this draft (by its owner), or None."""
    return PreflightCheck.objects.filter(pk=check_id, draft_job=job, requested_by_id=job.contributor_id).first()


def participant_of(*, user: User | AnonymousUser) -> Participant | None:
    """The viewer's scoring identity (None for anonymous visitors and users who never had one)."""
    if not user.is_authenticated:
        return None
    return Participant.objects.filter(user=user).first()


def drafts_for_user(*, user: User) -> QuerySet[DraftJob]:
    return (
        DraftJob.objects.filter(contributor=user)
        .exclude(state__in=DraftJob.CLOSED_STATES)
        .select_related("post")
        .order_by("-updated_at")
    )


def notes_for_user(*, user: User) -> QuerySet[Note]:
    return Note.objects.filter(author__user=user).select_related("post").order_by("-created_at")


# --- Ratings and scoring ---------------------------------------------------------------------


def rating_queue(
    *, participant: Participant, limit: int = 20, text: str = TEXT_WITH, hidden_notes: Collection[int] = frozenset()
) -> list[Note]:
    """The first `limit` notes of `rating_queue_queryset`."""
    return list(rating_queue_queryset(participant=participant, text=text, hidden_notes=hidden_notes)[:limit])


def rating_queue_hidden(*, participant: Participant, hidden_notes: Collection[int] = frozenset()) -> int:
    """How many notes of this rater's queue are on imported posts without text (hidden by
    default), up to a cap (`count_hidden`)."""
    return count_hidden(rating_queue_queryset(participant=participant, text=TEXT_WITHOUT, hidden_notes=hidden_notes))


def rating_queue_queryset(
    *, participant: Participant, text: str = TEXT_WITH, hidden_notes: Collection[int] = frozenset()
) -> QuerySet[Note]:
    """Notes this rater can rate next, most needed first.

    Notes that still need ratings, not written and not yet rated by this rater, and not in
    `hidden_notes` (the rater's open blind comparison: notes.supernotes.selectors.hidden_note_ids). A note lacking
    raters from this rater's side (the sign of their factor) comes first, then notes lacking
    either side (for raters without a factor yet), then notes with fewer ratings, newest first.
    The side counts are the note's stored counters (the last scoring's, plus ratings made since:
    `services.rating_submit`), so the page reads at most `limit` notes through one of the
    partial indexes of `Note.Meta`, whatever the number of ratings (a test checks the plan).
    """
    first: Least | F
    if participant.rater_factor is None:
        first = Least("neg_side_ratings", "pos_side_ratings")
    else:
        first = F("neg_side_ratings") if participant.rater_factor < 0 else F("pos_side_ratings")
    notes = (
        Note.objects.filter(status=NoteStatus.NEEDS_MORE_RATINGS)
        .exclude(author=participant)
        .exclude(Exists(Rating.objects.filter(note=OuterRef("pk"), rater=participant)))
        .select_related("post")
    )
    if hidden_notes:
        notes = notes.exclude(pk__in=hidden_notes)
    notes = filter_by_text(notes, text, prefix="post__")
    return notes.order_by(first, "num_ratings", "-created_at", "-pk")


def note_for_rating(
    *, note_id: int, participant: Participant, hidden_notes: Collection[int] = frozenset()
) -> tuple[Note, Rating | None]:
    """The note with its post, and only this rater's own rating (never anybody else's); 404 for a
    note in `hidden_notes` (the rater's open blind comparison)."""
    if note_id in hidden_notes:
        raise Http404("No note here.")
    note = get_object_or_404(Note.objects.select_related("post"), pk=note_id)
    own = Rating.objects.filter(note=note, rater=participant).first()
    return note, own


@dataclass(frozen=True)
class NoteProgress:
    """A contributor's note with its judging (stage by stage) and why it has its crowd status."""

    note: Note
    judging: Any  # judging.selectors.JudgingView | None (None: never judged, e.g. imported notes)
    status: StatusExplanation


# While a judge run is queued or running, the contributor's pages ask for news this often.
JUDGING_POLL_S, JUDGING_REFRESH_S = 2, 5


@dataclass(frozen=True)
class NotesProgress:
    items: list[NoteProgress]
    poll_seconds: int | None
    refresh_seconds: int | None


def notes_progress(*, notes: list[Note]) -> NotesProgress:
    judging = judging_for_notes(notes)
    items = [NoteProgress(note=n, judging=judging.get(n.pk), status=status_explanation(note=n)) for n in notes]
    running = any(i.judging is not None and i.judging.running for i in items)
    return NotesProgress(
        items=items,
        poll_seconds=JUDGING_POLL_S if running else None,
        refresh_seconds=JUDGING_REFRESH_S if running else None,
    )


def own_note(*, user: User, note_id: int) -> Note:
    return get_object_or_404(Note.objects.select_related("post"), pk=note_id, author__user=user)
