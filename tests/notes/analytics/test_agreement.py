from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.urls import reverse

from judging import services
from judging.models import JudgeRun
from notes.analytics import selectors
from notes.analytics.forms import AnalyticsFilterForm
from notes.models import Note, NoteStatus, Post
from tests.judging.factories import answers, note_with_evidence

pytestmark = pytest.mark.django_db


def _judge(note: Note, llm_server: Any, *verdicts: str) -> None:
    r, c, h = verdicts
    llm_server.respond_with(
        answers(
            relevance=f"Final decision: {r}", correctness=f"Final decision: {c}", helpfulness=f"Final decision: {h}"
        )
    )
    run: JudgeRun = services.judge_run_request(note=note)
    while services.judge_run_step(run_id=run.pk) is not None:
        pass


def test_agreement_is_counted_per_month_and_origin_over_real_inputs(llm_server: Any, admin_client: Any) -> None:
    jan, feb = dt.datetime(2026, 1, 10, tzinfo=dt.UTC), dt.datetime(2026, 2, 10, tzinfo=dt.UTC)
    cases = [  # (status, origin, month, verdicts) -> agrees?
        (NoteStatus.HELPFUL, Note.Origin.HUMAN, jan, ("yes", "yes", "yes")),  # agree
        (NoteStatus.HELPFUL, Note.Origin.HUMAN, jan, ("yes", "no", "yes")),  # disagree
        (NoteStatus.NOT_HELPFUL, Note.Origin.HUMAN, jan, ("yes", "yes", "no")),  # agree
        (NoteStatus.NOT_HELPFUL, Note.Origin.AUTOMATED, feb, ("yes", "yes", "yes")),  # disagree
    ]
    for i, (status, origin, created, verdicts) in enumerate(cases):
        note = note_with_evidence(text=f"Note {i} on the MMR vaccine studies.", status=status)
        Note.objects.filter(pk=note.pk).update(origin=origin, created_at=created)
        _judge(note, llm_server, *verdicts)
    # Judged without evidence: excluded, not a disagreement.
    post = Post.objects.create(text="The MMR vaccine causes autism.", text_hash="x")
    bare = Note.objects.create(post=post, text="No link was found.", status=NoteStatus.HELPFUL, created_at=jan)
    _judge(bare, llm_server, "yes", "yes", "yes")

    rows, excluded = selectors.agreement_over_time(AnalyticsFilterForm({}).filters())
    got = [(r.month, r.origin, r.n_notes, r.n_agree) for r in rows]
    assert got == [("2026-01", Note.Origin.HUMAN, 3, 2), ("2026-02", Note.Origin.AUTOMATED, 1, 0)]
    assert excluded == 1 and rows[0].share == pytest.approx(2 / 3)

    html = admin_client.get(reverse("analytics:judging")).content.decode()
    assert "Judge-crowd agreement by month and note origin" in html and "<svg" in html
    assert "<td>2026-01</td><td>Human</td><td>3</td><td>2</td>" in html and "67%" in html
    assert "1 judged crowd-rated note excluded" in html
    # The funnel over time is drawn too (same SVG module), one bar group per month and origin.
    assert "Judge funnel by month and note origin" in html
    assert "P(R) · 2026-01 · Human (n=3): 100%" in html  # all three January human notes relevant
    assert "P(C|R) · 2026-01 · Human (n=3): 66.7%" in html  # one of the three failed correctness
    assert "overall · 2026-02 · Automated (machine evidence and draft) (n=1): 100%" in html
