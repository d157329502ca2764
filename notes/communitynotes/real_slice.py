"""A slice of real 2025 posts with their real notes and statuses, imported for the demo.

From the real Community Notes folder (settings.COMMUNITYNOTES_REAL_DIR, read by
crowdnotes_site.lib.communitynotes.data.real): posts of `SLICE_YEAR` (by the time in the post id)
whose text a source captured, with two or more notes that have text and a mature final status
(observed when the note was at least 14 days old: Community Notes locks a status at that age; a
younger one is mostly a Needs More Ratings that may still change). The candidates, sorted by post id,
are taken evenly spaced (`N_POSTS` of them), so the slice spans the year and is the same on every
machine.

What is stored is what the folder says, labelled as imported (never `is_demo`; the pages label it
with notes/_imported.html): the post's text and X link, each note's text, creation time and final
status as observed on X. The note's `scored_at` is when that status was observed, so the app's scorer
keeps it (a scored note older than the lock age keeps its status: notes.scoring.reader) instead of
rescoring a note it has no ratings of. Most rows give no classification: those notes get the model's
default (misleading, as most notes are); no page shows it. Posts and notes are keyed by their X ids:
a rerun adds nothing.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from django.db import transaction

from crowdnotes_site.lib import status as names
from crowdnotes_site.lib.communitynotes.data import real
from crowdnotes_site.lib.text_rules import IMPORTED_NOTE_MAX_CHARS, POST_MAX_CHARS, cap_text, find_urls
from crowdnotes_site.lib.xids import snowflake_time, x_id_time
from notes.communitynotes.importer import clean_text
from notes.models import Note, Post
from notes.services import post_create, post_text_supply

SLICE_YEAR = 2025
N_POSTS = 30


def _plain(text: str, limit: int) -> str:
    """The loader's plain text, cleaned and capped as imported text is."""
    return cap_text(clean_text(text), limit)[0]


@dataclass(frozen=True)
class SlicePost:
    post_id: str
    post_text: str
    notes: tuple[real.RealNote, ...]


def _usable(note: real.RealNote) -> bool:
    return bool(note.summary) and note.status in names.SHOWN and note.status_mature and note.status_at_ms is not None


def real_slice_select(
    notes: Sequence[real.RealNote], *, n_posts: int = N_POSTS, year: int = SLICE_YEAR
) -> list[SlicePost]:
    """The slice's posts, each with its usable notes (text and a mature status) by note id."""
    texts: dict[str, str] = {}
    by_post: dict[str, list[real.RealNote]] = defaultdict(list)
    for note in notes:
        if not note.post_id.isdigit():
            continue
        if note.post_text:
            texts.setdefault(note.post_id, note.post_text)
        if _usable(note):
            by_post[note.post_id].append(note)
    candidates = sorted(
        (p for p, group in by_post.items() if len(group) >= 2 and p in texts and snowflake_time(p).year == year),
        key=int,
    )
    if n_posts <= 0 or not candidates:
        return []
    step = max(len(candidates) // n_posts, 1)
    chosen = candidates[::step][:n_posts]
    return [SlicePost(p, texts[p], tuple(sorted(by_post[p], key=lambda n: int(n.note_id)))) for p in chosen]


@dataclass
class RealSliceReport:
    posts_added: int = 0
    posts_present: int = 0
    notes_added: int = 0
    notes_present: int = 0
    skipped: str = ""  # why nothing was imported

    @property
    def message(self) -> str:
        if self.skipped:
            return f"Real Community Notes posts: not imported ({self.skipped})."
        return (
            f"Real Community Notes posts (real imported data, labelled so): {self.posts_added} posts and "
            f"{self.notes_added} notes added with their text and final status on X; {self.posts_present} posts "
            f"and {self.notes_present} notes were here already."
        )


def _ms_time(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=UTC)


def _post(item: SlicePost, report: RealSliceReport) -> Post:
    text = _plain(item.post_text, POST_MAX_CHARS)
    post = Post.objects.filter(external_id=item.post_id).order_by("-text_available", "created_at").first()
    if post is None:
        report.posts_added += 1
        return post_create(
            text=text,
            source_url=f"https://x.com/i/status/{item.post_id}",
            external_id=item.post_id,
            posted_at=x_id_time(item.post_id),
        )
    report.posts_present += 1
    # A post imported earlier without its text (the public download has none) gets it now.
    return post if post.text_available else post_text_supply(post=post, text=text)


@transaction.atomic
def real_slice_import(*, folder: str | Path, n_posts: int = N_POSTS) -> RealSliceReport:
    """Import the slice (see the module docstring); a folder without notes.tsv, or with one not in the
    README's layout, is skipped, said why."""
    folder = Path(folder)
    report = RealSliceReport()
    if not (folder / real.NOTES_FILE).is_file():
        report.skipped = f"{folder / real.NOTES_FILE} not found; set COMMUNITYNOTES_REAL_DIR to the real folder"
        return report
    try:
        notes = real.read_notes(folder)
    except real.RealDataError as exc:
        report.skipped = str(exc)
        return report
    for item in real_slice_select(notes, n_posts=n_posts):
        post = _post(item, report)
        present = set(
            Note.objects.filter(external_id__in=[n.note_id for n in item.notes]).values_list("external_id", flat=True)
        )
        report.notes_present += len(present)
        new = [n for n in item.notes if n.note_id not in present]
        Note.objects.bulk_create([_note(post, n) for n in new])
        report.notes_added += len(new)
    return report


def _note(post: Post, n: real.RealNote) -> Note:
    text = _plain(n.summary, IMPORTED_NOTE_MAX_CHARS)
    assert n.status_at_ms is not None  # _usable
    return Note(
        post=post,
        external_id=n.note_id,
        text=text,
        classification=n.classification or Note.Classification.MISLEADING,
        evidence_urls=find_urls(text, web_only=True)[:10],
        created_at=_ms_time(n.created_at_ms),
        status=n.status,
        scored_at=_ms_time(n.status_at_ms),
    )
