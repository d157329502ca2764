"""People decide: a revision changes a note's text only when a person accepts it; checks that do
not depend on the model that wrote it stop an off-topic revision; ratings and suggestions name the
version they were made on; the post keeps showing the status the crowd gave until the new version
has one of its own."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.urls import reverse

from evidence.models import Snippet
from notes.living import selectors as living_selectors
from notes.living import services as living
from notes.models import Note, NoteStatus, NoteVersion, Participant, Rating, RevisionRun, Suggestion
from notes.services import StaleVersionError, rating_submit
from tests.conftest import _client_for
from tests.notes.test_living import REVISED, _accept, _answer, _living_note
from tests.support.llm_server import ScriptedLLM


@pytest.fixture
def phm_dir(tmp_path: Path, settings: Any) -> Path:
    settings.PHM_DIR = tmp_path / "phm"
    return settings.PHM_DIR


def _proposed(note: Note) -> RevisionRun:
    run = living.revision_run_start(note=note)
    assert run is not None
    living.revision_run_execute(run_id=run.pk)
    run.refresh_from_db()
    return run


def test_a_revision_about_another_claim_is_rejected_by_the_checks_whatever_the_judges_say(
    phm_dir: Path, llm_server: ScriptedLLM, settings: Any, admin_client: Any, db: None
) -> None:
    """A fooled model writes a revision about SIDS for a note on autism and its judges say yes."""
    settings.REVISION_JURY_MARGIN = -10.0
    settings.LLM_BASE_URL = llm_server.base_url
    note, _ = _living_note(phm_dir)
    old_text = note.text
    llm_server.respond_with(_answer("Infants should sleep on their backs in a bare crib to lower the risk of "
                                    "sudden infant death.", "yes"))  # fmt: skip
    run = _proposed(note)
    note.refresh_from_db()
    assert run.outcome == RevisionRun.Outcome.REJECTED and run.judges_passed, run.reasons
    failed = {c["name"] for c in run.checks if not c["passed"]}
    assert "keeps the note's point" in failed, run.checks
    assert "keeps the note's point" in run.reasons
    assert note.text == old_text and NoteVersion.objects.filter(note=note).count() == 1
    assert not RevisionRun.objects.filter(outcome=RevisionRun.Outcome.PROPOSED).exists()
    audit = admin_client.get(reverse("revision_audit") + f"?note={note.pk}").content.decode()
    assert "Rejected by the checks" in audit and "keeps the note&#x27;s point: <strong>failed</strong>" in audit


def test_the_author_declines_a_proposal_with_a_reason_and_the_suggesters_see_it(
    phm_dir: Path, llm_server: ScriptedLLM, settings: Any, admin_client: Any, db: None
) -> None:
    settings.REVISION_JURY_MARGIN = -10.0
    note, suggestions = _living_note(phm_dir)
    old_text = note.text
    llm_server.respond_with(_answer(REVISED, "yes"))
    run = _proposed(note)
    assert run.outcome == RevisionRun.Outcome.PROPOSED, (run.reasons, run.checks)
    author = get_user_model().objects.get(username="note-author")
    client = _client_for(author)
    url = reverse("revision_proposal_decide", args=[run.pk])
    refused = client.post(url, {"decision": "decline", "reason": ""})
    assert refused.status_code == 409 and "Say why you decline" in refused.content.decode()
    assert (
        client.post(url, {"decision": "decline", "reason": "The retraction is not the point here."}).status_code == 302
    )
    run.refresh_from_db()
    note.refresh_from_db()
    assert (
        run.outcome == RevisionRun.Outcome.DECLINED and run.decision_reason == "The retraction is not the point here."
    )
    assert note.text == old_text and Rating.objects.filter(note=note).count() == 39
    taken = Suggestion.objects.get(pk=suggestions[0].pk)
    assert taken.state == Suggestion.State.USED_REJECTED and "declined by note-author" in taken.outcome_reason
    # Decided once: accepting afterwards is refused.
    again = client.post(url, {"decision": "accept"})
    assert again.status_code == 409 and "already decided" in again.content.decode()
    audit = admin_client.get(reverse("revision_audit") + f"?note={note.pk}").content.decode()
    assert "Declined by a person by note-author" in audit and "The retraction is not the point here." in audit


def test_a_note_without_an_author_account_is_decided_by_an_admin(
    phm_dir: Path, llm_server: ScriptedLLM, settings: Any, admin_client: Any, db: None
) -> None:
    settings.REVISION_JURY_MARGIN = -10.0
    note, _ = _living_note(phm_dir)
    Participant.objects.filter(pk=note.author_id or 0).update(user=None)
    llm_server.respond_with(_answer(REVISED, "yes"))
    run = _proposed(note)
    assert run.outcome == RevisionRun.Outcome.PROPOSED and "Waits for an admin" in run.reasons
    assert (
        admin_client.post(reverse("revision_proposal_decide", args=[run.pk]), {"decision": "accept"}).status_code == 302
    )
    note.refresh_from_db()
    assert note.text == REVISED and note.current_version is not None and note.current_version.number == 2
    accepted_by = note.current_version.accepted_by
    assert accepted_by is not None and accepted_by.has_perm("notes.decide_revision")


def test_the_post_keeps_the_previous_versions_status_while_the_new_one_gathers_ratings(
    phm_dir: Path, llm_server: ScriptedLLM, settings: Any, anon_client: Any, db: None
) -> None:
    settings.REVISION_JURY_MARGIN = -10.0
    note, _ = _living_note(phm_dir)
    old_text = note.text
    Note.objects.filter(pk=note.pk).update(status=NoteStatus.HELPFUL)
    note.refresh_from_db()
    llm_server.respond_with(_answer(REVISED, "yes"))
    _accept(_proposed(note))
    note.refresh_from_db()
    assert note.status == NoteStatus.NEEDS_MORE_RATINGS and note.text == REVISED
    [shown] = living_selectors.shown_statuses(notes=[note]).values()
    assert (shown.version.number, shown.version.final_status, shown.current_number) == (1, NoteStatus.HELPFUL, 2)
    page = anon_client.get(reverse("post_detail", args=[note.post_id])).content.decode()
    assert "Status of version 1" in page and "Currently Rated Helpful" in page
    assert old_text in page and "Version 2 of this note is gathering ratings" in page
    home = anon_client.get(reverse("home") + "?text=all").content.decode()
    assert "status of version 1; version 2 is gathering ratings" in home and old_text[:60] in home
    # Once the new version has a status of its own, the post shows it.
    Note.objects.filter(pk=note.pk).update(status=NoteStatus.NOT_HELPFUL)
    note.refresh_from_db()
    assert living_selectors.shown_statuses(notes=[note]) == {}
    page = anon_client.get(reverse("post_detail", args=[note.post_id])).content.decode()
    assert "Status of version 1" not in page and REVISED in page
    home = anon_client.get(reverse("home") + "?text=all").content.decode()
    assert "status of version 1" not in home and REVISED[:60] in home


def test_a_rating_or_suggestion_for_a_version_no_longer_current_is_refused(
    phm_dir: Path, llm_server: ScriptedLLM, settings: Any, db: None
) -> None:
    settings.REVISION_JURY_MARGIN = -10.0
    note, suggestions = _living_note(phm_dir)
    llm_server.respond_with(_answer(REVISED, "yes"))
    run = _proposed(note)
    # A proposal is not a new version: a rating of version 1 still lands on version 1.
    rater = Participant.objects.get(pk=suggestions[1].rater_id)
    rating, _ = rating_submit(rater=rater, note=note, level="HELPFUL", read_version=1)
    assert rating.version_id == note.current_version_id
    _accept(run)
    note.refresh_from_db()
    with pytest.raises(StaleVersionError, match="version 2"):
        rating_submit(rater=rater, note=note, level="NOT_HELPFUL", read_version=1)
    assert not Rating.objects.filter(note=note).exists()
    # Through the page: the rater's form says version 1; the answer shows version 2's text.
    rater.user = get_user_model().objects.create_user(username="stale-rater", password="x")
    rater.save(update_fields=["user"])
    rater.user.groups.set(Group.objects.filter(name="Rater"))
    client = _client_for(rater.user)
    answer = client.post(reverse("rate_note", args=[note.pk]),
                         {"level": "HELPFUL", "version": "1", "suggestion": "Shorter."})  # fmt: skip
    assert answer.status_code == 409
    body = answer.content.decode()
    assert "new text (version 2)" in body and REVISED in body and 'name="version" value="2"' in body
    assert not Rating.objects.filter(note=note).exists()
    assert not Suggestion.objects.filter(note=note, state=Suggestion.State.PENDING).exists()
    ok = client.post(reverse("rate_note", args=[note.pk]), {"level": "HELPFUL", "version": "2"})
    assert ok.status_code == 302 and Rating.objects.get(note=note).version_id == note.current_version_id


def test_a_suggestion_whose_source_is_not_confirmed_does_not_reach_the_reviser(
    phm_dir: Path, llm_server: ScriptedLLM, settings: Any, db: None
) -> None:
    settings.REVISION_JURY_MARGIN = -10.0
    note, suggestions = _living_note(phm_dir)
    # The first suggester has not confirmed the passage of their source (yet).
    Snippet.objects.filter(pk=suggestions[0].snippet_id or 0).update(confirmation=Snippet.Confirmation.PENDING)
    llm_server.respond_with(_answer(REVISED, "yes"))
    _proposed(note)
    prompt = next(r for r in llm_server.requests if "Revise the current note" in r["messages"][-1]["content"])
    text = prompt["messages"][-1]["content"]
    assert suggestions[1].text in text and suggestions[0].text not in text and "thelancet.com" not in text
    assert Suggestion.objects.get(pk=suggestions[0].pk).state == Suggestion.State.PENDING
