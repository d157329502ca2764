"""The X tasks in a real Celery worker: "Fetch from X now" meets a 429 and the task re-queues itself
for the reset (no request inside the window), and a proposal goes through the outbox to X once."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import CsrfClient, wait_for
from tests.support.worker import Worker
from tests.support.x_server import FakeX, Scripted
from tests.xnotes.factories import proposable_note, tweet
from xnotes.models import XFetchRun, XPost, XProposal
from xnotes.services import proposals

ELIGIBLE = "/2/notes/search/posts_eligible_for_notes"


def _wait(worker: Worker, predicate: Any) -> Any:
    """wait_for, with the worker's log in the failure message."""
    try:
        return wait_for(predicate, timeout=90)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n--- worker log ---\n{worker.output()[-4000:]}") from exc


@pytest.mark.worker
def test_fetch_now_waits_for_the_reset_in_the_queue(x_worker: Worker, x_api: FakeX, admin_client: CsrfClient) -> None:
    x_api.eligible_pages = [[tweet("1900000000000000001", "Garlic cures measles.")],
                            [tweet("1900000000000000002", "Bleach cures autism.")]]  # fmt: skip
    x_api.script(ELIGIBLE, Scripted(0))
    x_api.rate_limit_next(ELIGIBLE, reset_in_s=3)
    admin_client.post("/x/writer/fetch/")
    run = XFetchRun.objects.get()
    done = _wait(x_worker, lambda: XFetchRun.objects.filter(pk=run.pk, state=XFetchRun.State.DONE).first())
    assert (done.pages, done.new, done.rate_limited_waits) == (2, 2, 1)
    limited, after = x_api.of(ELIGIBLE)[1], x_api.of(ELIGIBLE)[2]
    assert limited.status == 429 and after.at - limited.at >= 3
    assert x_api.violations == []
    assert XPost.objects.count() == 2, x_worker.output()


@pytest.mark.worker
def test_a_proposal_reaches_x_once_through_the_outbox(x_worker: Worker, x_api: FakeX, admin_user: Any) -> None:
    note = proposable_note()
    proposal, _ = proposals.proposal_request(note=note, user=admin_user, classification="not_misleading", tags=[])
    sent = _wait(x_worker, lambda: XProposal.objects.filter(pk=proposal.pk, state=XProposal.State.SENT).first())
    assert sent.x_note_id == x_api.notes[0]["id"]
    assert len(x_api.of("/2/notes", "POST")) == 1
