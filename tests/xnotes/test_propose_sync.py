"""X's evaluator, proposing a note exactly once, following the notes written, the commands."""

from __future__ import annotations

import io
import json
import re
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from crowdnotes_site.models import OutboxMessage
from judging.models import JudgeDecision, JudgeRun
from notes.models import Post
from tests.support.x_server import FakeX, Scripted
from tests.xnotes.factories import URL, proposable_note
from xnotes import rules
from xnotes.budget import RateLimited
from xnotes.client import XClient, XTransientError
from xnotes.models import XEvaluation, XProposal, XWrittenNote
from xnotes.services import XFlowError, evaluator, proposals

MISLEADING = rules.MISLEADING


def test_evaluator_is_asked_once_per_post_and_text(x_api: FakeX, db: None) -> None:
    note = proposable_note()
    x_api.evaluator_score = 0.73
    first = evaluator.evaluate(post=note.post, text=note.text, client=XClient())
    again = evaluator.evaluate(post=note.post, text=note.text, client=XClient())
    assert first.claim_opinion_score == again.claim_opinion_score == 0.73
    assert len(x_api.of("/2/evaluate_note")) == 1
    assert x_api.of("/2/evaluate_note")[0].body == {"note_text": note.text, "post_id": "1930672414444372186"}
    evaluator.evaluate(post=note.post, text=note.text + " More.", client=XClient())
    assert XEvaluation.objects.count() == 2


def test_evaluate_command(x_api: FakeX, db: None) -> None:
    x_api.evaluator_score = 0.42
    out = io.StringIO()
    call_command(
        "x_evaluate", "--post-id", "1930672414444372186", "--text", "See https://www.cdc.gov", "--json", stdout=out
    )
    assert json.loads(out.getvalue())["claim_opinion_score"] == 0.42
    with pytest.raises(CommandError, match="numeric X post id"):
        call_command("x_evaluate", "--post-id", "abc", "--text", "t", "--json", stdout=io.StringIO())


def test_proposal_goes_through_the_outbox_and_is_sent_once(x_api: FakeX, admin_user: Any, db: None) -> None:
    note = proposable_note()
    proposal, created = proposals.proposal_request(note=note, user=admin_user, classification=MISLEADING,
                                                  tags=["factual_error"])  # fmt: skip
    assert created and proposal.state == XProposal.State.QUEUED
    assert OutboxMessage.objects.filter(task_name="xnotes.tasks.x_propose_note", args=[proposal.pk]).count() == 1
    again, created_again = proposals.proposal_request(
        note=note, user=admin_user, classification=MISLEADING, tags=["other"]
    )
    assert (again.pk, created_again) == (proposal.pk, False)
    sent = proposals.proposal_send(proposal_id=proposal.pk, client=XClient())
    proposals.proposal_send(proposal_id=proposal.pk, client=XClient())  # a second delivery does nothing
    assert sent.state == XProposal.State.SENT and sent.x_note_id
    assert len(x_api.of("/2/notes", "POST")) == 1
    body = x_api.of("/2/notes", "POST")[0].body
    assert body == {"test_mode": True, "post_id": "1930672414444372186", "info": {
        "text": f"{note.text} {URL}", "classification": MISLEADING, "misleading_tags": ["factual_error"],
        "trustworthy_sources": True}}  # fmt: skip


def test_a_timeout_then_retry_never_sends_a_second_note(x_api: FakeX, settings: Any, db: None) -> None:
    settings.X_API_TIMEOUT_S = 0.3
    note = proposable_note()
    proposal, _ = proposals.proposal_request(note=note, user=None, classification=MISLEADING, tags=["factual_error"])
    x_api.script("/2/notes", Scripted(0, delay_s=0.8))  # X creates the note but answers too late
    with pytest.raises(XTransientError):
        proposals.proposal_send(proposal_id=proposal.pk, client=XClient())
    proposal.refresh_from_db()
    assert proposal.state == XProposal.State.UNCERTAIN
    retried = proposals.proposal_send(proposal_id=proposal.pk, client=XClient())
    assert retried.state == XProposal.State.SENT
    assert retried.x_note_id == x_api.notes[0]["id"]
    assert len(x_api.of("/2/notes", "POST")) == 1
    assert len(x_api.notes) == 1


def test_xs_one_note_per_post_answer_is_recorded_not_retried(x_api: FakeX, db: None) -> None:
    note = proposable_note()
    x_api.notes.append({"id": "1950000000000000001", "info": {"post_id": "1930672414444372186", "text": "earlier"},
                        "status": "needs_more_ratings"})  # fmt: skip
    proposal, _ = proposals.proposal_request(note=note, user=None, classification=MISLEADING, tags=["factual_error"])
    done = proposals.proposal_send(proposal_id=proposal.pk, client=XClient())
    assert done.state == XProposal.State.DUPLICATE
    assert done.x_note_id == "1950000000000000001"
    assert "one note per post" in done.error
    assert proposals.proposal_send(proposal_id=proposal.pk, client=XClient()).state == XProposal.State.DUPLICATE
    assert len(x_api.of("/2/notes", "POST")) == 1


def test_429_on_propose_leaves_it_queued(x_api: FakeX, db: None) -> None:
    note = proposable_note()
    proposal, _ = proposals.proposal_request(note=note, user=None, classification=MISLEADING, tags=["factual_error"])
    x_api.rate_limit_next("/2/notes", reset_in_s=30)
    with pytest.raises(RateLimited):
        proposals.proposal_send(proposal_id=proposal.pk, client=XClient())
    proposal.refresh_from_db()
    assert proposal.state == XProposal.State.QUEUED
    with pytest.raises(RateLimited):  # refused by the budget, nothing sent inside the window
        proposals.proposal_send(proposal_id=proposal.pk, client=XClient())
    assert len(x_api.of("/2/notes")) == 1


@pytest.mark.parametrize(
    ("kwargs", "reason"),
    [
        ({"confirmed": False}, "must be confirmed"),
        ({"judged": False}, "judges have not finished"),
        ({"text": "x" * 300}, "over the 280 limit"),
        ({"urls": ()}, "no source URL"),
    ],
)
def test_ineligible_notes_are_refused_with_the_reason(
    x_api: FakeX, kwargs: dict[str, Any], reason: str, db: None
) -> None:
    note = proposable_note(**kwargs)
    with pytest.raises(XFlowError, match=reason):
        proposals.proposal_request(note=note, user=None, classification=MISLEADING, tags=["factual_error"])
    with pytest.raises(CommandError, match=reason):
        call_command("x_submit_note", str(note.pk), "--json", stdout=io.StringIO())
    assert not XProposal.objects.exists()


def test_a_post_without_x_id_is_refused(x_api: FakeX, db: None) -> None:
    note = proposable_note()
    Post.objects.filter(pk=note.post_id).update(external_id="")
    note.refresh_from_db()
    with pytest.raises(XFlowError, match="no X post id"):
        proposals.proposal_request(note=note, user=None, classification=MISLEADING, tags=["factual_error"])


def test_misleading_needs_a_tag_and_tags_are_checked(x_api: FakeX, db: None) -> None:
    note = proposable_note()
    with pytest.raises(XFlowError, match="at least one tag"):
        proposals.proposal_request(note=note, user=None, classification=MISLEADING, tags=[])
    with pytest.raises(XFlowError, match="Unknown tag"):
        proposals.proposal_request(note=note, user=None, classification=MISLEADING, tags=["fake_news"])


def test_submit_command_once_then_reports_the_first(x_api: FakeX, db: None) -> None:
    note = proposable_note()
    out = io.StringIO()
    call_command("x_submit_note", str(note.pk), "--classification", MISLEADING, "--tag", "factual_error",
                 "--tag", "missing_important_context", "--json", stdout=out)  # fmt: skip
    first = json.loads(out.getvalue())
    assert first["created"] is True and first["test_mode"] is True and first["x_note_id"]
    out = io.StringIO()
    call_command("x_submit_note", str(note.pk), "--json", stdout=out)
    second = json.loads(out.getvalue())
    assert (second["created"], second["x_note_id"]) == (False, first["x_note_id"])
    assert len(x_api.of("/2/notes", "POST")) == 1
    assert x_api.notes[0]["info"]["misleading_tags"] == ["factual_error", "missing_important_context"]


def test_daily_cap_is_checked_before_posting(x_api: FakeX, settings: Any, db: None) -> None:
    settings.X_DAILY_NOTE_CAP = 1
    first = proposable_note(x_id="1930672414444372186")
    second = proposable_note(x_id="1930672414444372187")
    proposals.proposal_request(note=first, user=None, classification=MISLEADING, tags=["factual_error"])
    with pytest.raises(XFlowError, match="cap of 1 notes"):
        proposals.proposal_request(note=second, user=None, classification=MISLEADING, tags=["factual_error"])


def test_writing_limit_applies_in_live_mode(x_api: FakeX, settings: Any, db: None) -> None:
    settings.X_TEST_MODE = False
    x_api.live_allowed = True
    # A writer whose last 10 rated notes include 8 Currently Rated Not Helpful: WL = 2.
    for i in range(10):
        XWrittenNote.objects.create(x_note_id=str(1950000000000000000 + i), test_mode=False,
                                    status="CURRENTLY_RATED_NOT_HELPFUL" if i < 8 else "CURRENTLY_RATED_HELPFUL")  # fmt: skip
    notes = [proposable_note(x_id=str(1930672414444372186 + i)) for i in range(3)]
    for note in notes[:2]:
        proposals.proposal_request(note=note, user=None, classification=MISLEADING, tags=["factual_error"])
    with pytest.raises(XFlowError, match="writing limit for today is reached: 2 of 2"):
        proposals.proposal_request(note=notes[2], user=None, classification=MISLEADING, tags=["factual_error"])


def test_sync_written_pages_and_computes_admission(x_api: FakeX, db: None) -> None:
    note = proposable_note()
    proposal, _ = proposals.proposal_request(note=note, user=None, classification=MISLEADING, tags=["factual_error"])
    proposals.proposal_send(proposal_id=proposal.pk, client=XClient())
    low = [{"evaluator_type": "ClaimOpinion", "evaluator_score_bucket": "Low"},
           {"evaluator_type": "UrlValidity", "evaluator_score_bucket": "High"},
           {"evaluator_type": "HarassmentAbuse", "evaluator_score_bucket": "High"}]  # fmt: skip
    for i in range(54):
        x_api.notes.insert(0, {"id": str(1940000000000000000 + (i << 22)), "info": {"post_id": str(1800000000000000000 + i)},
                               "status": "needs_more_ratings", "test_result": {"evaluation_outcome": low if i % 2 else x_api.outcomes}})  # fmt: skip
    x_api.written_page_size = 20
    out = io.StringIO()
    call_command("x_sync_written", "--json", stdout=out)
    result = json.loads(out.getvalue())
    assert (result["requests"], result["notes"]) == (3, 55)
    adm = result["admission"]
    assert (adm["window"], adm["n"]) == (50, 50)
    # The 50 newest: our note (all High) and the 49 newest fake ones (i = 53..5: 25 odd = Low, 24 even = High).
    assert adm["claim_opinion_high"]["count"] == 25 and adm["claim_opinion_high"]["share"] == 0.5
    assert adm["claim_opinion_low"]["count"] == 25 and adm["claim_opinion_low"]["passed"] is False
    assert adm["url_validity_high"]["share"] == 1.0 and adm["harassment_abuse_high"]["passed"] is True
    assert adm["eligible"] is False
    assert result["writing_limit"]["limit"] == 10 and result["writing_limit"]["rule"] == "T < 20 (new writer)"
    proposal.refresh_from_db()
    assert proposal.written.get().outcomes == x_api.outcomes


def test_commands_name_the_missing_settings(no_x_credentials: None, db: None) -> None:
    note = proposable_note()
    for args in (
        ["x_fetch_eligible"],
        ["x_hydrate_posts"],
        ["x_sync_written"],
        ["x_evaluate", "--post-id", "1", "--text", "t"],
        ["x_submit_note", str(note.pk)],
    ):
        with pytest.raises(CommandError, match="X_API_KEY, X_API_KEY_SECRET, X_ACCESS_TOKEN, X_ACCESS_TOKEN_SECRET"):
            call_command(*args, "--json", stdout=io.StringIO())
    assert not XProposal.objects.exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["x_fetch_eligible", "--max-results", "0"], "--max-results must be between 1 and 100, got 0"),
        (["x_fetch_eligible", "--max-results", "101"], "--max-results must be between 1 and 100, got 101"),
        (["x_fetch_eligible", "--limit", "0"], "--limit must be at least 1, got 0"),
        (["x_hydrate_posts", "--limit", "0"], "--limit must be at least 1, got 0"),
        (["x_submit_note", "999999"], "no note with id 999999"),
    ],
)
def test_commands_refuse_a_wrong_argument_naming_it(x_api: FakeX, args: list[str], message: str, db: None) -> None:
    out = io.StringIO()
    with pytest.raises(CommandError, match=re.escape(message)) as refused:
        call_command(*args, "--json", stdout=out)
    assert refused.value.returncode != 0  # manage.py exits with it
    assert out.getvalue() == "" and x_api.requests == []


def test_submit_command_refuses_a_note_whose_post_has_no_x_id(x_api: FakeX, db: None) -> None:
    note = proposable_note()
    Post.objects.filter(pk=note.post_id).update(external_id="")
    with pytest.raises(CommandError, match=f"note {note.pk} cannot be proposed to X: The post has no X post id"):
        call_command("x_submit_note", str(note.pk), "--tag", "factual_error", "--json", stdout=io.StringIO())
    assert not XProposal.objects.exists() and x_api.requests == []


def test_tasks_do_nothing_without_credentials(no_x_credentials: None, db: None) -> None:
    from xnotes import tasks

    assert tasks.x_fetch_eligible.apply().result is None
    assert tasks.x_hydrate_posts.apply().result is None
    assert tasks.x_sync_written.apply().result is None


def test_a_lost_sender_is_taken_over_and_checks_x_first(x_api: FakeX, db: None) -> None:
    import datetime as dt

    from django.utils import timezone

    note = proposable_note()
    proposal, _ = proposals.proposal_request(note=note, user=None, classification=MISLEADING, tags=["factual_error"])
    # A worker claimed the row, sent the note, and died before recording the answer.
    x_api.notes.append(
        {"id": "1950000000000000009", "info": {"post_id": proposal.x_post_id}, "status": "needs_more_ratings"}
    )
    XProposal.objects.filter(pk=proposal.pk).update(state=XProposal.State.SENDING, attempts=1,
                                                    claimed_until=timezone.now() + dt.timedelta(seconds=60))  # fmt: skip
    assert (
        proposals.proposal_send(proposal_id=proposal.pk, client=XClient()).state == XProposal.State.SENDING
    )  # still owned
    XProposal.objects.filter(pk=proposal.pk).update(claimed_until=timezone.now() - dt.timedelta(seconds=1))
    done = proposals.proposal_send(proposal_id=proposal.pk, client=XClient())
    assert (done.state, done.x_note_id) == (XProposal.State.SENT, "1950000000000000009")
    assert x_api.of("/2/notes", "POST") == []


def test_submit_command_uses_the_propose_pages_prefill(x_api: FakeX, admin_client: Any, db: None) -> None:
    note = proposable_note()
    JudgeDecision.objects.create(run=JudgeRun.objects.get(note=note), note=note, content_hash="c", stage="relevance",
                                 verdict="yes", reasoning="The evidence contradicts the post's claim.",
                                 judge_kind="llm", judge_name="m")  # fmt: skip
    page = admin_client.get(f"/x/notes/{note.pk}/propose/").content.decode()
    prefilled = re.findall(r'name="tags" value="([a-z_]+)"[^>]*checked', page)
    assert prefilled == ["factual_error"]
    out = io.StringIO()
    call_command("x_submit_note", str(note.pk), "--json", stdout=out)
    assert json.loads(out.getvalue())["created"] is True
    info = x_api.notes[0]["info"]
    assert (info["classification"], info["misleading_tags"]) == (MISLEADING, prefilled)


def test_submit_command_without_a_prefilled_reason_asks_for_a_tag(x_api: FakeX, db: None) -> None:
    note = proposable_note()  # no ratings, no judge reasoning: the page ticks no reason either
    with pytest.raises(CommandError, match=r"at least one tag.*pass --tag"):
        call_command("x_submit_note", str(note.pk), "--json", stdout=io.StringIO())
    assert not XProposal.objects.exists() and x_api.requests == []
