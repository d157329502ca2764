"""The claimed runs share one abstract model (crowdnotes_site.leases.ClaimedRun), and work_sweep runs
every sweep registered with `leases.sweep` where it is defined."""

from __future__ import annotations

from typing import Any

import pytest

from crowdnotes_site import leases
from crowdnotes_site.tasks import work_sweep
from evidence.models import AutomationRun
from judging.models import JudgeRun, PreflightCheck
from notes.models import RevisionRun, ScoringRun, SupernoteRun

RUNS = [JudgeRun, PreflightCheck, AutomationRun, SupernoteRun, RevisionRun, ScoringRun]
CLAIM_FIELDS = {"state", "error", "claimed_until", "attempts", "started_at", "finished_at"}


@pytest.mark.parametrize("model", RUNS, ids=lambda m: m.__name__)
def test_each_claimed_run_has_the_claim_fields_of_the_abstract_run(model: Any) -> None:
    assert issubclass(model, leases.ClaimedRun)
    assert CLAIM_FIELDS <= {field.name for field in model._meta.get_fields()}
    assert model.TRANSITIONS.states == set(model.State.values)


@pytest.mark.django_db
def test_work_sweep_runs_every_registered_sweep_by_name() -> None:
    assert work_sweep() == {
        "automation_runs": [],
        "drafts": [],
        "judge_runs": [],
        "judge_runs_after_outage": [],
        "preflights": [],
        "refines": [],
        "revision_runs": [],
        "scoring_runs": [],
        "snippets": [],
        "supernote_runs": [],
    }


def test_a_sweep_name_belongs_to_one_function() -> None:
    def another_sweep() -> list[int]:
        return []

    registered = leases.SWEEPS["scoring_runs"]
    assert leases.sweep("scoring_runs")(registered) is registered  # a module imported again
    with pytest.raises(ValueError, match="two sweeps are named 'scoring_runs'"):
        leases.sweep("scoring_runs")(another_sweep)
    assert leases.SWEEPS["scoring_runs"] is registered
