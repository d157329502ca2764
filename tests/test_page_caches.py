"""The home page's post list and the audit list's aggregates are cached per web
worker, and what they show stays true: the home list is keyed by the data it shows, the audit's
aggregates by the newest decision, override and run (and at most a minute old otherwise)."""

from __future__ import annotations

from typing import Any

import pytest
from django.urls import reverse

from judging import selectors, services
from judging.models import JudgeDecision
from notes.models import Note, NoteStatus
from notes.services import post_create
from tests.judging.factories import answers, note_with_evidence

pytestmark = pytest.mark.django_db


def test_the_home_list_shows_a_status_change_and_a_new_note_at_once(anon_client: Any) -> None:
    post = post_create(text="Garlic cures flu overnight")
    note = Note.objects.create(post=post, text="No trial shows that garlic cures flu.")
    html = anon_client.get("/").content.decode()
    assert "status-needs_more_ratings" in html and "1 note<" in html
    # As the scorer writes statuses: a bulk UPDATE, no save() and no signal.
    Note.objects.filter(pk=note.pk).update(status=NoteStatus.HELPFUL)
    html = anon_client.get("/").content.decode()
    assert "status-currently_rated_helpful" in html and "status-needs_more_ratings" not in html
    Note.objects.create(post=post, text="Cochrane reviews found no effect of garlic on flu.")
    html = anon_client.get("/").content.decode()
    assert "2 notes<" in html and "Cochrane reviews found no effect" in html
    Note.objects.filter(pk=note.pk).update(text="Edited: trials found no effect.")
    assert "Edited: trials found no effect." in anon_client.get("/").content.decode()


def test_the_home_list_is_the_same_for_every_visitor_but_the_nav_is_not(
    anon_client: Any, contributor_client: Any
) -> None:
    post_create(text="Bleach cures colds")
    anonymous = anon_client.get("/").content.decode()
    signed_in = contributor_client.get("/").content.decode()
    assert "Bleach cures colds" in anonymous and "Bleach cures colds" in signed_in
    assert "Flag a post</a>" in signed_in and "Flag a post</a>" not in anonymous


@pytest.fixture
def judged(llm_server: Any) -> Note:
    llm_server.respond_with(
        answers(
            relevance="Snippet 1 answers the claim.\nFinal decision: yes",
            correctness="Faithful to the snippet.\nFinal decision: yes",
            helpfulness="Clear.\nFinal decision: yes",
        )
    )
    note = note_with_evidence(status=NoteStatus.NEEDS_MORE_RATINGS)
    run = services.judge_run_request(note=note)
    while services.judge_run_step(run_id=run.pk):
        pass
    return note


def test_the_audit_aggregates_follow_new_decisions_and_overrides_at_once(
    judged: Note, admin_client: Any, admin_user: Any
) -> None:
    url = reverse("judging:decision_list")
    first = admin_client.get(url)
    assert (first.context["funnel"].n_notes, first.context["funnel"].n_helpful) == (1, 1)
    assert "Computed " in first.content.decode()
    relevance = JudgeDecision.objects.get(note=judged, stage="relevance")
    services.decision_override(decision=relevance, verdict="no", reason="Off topic after all.", user=admin_user)
    response = admin_client.get(url)
    after = response.context["funnel"]
    assert (after.n_notes, after.n_relevant, after.n_helpful) == (1, 0, 0)
    # The cached rows follow too: the override, and the later stages it gated out.
    html = response.content.decode()
    assert "(overridden; judge said yes)" in html and "Relevance is not yes after an override" in html


def test_the_audit_agreement_shows_a_rescored_status_within_the_max_age(
    judged: Note, admin_client: Any, monkeypatch: Any
) -> None:
    url = reverse("judging:decision_list")
    assert [row.n_notes for row in admin_client.get(url).context["agreement"]] == [0, 0]
    # A rescoring changes the crowd status; no decision, override or run is added.
    Note.objects.filter(pk=judged.pk).update(status=NoteStatus.HELPFUL)
    cached = admin_client.get(url)
    assert [row.n_notes for row in cached.context["agreement"]] == [0, 0]  # within the minute: as computed
    assert "crowd statuses changed by a rescoring show within a minute" in cached.content.decode()
    monkeypatch.setattr(selectors._AUDIT_SUMMARIES, "max_age_s", 0)  # the minute has passed
    assert [row.n_notes for row in admin_client.get(url).context["agreement"]] == [1, 0]
