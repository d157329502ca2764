"""A snippet's processing states follow its table (Snippet.TRANSITIONS), like the other stateful
models: a move the table does not list is refused and changes nothing."""

from __future__ import annotations

from typing import Any

import pytest

from crowdnotes_site.transitions import Stateful, transition_rows
from evidence import snippets
from evidence.models import Snippet
from tests.notes.factories import make_job, make_ready_snippet

pytestmark = pytest.mark.django_db

PASSAGE = "Controlled trials found that vitamin C supplements do not prevent the flu in the general population."


def test_the_table_lists_every_state_of_the_field() -> None:
    assert issubclass(Snippet, Stateful)
    assert Snippet.TRANSITIONS.states == set(Snippet.State.values)


def test_a_ready_snippet_is_not_claimed_or_queued_again(contributor: Any) -> None:
    snippet = make_ready_snippet(make_job(contributor), "https://a.example/1", PASSAGE)
    before = Snippet.objects.filter(pk=snippet.pk).values().get()
    assert not snippets.snippet_claim(snippet_id=snippet.pk)
    for target in (Snippet.State.QUEUED, Snippet.State.FETCHING, Snippet.State.EMBEDDING):
        assert transition_rows(Snippet.objects.filter(pk=snippet.pk), target) == 0
    assert Snippet.objects.filter(pk=snippet.pk).values().get() == before


def test_a_lost_workers_late_step_does_not_move_a_requeued_snippet(contributor: Any) -> None:
    """The sweeper queued it again: the old worker's next stage is refused, and the new claim wins."""
    snippet = make_ready_snippet(make_job(contributor), "https://a.example/1", PASSAGE)
    Snippet.objects.filter(pk=snippet.pk).update(state=Snippet.State.QUEUED)
    for target in (Snippet.State.EXTRACTING, Snippet.State.EMBEDDING, Snippet.State.READY):
        assert transition_rows(Snippet.objects.filter(pk=snippet.pk), target) == 0
    assert Snippet.objects.get(pk=snippet.pk).state == Snippet.State.QUEUED
    assert snippets.snippet_claim(snippet_id=snippet.pk)


def test_a_failed_snippet_is_queued_again_only_by_a_retry(contributor: Any) -> None:
    snippet = make_ready_snippet(make_job(contributor), "https://a.example/1", PASSAGE)
    Snippet.objects.filter(pk=snippet.pk).update(state=Snippet.State.FAILED, passage=None)
    assert not snippets.snippet_claim(snippet_id=snippet.pk)
    snippet.refresh_from_db()
    assert snippets.snippet_retry(snippet=snippet).state == Snippet.State.QUEUED
    assert snippets.snippet_claim(snippet_id=snippet.pk)
    assert Snippet.objects.get(pk=snippet.pk).state == Snippet.State.FETCHING
