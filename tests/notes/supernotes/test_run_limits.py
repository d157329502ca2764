"""Supernote runs (hundreds of LLM calls a click) are owned, limited and fair: admins
only by default, per-user and site-wide rate limits, one active run per post enforced by the
database, run details for admins and the starter only, sliced runs re-queued in the starter's fair
turn; and the per-user daily LLM-call budget with its admin table."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.contrib.auth.models import Group
from django.db import connection, transaction
from django.urls import reverse

from crowdnotes_site.lib.communitynotes.supernotes import phm
from crowdnotes_site.lib.llm.client import LLMBudgetExceeded
from crowdnotes_site.lib.text_rules import find_urls
from crowdnotes_site.llm import llm_usage_charge
from crowdnotes_site.models import LlmUsage, OutboxMessage
from crowdnotes_site.queue import enqueue_on_commit
from evidence import snippets
from evidence.models import Snippet
from judging import services as judging_services
from judging.models import JudgeRun
from judging.tasks import judge_run_step
from notes import services as notes_services
from notes.models import DraftJob, Note, SupernoteRun
from notes.roles import ADMIN, CONTRIBUTOR, RATER, TRUSTED
from notes.services import post_create
from notes.supernotes import services
from tests.conftest import CsrfClient
from tests.evidence.conftest import MEASLES, article
from tests.judging.factories import note_with_evidence
from tests.notes.factories import make_job, make_post, make_ready_snippet
from tests.notes.supernotes.test_runs import _stuck_post
from tests.support.llm_server import Reply


def _client(user: Any) -> CsrfClient:
    client = CsrfClient()
    client.force_login(user)
    return client


def _plain_stuck_post(text: str) -> Any:
    """A stuck post without ratings: two misleading notes that Need More Ratings (the default)."""
    post = post_create(text=text)
    for k in range(2):
        Note.objects.create(post=post, text=f"Note {k} on {text}")
    return post


def _generate(client: CsrfClient, post: Any) -> Any:
    return client.post(reverse("supernote_generate", args=[post.pk]))


@pytest.fixture
def trusted(make_user: Any) -> Any:
    user = make_user("tina", CONTRIBUTOR)
    user.groups.add(Group.objects.get_or_create(name=TRUSTED)[0])
    return user


@pytest.mark.django_db
def test_contributors_cannot_start_runs_and_trusted_ones_only_when_the_setting_opens_them(
    contributor_client: Any, trusted: Any, settings: Any
) -> None:
    post, _, _ = _stuck_post()
    assert contributor_client.get(reverse("stuck_posts")).status_code == 403
    assert _generate(contributor_client, post).status_code == 403
    assert _generate(_client(trusted), post).status_code == 403  # SUPERNOTES_OPEN_TO_TRUSTED off
    assert not SupernoteRun.objects.exists()
    settings.SUPERNOTES_OPEN_TO_TRUSTED = True
    trusted = type(trusted).objects.get(pk=trusted.pk)  # no cached permission
    response = _generate(_client(trusted), post)
    run = SupernoteRun.objects.get()
    assert response.status_code == 302 and run.requested_by == trusted
    assert _generate(contributor_client, post).status_code == 403  # still not plain contributors


@pytest.mark.django_db
def test_each_user_and_the_whole_site_have_a_rate_of_runs(make_user: Any, settings: Any) -> None:
    posts = [_plain_stuck_post(f"Claim number {k} about vaccines.") for k in range(3)]
    first, second = make_user("ann", ADMIN), make_user("bob", ADMIN)
    settings.RATE_LIMITS = {**settings.RATE_LIMITS, "supernote": "1/h", "supernote_site": "2/h"}
    assert _generate(_client(first), posts[0]).status_code == 302
    refused = _generate(_client(first), posts[1])
    assert refused.status_code == 429
    assert "Too many Supernote runs started by you: at most 1 per hour." in refused.content.decode()
    assert _generate(_client(second), posts[1]).status_code == 302
    settings.RATE_LIMITS = {**settings.RATE_LIMITS, "supernote": "5/h"}
    refused = _generate(_client(second), posts[2])
    assert refused.status_code == 429
    assert "Too many Supernote runs started on the whole site: at most 2 per hour." in refused.content.decode()
    assert SupernoteRun.objects.count() == 2


@pytest.mark.django_db(transaction=True)
def test_two_concurrent_starts_give_one_run_and_a_clear_message(admin_user: Any, no_shared_worker: None) -> None:
    """Both transactions pass the "already under way" check before either commits: the partial
    unique constraint makes the second insert wait for the first, then fail; the service turns that
    into the same message (before the constraint, both inserted: two runs). The committed run's task
    reaches the broker: no shared worker may take it (it ran the run during the next tests)."""
    post, _, _ = _stuck_post()
    inserted, results = threading.Event(), dict[str, Any]()

    def first() -> None:
        try:
            with transaction.atomic():
                results["first"] = services.supernote_run_start(post=post, user=admin_user)
                inserted.set()
                threading.Event().wait(1.0)  # the second start checks and inserts meanwhile
        finally:
            connection.close()

    def second() -> None:
        inserted.wait(10)
        try:
            results["second"] = services.supernote_run_start(post=post, user=admin_user)
        except services.SupernoteError as exc:
            results["second"] = str(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert SupernoteRun.objects.filter(post=post).count() == 1
    assert results["second"] == "A Supernote run for this post is already under way."


@pytest.mark.django_db
def test_a_concurrent_second_click_gets_a_message_not_a_500(
    admin_client: Any, admin_user: Any, monkeypatch: Any
) -> None:
    post, _, _ = _stuck_post()
    services.supernote_run_start(post=post, user=admin_user)
    # The click's own check saw no active run (as in a race): the database refuses the insert.
    monkeypatch.setattr(services, "ACTIVE_STATES", [])
    response = admin_client.post(reverse("supernote_generate", args=[post.pk]), follow=True)
    assert response.status_code == 200
    assert "A Supernote run for this post is already under way." in response.content.decode()
    assert SupernoteRun.objects.filter(post=post).count() == 1


@pytest.mark.django_db
def test_a_run_is_shown_to_admins_and_its_starter_only(
    trusted: Any, make_user: Any, admin_client: Any, settings: Any
) -> None:
    settings.LLM_BASE_URL = ""
    settings.SUPERNOTES_OPEN_TO_TRUSTED = True
    post, _, _ = _stuck_post()
    run = services.supernote_run_start(post=post, user=trusted, n_candidates=3, jury_size=10)
    services.supernote_run_execute(run_id=run.pk)
    other = make_user("otto", CONTRIBUTOR)
    other.groups.add(Group.objects.get(name=TRUSTED))
    rater = make_user("rita", RATER)
    url = reverse("supernote_run", args=[run.pk])
    assert _client(trusted).get(url).status_code == 200
    assert admin_client.get(url).status_code == 200
    assert _client(other).get(url).status_code == 403
    run.refresh_from_db()
    outcome = run.outcome.split(":")[0]
    page = reverse("post_detail", args=[post.pk])
    assert outcome in admin_client.get(page).content.decode()
    assert outcome in _client(trusted).get(page).content.decode()
    for viewer in (_client(other), _client(rater), CsrfClient()):
        html = viewer.get(page).content.decode()
        assert outcome not in html and "Run details" not in html


@pytest.mark.django_db
def test_a_run_is_done_in_slices_each_queued_in_the_starters_fair_turn(
    admin_user: Any, contributor: Any, settings: Any, django_capture_on_commit_callbacks: Any
) -> None:
    settings.LLM_BASE_URL = ""
    settings.SUPERNOTE_SLICE_CANDIDATES = 5
    post, _, _ = _stuck_post()
    run = services.supernote_run_start(post=post, user=admin_user, n_candidates=12, jury_size=10)
    done, priorities = [], []
    for _ in range(3):
        with django_capture_on_commit_callbacks() as callbacks:
            assert services.supernote_run_step(run_id=run.pk) is True
        run.refresh_from_db()
        done.append(run.candidates_done)
        assert run.state == "queued" and run.claimed_until is None
        assert [(c.task, c.args) for c in callbacks] == [("notes.tasks.supernote_run_execute", (run.pk,))]
        priorities.append(callbacks[0].priority)
    assert done == [5, 10, 12]
    assert priorities == [1, 2, 3]  # the start was 0: each slice waits behind others' first messages
    # Another person's single LLM task queued now is served before the run's next slice.
    job = make_job(contributor)
    other = enqueue_on_commit("notes.tasks.draft_generate", job.pk, owner=contributor.pk)
    assert other.priority == 0 < priorities[-1]
    assert services.supernote_run_step(run_id=run.pk) is False
    run.refresh_from_db()
    assert run.state == "done" and run.candidates.count() == 12
    assert OutboxMessage.objects.filter(task_name="notes.tasks.supernote_run_execute").count() == 4


# --- The daily LLM-call budget --------------------------------------------------------------------


@pytest.mark.django_db
def test_the_budget_counts_each_users_calls_and_refuses_past_it(settings: Any, contributor: Any, rater: Any) -> None:
    settings.LLM_DAILY_CALLS_PER_USER = 2
    assert llm_usage_charge(user_id=contributor.pk) == 1
    assert llm_usage_charge(user_id=contributor.pk) == 2
    with pytest.raises(LLMBudgetExceeded, match="daily LLM budget of 2 calls"):
        llm_usage_charge(user_id=contributor.pk)
    assert LlmUsage.objects.get(user=contributor).calls == 2  # the refused call is not counted
    assert llm_usage_charge(user_id=rater.pk) == 1
    settings.LLM_DAILY_CALLS_PER_USER = 0  # no limit
    assert llm_usage_charge(user_id=contributor.pk) == 3


@pytest.mark.django_db
def test_a_judge_run_past_its_authors_budget_fails_saying_why(settings: Any, llm_server: Any, contributor: Any) -> None:
    settings.LLM_DAILY_CALLS_PER_USER = 1
    llm_server.respond_with(lambda messages: "Fine.\nFinal decision: yes")
    note = note_with_evidence()
    Note.objects.filter(pk=note.pk).update(author=contributor.participant)
    run = judging_services.judge_run_request(note=Note.objects.get(pk=note.pk))
    judge_run_step.apply(args=[run.pk])  # relevance: the one call of the day
    judge_run_step.apply(args=[run.pk])  # correctness: refused before anything is sent
    run.refresh_from_db()
    assert run.state == JudgeRun.State.FAILED and "daily LLM budget of 1 calls" in run.error
    assert len(llm_server.requests) == 1
    assert LlmUsage.objects.get(user=contributor).calls == 1


@pytest.mark.django_db
def test_a_draft_past_the_budget_fails_saying_why(settings: Any, llm_server: Any, contributor: Any) -> None:
    settings.LLM_DAILY_CALLS_PER_USER = 1
    llm_server.script(Reply(content="never sent"))
    llm_usage_charge(user_id=contributor.pk)
    job = make_job(contributor)
    kept = make_ready_snippet(job, "https://a.example/trials", "Trials found vitamin C does not prevent flu.")
    snippets.snippet_review(snippet=kept, user=contributor, confirmed=True)
    notes_services.draft_job_request_draft(job=job, seen_round=0)
    job = notes_services.draft_job_generate(job_id=job.pk)
    assert job.state == DraftJob.State.FAILED and "daily LLM budget" in job.error
    assert llm_server.requests == []


@pytest.mark.django_db
def test_admins_see_each_users_llm_calls_against_the_budget(
    admin_client: Any, contributor_client: Any, contributor: Any, rater: Any, settings: Any
) -> None:
    settings.LLM_DAILY_CALLS_PER_USER = 5
    for _ in range(3):
        llm_usage_charge(user_id=contributor.pk)
    llm_usage_charge(user_id=rater.pk)
    html = admin_client.get(reverse("judging:llm_usage")).content.decode()
    assert "Daily budget: 5 calls per user" in html
    assert "<tr><td>carla</td><td>3</td><td>2</td><td>3</td></tr>" in html
    assert "<tr><td>rafa</td><td>1</td><td>4</td><td>1</td></tr>" in html
    assert html.index("carla") < html.index("rafa")
    assert contributor_client.get(reverse("judging:llm_usage")).status_code == 403


@pytest.mark.django_db
def test_a_supernotes_judges_spend_the_budget_of_whoever_started_its_run(
    settings: Any, llm_server: Any, admin_user: Any, django_capture_on_commit_callbacks: Any
) -> None:
    """A Supernote has no author: its judge run is its starter's work (fair turn and budget)."""
    settings.LLM_DAILY_CALLS_PER_USER = 2
    llm_server.respond_with(lambda messages: "Fine.\nFinal decision: yes")
    note = note_with_evidence()
    Note.objects.filter(pk=note.pk).update(author=None, origin=Note.Origin.SUPERNOTE)
    SupernoteRun.objects.create(post=note.post, requested_by=admin_user, state="done", proposed_note=note)
    with django_capture_on_commit_callbacks() as callbacks:
        run = judging_services.judge_run_request(note=Note.objects.get(pk=note.pk))
    assert [(c.task, c.args) for c in callbacks] == [("judging.tasks.judge_run_step", (run.pk,))]
    assert OutboxMessage.objects.get(task_name="judging.tasks.judge_run_step").owner_id == admin_user.pk
    for _ in range(3):
        judge_run_step.apply(args=[run.pk])
    run.refresh_from_db()
    assert run.state == JudgeRun.State.FAILED and "daily LLM budget of 2 calls" in run.error
    assert len(llm_server.requests) == 2
    assert LlmUsage.objects.get(user=admin_user).calls == 2


@pytest.mark.django_db
def test_a_proposed_supernote_is_judged_in_its_starters_turn(
    settings: Any, tmp_path: Any, llm_server: Any, admin_user: Any
) -> None:
    settings.PHM_DIR = tmp_path / "phm"
    post, _, _ = _stuck_post()
    services.phm_train_from_db(embedder_name=phm.HASHING, epochs=30)

    def answer(messages: list[dict[str, Any]]) -> str:
        content = messages[-1]["content"]
        if "Question:" in content:
            return "Fine.\nFinal decision: yes"
        # Cite a link of a note shown: the run's random subsets do not always hold the same notes.
        return "Large studies found no link between vaccines and autism. " + find_urls(content)[0]

    llm_server.respond_with(answer)
    run = services.supernote_run_start(post=post, user=admin_user, n_candidates=6, jury_size=200)
    services.supernote_run_execute(run_id=run.pk)
    run.refresh_from_db()
    assert run.proposed_note is not None, run.outcome
    judge = OutboxMessage.objects.get(task_name="judging.tasks.judge_run_step")
    assert judge.owner_id == admin_user.pk and judge.priority is not None and judge.priority > 0
    assert LlmUsage.objects.get(user=admin_user).calls == len(llm_server.requests) > 0


@pytest.mark.django_db
def test_the_category_call_for_a_new_source_spends_the_budget_of_the_contributor_who_added_it(
    settings: Any, llm_server: Any, web_server: Any, contributor: Any
) -> None:
    settings.SOURCE_CATEGORY_LLM = True
    settings.LLM_DAILY_CALLS_PER_USER = 1
    llm_server.respond_with(lambda messages: "5")  # 5. Health portal
    body = article(MEASLES, title="Measles").encode()
    job = make_job(contributor, make_post("Measles vaccines do not work."))
    first, second = snippets.snippets_add(job=job, urls=[web_server.add("/a", body), web_server.add("/b", body)])
    llm_usage_charge(user_id=contributor.pk)  # the day's one call is used: the rules decide, nothing is sent
    snippets.snippet_process(snippet_id=first.pk)
    source = Snippet.objects.select_related("source").get(pk=first.pk).source
    assert source is not None and (source.category, source.category_method) == ("other", "rule:no rule")
    assert llm_server.requests == [] and LlmUsage.objects.get(user=contributor).calls == 1
    settings.LLM_DAILY_CALLS_PER_USER = 2
    snippets.snippet_process(snippet_id=second.pk)
    source = Snippet.objects.select_related("source").get(pk=second.pk).source
    assert source is not None and source.category == "portal" and source.category_method.startswith("mapping:")
    assert len(llm_server.requests) == 1 and LlmUsage.objects.get(user=contributor).calls == 2
