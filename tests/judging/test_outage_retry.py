"""A judge run that failed during an LLM outage is run again, once, when the LLM
answers again (the beat sweep's probe), and the note page says so."""

from __future__ import annotations

from typing import Any

import pytest
from django.urls import reverse

from crowdnotes_site.models import OutboxMessage
from crowdnotes_site.tasks import work_sweep
from judging import services
from judging.models import JudgeRun
from judging.tasks import judge_run_step
from notes.models import NoteStatus
from notes.services import participant_for_user
from tests.judging.factories import answers, note_with_evidence
from tests.support.llm_server import Reply

pytestmark = pytest.mark.django_db

DOWN = Reply(status=503, content="upstream unavailable")


def _fail_during_outage(llm_server: Any, run: JudgeRun, settings: Any) -> None:
    """The task's last try against an LLM that answers 503: the run fails with the outage error."""
    llm_server.script(*[DOWN] * (settings.LLM_MAX_RETRIES + 1))
    judge_run_step.apply(args=[run.pk], retries=settings.JUDGE_TASK_MAX_RETRIES)
    run.refresh_from_db()
    assert run.state == JudgeRun.State.FAILED
    assert run.error.startswith(services.LLM_OUTAGE), run.error


def test_a_run_failed_by_an_llm_outage_is_rerun_once_when_the_llm_returns(
    llm_server: Any, settings: Any, contributor: Any, contributor_client: Any
) -> None:
    settings.LLM_MAX_RETRIES = 0
    settings.LLM_BACKOFF_BASE_S = 0
    note = note_with_evidence(status=NoteStatus.NEEDS_MORE_RATINGS)
    note.author = participant_for_user(user=contributor)
    note.save(update_fields=["author"])
    run = services.judge_run_request(note=note)
    _fail_during_outage(llm_server, run, settings)
    # Still down: the sweep's probe gets a 503 and nothing is queued.
    llm_server.script(DOWN)
    assert work_sweep()["judge_runs_after_outage"] == []
    run.refresh_from_db()
    assert run.state == JudgeRun.State.FAILED and run.outage_retried_at is None
    # The LLM answers again: the next sweep queues the run once.
    llm_server.respond_with(
        lambda messages: "OK" if "Reply with OK." in messages[-1]["content"] else answers(
            relevance="Snippet 1 answers the claim.\nFinal decision: yes",
            correctness="Faithful.\nFinal decision: yes",
            helpfulness="Clear.\nFinal decision: yes",
        )(messages)
    )  # fmt: skip
    assert work_sweep()["judge_runs_after_outage"] == [run.pk]
    run.refresh_from_db()
    assert run.state == JudgeRun.State.QUEUED and run.outage_retried_at is not None
    assert OutboxMessage.objects.filter(task_name="judging.tasks.judge_run_step", args=[run.pk]).exists()
    while services.judge_run_step(run_id=run.pk):
        pass
    run.refresh_from_db()
    assert run.state == JudgeRun.State.DONE, run.error
    page = contributor_client.get(reverse("my_note_detail", args=[note.pk])).content.decode()
    assert "Run again automatically at" in page and "the judges' LLM was unreachable" in page
    # At most once per run: failed by a second outage, it stays failed.
    run.decisions.all().delete()  # as if judging had to start over
    JudgeRun.objects.filter(pk=run.pk).update(state=JudgeRun.State.QUEUED, finished_at=None)
    _fail_during_outage(llm_server, run, settings)
    assert work_sweep()["judge_runs_after_outage"] == []
    run.refresh_from_db()
    assert run.state == JudgeRun.State.FAILED
