"""The contributor's view of a submitted note: each judge's verdict as it arrives, and why the
note has its crowd status (from the scorer's output)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from judging import services as judging_services
from judging.models import JudgeDecision, JudgeRun
from notes import services
from notes.models import Note, Participant, Rating, RatingLevel
from notes.roles import CONTRIBUTOR
from notes.scoring import selectors as scoring_selectors
from tests.conftest import _client_for
from tests.judging.factories import note_with_evidence
from tests.judging.llm_answers import answers

pytestmark = pytest.mark.django_db

YES_NO = answers(
    relevance="The snippet is about the MMR vaccine and autism.\nFinal decision: yes",
    correctness="The note says more than the snippet supports.\nFinal decision: no",
    helpfulness="unused\nFinal decision: yes",
)


def _own_note(user: Any) -> Note:
    note = note_with_evidence()
    note.author = services.participant_for_user(user=user)
    note.save(update_fields=["author"])
    return note


def _stage_states(html: str) -> dict[str, str]:
    return dict(re.findall(r'data-stage="(\w+)" data-state="(\w+)"', html))


def test_it_shows_each_verdict_as_it_arrives_and_stops_polling_when_done(
    contributor: Any, contributor_client: Any, llm_server: Any, django_capture_on_commit_callbacks: Any
) -> None:
    llm_server.respond_with(YES_NO)
    note = _own_note(contributor)
    with django_capture_on_commit_callbacks(execute=False):
        run = judging_services.judge_run_request(note=note)
    url = f"/me/notes/{note.pk}/"

    html = contributor_client.get(url).content.decode()
    assert _stage_states(html) == {"relevance": "waiting", "correctness": "waiting", "helpfulness": "waiting"}
    assert f'hx-get="{url}"' in html and 'http-equiv="refresh"' in html  # htmx polling, and a no-JS refresh

    with django_capture_on_commit_callbacks(execute=False):
        judging_services.judge_run_step(run_id=run.pk)
    part = contributor_client.get(url, headers={"HX-Request": "true"}).content.decode()
    assert "<html" not in part  # only the live fragment
    assert _stage_states(part)["relevance"] == "yes"
    assert _stage_states(part)["correctness"] == "waiting"
    assert "The snippet is about the MMR vaccine and autism." in part
    assert "LLM (" in part  # judge kind and name

    with django_capture_on_commit_callbacks(execute=False):
        judging_services.judge_run_step(run_id=run.pk)
    html = contributor_client.get(url).content.decode()
    assert _stage_states(html) == {"relevance": "yes", "correctness": "no", "helpfulness": "not_reached"}
    assert "The note says more than the snippet supports." in html
    assert "hx-get" not in html.split('id="live"')[1].split(">")[0]  # the run is over: no more polling
    assert JudgeRun.objects.get(pk=run.pk).state == JudgeRun.State.DONE


def test_it_shows_an_admin_override_as_the_verdict(contributor: Any, contributor_client: Any, admin_user: Any) -> None:
    note = _own_note(contributor)
    run = JudgeRun.objects.create(note=note, content_hash="c", state=JudgeRun.State.DONE)
    decision = JudgeDecision.objects.create(
        run=run, note=note, content_hash="c", stage="relevance", verdict="no", judge_kind="baseline", judge_name="b"
    )
    judging_services.decision_override(decision=decision, verdict="yes", reason="relevant after all", user=admin_user)
    html = contributor_client.get(f"/me/notes/{note.pk}/").content.decode()
    assert _stage_states(html)["relevance"] == "yes"
    assert "overridden by an admin" in html and "relevant after all" in html  # with the admin's reason
    assert "Offline baseline" in html
    # The later stages were never judged: not "an earlier stage said no".
    assert "not judged (the run ended before this stage)" in html and "stage said no" not in html


def test_an_override_to_no_puts_the_later_stages_out_of_reach_everywhere(
    contributor: Any, contributor_client: Any, admin_user: Any, admin_client: Any
) -> None:
    from judging.selectors import judging_for_notes

    note = _own_note(contributor)
    run = JudgeRun.objects.create(note=note, content_hash="c", state=JudgeRun.State.DONE, helpful=True)
    made = {
        stage: JudgeDecision.objects.create(
            run=run, note=note, content_hash="c", stage=stage, verdict="yes", judge_kind="baseline", judge_name="b"
        )
        for stage in ("relevance", "correctness", "helpfulness")
    }
    reason = "The snippet says 1 in 10,000, the note says 1 in 1,000."
    judging_services.decision_override(decision=made["correctness"], verdict="no", reason=reason, user=admin_user)

    html = contributor_client.get(f"/me/notes/{note.pk}/").content.decode()
    assert _stage_states(html) == {"relevance": "yes", "correctness": "no", "helpfulness": "not_reached"}
    assert reason.replace(",", "") in html.replace(",", "")  # the contributor sees the admin's reason
    assert "not reached (Correctness said no)" in html and 'Judged "yes" before an admin' in html
    assert judging_for_notes([note])[note.pk].helpful is False  # not the run's stored True
    # The audit list and the decision page say the same.
    listing = admin_client.get("/judging/audit/").content.decode()
    gated = listing.count(
        'class="verdict-not_reached">not reached'
    )  # rows (the table of notes left out explains "not reached" in words)
    assert gated == 1 and "Correctness is not yes after an override" in listing
    detail = admin_client.get(f"/judging/audit/{made['helpfulness'].pk}/").content.decode()
    assert "not reached" in detail and "no longer counts" in detail
    assert "not reached" not in admin_client.get(f"/judging/audit/{made['relevance'].pk}/").content.decode()
    # Overridden back to yes: helpfulness counts again.
    judging_services.decision_override(decision=made["correctness"], verdict="yes", reason="checked", user=admin_user)
    html = contributor_client.get(f"/me/notes/{note.pk}/").content.decode()
    assert _stage_states(html)["helpfulness"] == "yes" and judging_for_notes([note])[note.pk].helpful is True


def test_it_lists_verdicts_on_my_notes_and_polls_only_while_judging(contributor: Any, contributor_client: Any) -> None:
    note = _own_note(contributor)
    run = JudgeRun.objects.create(note=note, content_hash="c", state=JudgeRun.State.RUNNING)
    html = contributor_client.get("/me/notes/").content.decode()
    assert f'href="/me/notes/{note.pk}/"' in html
    assert 'hx-get="/me/notes/"' in html
    JudgeRun.objects.filter(pk=run.pk).update(state=JudgeRun.State.DONE)
    html = contributor_client.get("/me/notes/").content.decode()
    assert 'hx-get="/me/notes/"' not in html


def test_it_shows_a_note_only_to_its_author(contributor: Any, make_user: Any) -> None:
    note = _own_note(contributor)
    other = _client_for(make_user("someone", CONTRIBUTOR))
    assert other.get(f"/me/notes/{note.pk}/").status_code == 404


def _camp(prefix: str, n: int, factor: float) -> list[Participant]:
    return [Participant.objects.create(external_id=f"{prefix}{i}", rater_factor=factor) for i in range(n)]


def test_it_explains_a_note_that_needs_raters_from_the_other_side(contributor: Any) -> None:
    note = _own_note(contributor)
    for rater in _camp("left", 3, -0.8):
        Rating.objects.create(note=note, rater=rater, level=RatingLevel.HELPFUL)
    explanation = scoring_selectors.status_explanation(note=note)
    assert explanation.n_ratings == 3
    assert [(s.ratings, s.helpful) for s in explanation.sides] == [(3, 3), (0, 0)]
    assert explanation.reasons[0] == "3 ratings so far; a status needs at least 5: 2 more."
    assert "needs raters from the other side (raters with a positive factor)" in explanation.reasons[1]
    assert "Not scored yet" in explanation.reasons[2]


def test_it_explains_a_scored_note_from_its_intercept_and_factor(contributor: Any, contributor_client: Any) -> None:
    note = _own_note(contributor)
    for rater in _camp("left", 3, -0.8) + _camp("right", 3, 0.7):
        Rating.objects.create(note=note, rater=rater, level=RatingLevel.SOMEWHAT_HELPFUL)
    Note.objects.filter(pk=note.pk).update(intercept=0.21, factor=0.05)
    note.refresh_from_db()
    reasons = scoring_selectors.status_explanation(note=note).reasons
    assert reasons == [
        "Helpfulness score 0.210: Helpful needs 0.40 or more (agreement across sides); Not Helpful needs below -0.090."
    ]
    html = contributor_client.get(f"/me/notes/{note.pk}/").content.decode()
    assert "3 from raters with a negative factor (3 helpful)" in html
    assert "Helpfulness score 0.210" in html


def test_it_measures_how_much_of_the_machine_draft_survived() -> None:
    draft = "Randomized trials found vitamin C does not prevent colds in most adults."
    assert services.draft_survival(draft=draft, final=draft) == 1.0
    kept = services.draft_survival(draft=draft, final=draft.replace("most adults", "adults, per a 2013 review"))
    assert kept is not None and kept >= services.DRAFT_SURVIVAL_MIN
    rewritten = services.draft_survival(draft=draft, final="A 2013 Cochrane review of 29 studies disagrees.")
    assert rewritten is not None and rewritten < services.DRAFT_SURVIVAL_MIN
    assert services.draft_survival(draft="", final="anything") is None


def test_it_says_how_far_over_the_limit_a_note_is() -> None:
    from notes.forms import NoteForm

    form = NoteForm({"text": "x" * 333}, urls=[])
    assert not form.is_valid()
    assert form.errors["text"] == [
        "53 characters over the 280 limit: the note counts 333 (each link counts as 1 character). Shorten it."
    ]
