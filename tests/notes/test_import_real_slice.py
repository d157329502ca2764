"""The demo's slice of real 2025 posts: their text, their real notes and mature final statuses, labelled as
real imported Community Notes data; idempotent; skipped, said why, without the real folder."""

from __future__ import annotations

import html
from datetime import datetime
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.urls import reverse

from crowdnotes_site.lib.communitynotes.data import real
from notes.communitynotes.real_slice import real_slice_import, real_slice_select
from notes.management.commands import load_demo
from notes.models import Note, NoteStatus, Post
from notes.scoring.services import notes_rescore
from notes.services import post_for_x_id
from tests.support import real_folder as rf
from tests.support.real_folder import CRH, CRNH, DAY, NMR, at

pytestmark = pytest.mark.django_db

POST_A, POST_B = rf.x_id(at(2025, 3, 1), 1), rf.x_id(at(2025, 7, 1), 2)
POST_C, POST_D, POST_E = rf.x_id(at(2025, 8, 1), 3), rf.x_id(at(2024, 5, 1), 4), rf.x_id(at(2025, 9, 1), 5)
TEXT_A = "Drinking bleach cures the flu &amp; colds, doctors hate this trick"  # as some sources kept it
PLAIN_A = "Drinking bleach cures the flu & colds, doctors hate this trick"
LINK = "https://x.com/a/status/1?s=1&amp;t=2"


def _seen(created: datetime, after: Any, value: str, source: str, mature: bool) -> dict[str, Any]:
    return {
        "status": value,
        "statusAtMillis": rf.ms(created + after),
        "statusMature": int(mature),
        "statusSource": source,
    }


def _notes() -> list[dict[str, Any]]:
    a, b = at(2025, 3, 1, 6), at(2025, 7, 1, 6)
    other = at(2025, 8, 1, 6)
    return [
        # Post A: a note from each status source; a young status and none at all are not imported.
        rf.note(a, POST_A, 1, postText=TEXT_A, classification="MISINFORMED_OR_POTENTIALLY_MISLEADING",
                **_seen(a, 20 * DAY, CRH, "travisbrown/birdwatch", True)),
        rf.note(a, POST_A, 2, postText=TEXT_A, **_seen(a, 2 * DAY, NMR, "vulonviing/cross-constituency-aggregation-community-notes", False)),
        rf.note(a, POST_A, 3, **_seen(a, 30 * DAY, CRNH, "rocdav/community-notes-br-argmining", True)),
        rf.note(a, POST_A, 4, postText=TEXT_A),
        # Post B: its text on one note's row only.
        rf.note(b, POST_B, 5, classification="NOT_MISLEADING", **_seen(b, 20 * DAY, NMR, "travisbrown/birdwatch", True)),
        rf.note(b, POST_B, 6, postText="Post B's real text", summary=f'He said &quot;hi&quot; <a target="_blank" href="{LINK}">{LINK}</a>',
                **_seen(b, 20 * DAY, NMR, "travisbrown/birdwatch", True)),
        # Not in the slice: C has one usable note, D is of 2024, E has no text, the last no post.
        rf.note(other, POST_C, 7, postText="C", **_seen(other, 20 * DAY, NMR, "travisbrown/birdwatch", True)),
        rf.note(other, POST_C, 8, postText="C"),
        rf.note(at(2024, 5, 2), POST_D, 9, postText="D", **_seen(at(2024, 5, 2), 20 * DAY, NMR, "travisbrown/birdwatch", True)),
        rf.note(at(2024, 5, 2), POST_D, 10, postText="D", **_seen(at(2024, 5, 2), 20 * DAY, CRH, "travisbrown/birdwatch", True)),
        rf.note(other, POST_E, 11, **_seen(other, 20 * DAY, NMR, "travisbrown/birdwatch", True)),
        rf.note(other, POST_E, 12, **_seen(other, 20 * DAY, CRH, "travisbrown/birdwatch", True)),
        rf.note(other, "", 13, postText="no post", **_seen(other, 20 * DAY, CRH, "travisbrown/birdwatch", True)),
    ]  # fmt: skip


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    return rf.write(tmp_path / "real", _notes(), [])


def _id(created: datetime, seq: int) -> str:
    return rf.x_id(created, seq)


def test_it_chooses_2025_posts_with_text_and_two_notes_with_a_status_evenly_by_post_id(folder: Path) -> None:
    notes = real.read_notes(folder)
    chosen = real_slice_select(notes, n_posts=10)
    assert [p.post_id for p in chosen] == [POST_A, POST_B]
    assert [p.post_text for p in chosen] == [html.unescape(TEXT_A), "Post B's real text"]  # the loader decodes entities
    assert [len(p.notes) for p in chosen] == [2, 2]
    # Evenly spaced through the candidates: one post of two is the first.
    assert [p.post_id for p in real_slice_select(notes, n_posts=1)] == [POST_A]


def test_it_imports_real_posts_and_notes_with_their_statuses_labelled_as_real_data(
    folder: Path, admin_client: Any
) -> None:
    report = real_slice_import(folder=folder, n_posts=10)
    assert (report.posts_added, report.notes_added) == (2, 4)
    assert "2 posts and 4 notes added" in report.message and "real imported data" in report.message
    post = Post.objects.get(external_id=POST_A)
    assert post.text == PLAIN_A and post.text_available and not post.is_demo and post.flagged_by is None
    assert post.source_url == f"https://x.com/i/status/{POST_A}" and post.posted_at == at(2025, 3, 1)
    a = at(2025, 3, 1, 6)
    notes = {n.external_id: n for n in Note.objects.filter(post=post)}
    assert set(notes) == {_id(a, 1), _id(a, 3)}
    assert [notes[_id(a, i)].status for i in (1, 3)] == [NoteStatus.HELPFUL, NoteStatus.NOT_HELPFUL]
    assert notes[_id(a, 1)].created_at == a and notes[_id(a, 1)].scored_at == a + 20 * DAY
    assert not any(n.is_demo for n in notes.values()) and notes[_id(a, 1)].evidence_urls == ["https://example.org/1"]
    assert Note.objects.get(post__external_id=POST_B, text__startswith="Real note 5").classification == "NOT_MISLEADING"
    # Stored as a person reads it: entities decoded, link tags dropped (their text kept).
    quoted = Note.objects.get(external_id=_id(at(2025, 7, 1, 6), 6))
    assert quoted.text == 'He said "hi" https://x.com/a/status/1?s=1&t=2'
    assert quoted.evidence_urls == ["https://x.com/a/status/1?s=1&t=2"]
    assert not Post.objects.filter(external_id__in=[POST_C, POST_D, POST_E]).exists()

    # The scorer has no ratings of them: it keeps the statuses observed on X.
    notes_rescore()
    assert set(Note.objects.values_list("external_id", "status")) == {
        (_id(a, 1), NoteStatus.HELPFUL), (_id(a, 3), NoteStatus.NOT_HELPFUL),
        (_id(at(2025, 7, 1, 6), 5), NoteStatus.NEEDS_MORE_RATINGS), (_id(at(2025, 7, 1, 6), 6), NoteStatus.NEEDS_MORE_RATINGS),
    }  # fmt: skip

    html = admin_client.get(reverse("post_detail", args=[post.pk])).content.decode()
    assert (
        "the flu &amp; colds" in html
        and "&amp;amp;" not in html
        and "real post on X" in html
        and "demo content" not in html
    )
    assert html.count("real Community Notes note, imported from public data") == 2
    assert f'href="https://x.com/i/birdwatch/n/{_id(a, 1)}"' in html
    rate = admin_client.get(reverse("rate_note", args=[notes[_id(a, 3)].pk])).content.decode()
    assert "real Community Notes note, imported from public data" in rate and "demo content" not in rate


def test_a_rerun_adds_nothing_and_a_post_imported_without_text_gets_it(folder: Path, admin_user: Any) -> None:
    placeholder, _ = post_for_x_id(x_id=POST_A, user=admin_user)  # known by its link only
    first = real_slice_import(folder=folder, n_posts=10)
    assert (first.posts_added, first.posts_present) == (1, 1)
    placeholder.refresh_from_db()
    assert placeholder.text == PLAIN_A and placeholder.text_available
    counts = (Post.objects.count(), Note.objects.count())
    again = real_slice_import(folder=folder, n_posts=10)
    assert (Post.objects.count(), Note.objects.count()) == counts == (2, 4)
    assert (again.posts_added, again.notes_added, again.posts_present, again.notes_present) == (0, 0, 2, 4)


def test_without_the_folder_or_with_a_damaged_one_nothing_is_imported_and_the_message_says_why(tmp_path: Path) -> None:
    report = real_slice_import(folder=tmp_path / "absent")
    assert report.message == (
        f"Real Community Notes posts: not imported ({tmp_path / 'absent' / 'notes.tsv'} not found; "
        "set COMMUNITYNOTES_REAL_DIR to the real folder)."
    )
    assert not Post.objects.exists()
    damaged = tmp_path / "damaged"
    damaged.mkdir()
    (damaged / "notes.tsv").write_text("noteId\ttweetId\n1\t2\n")
    report = real_slice_import(folder=damaged)
    assert report.message.startswith(f"Real Community Notes posts: not imported ({damaged / 'notes.tsv'}: line 1 lacks")


def test_load_demo_imports_the_slice_once_and_skips_it_without_the_folder(
    folder: Path, tmp_path: Path, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(load_demo, "PUBLIC_NOTES", tmp_path / "no-sample.tsv")  # only the slice, quickly
    settings.COMMUNITYNOTES_REAL_DIR = folder
    args = ("load_demo", "--no-judging", "--no-living", "--no-benchmark")
    out = StringIO()
    call_command(*args, stdout=out)
    assert "Real Community Notes posts (real imported data, labelled so): 2 posts and 4 notes added" in out.getvalue()
    real_posts = Post.objects.filter(is_demo=False)
    assert set(real_posts.values_list("external_id", flat=True)) == {POST_A, POST_B}
    # Classified like every post with text; scored by the load without losing their real statuses.
    assert not real_posts.filter(topic="").exists()
    assert Note.objects.get(external_id=_id(at(2025, 3, 1, 6), 1)).status == NoteStatus.HELPFUL
    out = StringIO()
    call_command(*args, stdout=out)
    assert "0 posts and 0 notes added" in out.getvalue() and Note.objects.filter(is_demo=False).count() == 4
    settings.COMMUNITYNOTES_REAL_DIR = tmp_path / "absent"
    out = StringIO()
    call_command(*args, stdout=out)
    assert f"Real Community Notes posts: not imported ({tmp_path / 'absent' / 'notes.tsv'} not found" in out.getvalue()
