"""The head start (evidence.prefetch): the form's debounced POST queues one prefetch per URL,
refuses private addresses and respects the per-user cap; with a real worker, a prefetched URL
is not fetched again on submit and its snippet is the exhaustive pick."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import pytest

from crowdnotes_site.models import OutboxMessage
from evidence.errors import ERROR_TEXTS
from evidence.models import EvidenceSource, Passage, Prefetch, Snippet
from tests.conftest import wait_for
from tests.support.sent_tasks import record_sent
from tests.support.web_server import WebServer

from .conftest import MEASLES, article

TASK = "evidence.tasks.prefetch_url"


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The prefetch tasks sent to the broker after commit (recorded instead of run)."""
    return record_sent(monkeypatch, TASK)


def _post(client: Any, capture: Any, urls: str) -> str:
    with capture(execute=True):
        response = client.post("/evidence/prefetch/", {"urls": urls}, HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    return response.content.decode()


@pytest.mark.django_db
def test_it_queues_exactly_one_prefetch_per_url_however_often_the_field_changes(
    contributor_client: Any, sent: list[int], django_capture_on_commit_callbacks: Any
) -> None:
    first = _post(contributor_client, django_capture_on_commit_callbacks, "https://www.cdc.gov/measles/\nhttps://www")
    # The debounced field fires again as the contributor keeps typing the second line.
    again = _post(
        contributor_client,
        django_capture_on_commit_callbacks,
        "https://www.cdc.gov/measles/\nhttps://www.who.int/news\nhttps://www.who.int/news",
    )
    rows = {row.url: row for row in Prefetch.objects.all()}
    assert set(rows) == {"https://www.cdc.gov/measles/", "https://www.who.int/news"}
    assert sorted(sent) == sorted(row.pk for row in rows.values())
    assert OutboxMessage.objects.filter(task_name=TASK).count() == 2
    assert first.count("Queued") == 1
    assert again.count("Queued") == 2
    assert 'hx-get="/evidence/prefetch/?url=' in again  # the fragment polls while pending
    # Polling (GET) reads the statuses and queues nothing.
    response = contributor_client.get("/evidence/prefetch/", {"url": "https://www.who.int/news"})
    assert "Queued" in response.content.decode()
    assert len(sent) == 2


@pytest.mark.django_db
def test_it_refuses_private_addresses_with_the_usual_error(
    contributor_client: Any, sent: list[int], django_capture_on_commit_callbacks: Any, settings: Any
) -> None:
    html = _post(
        contributor_client,
        django_capture_on_commit_callbacks,
        "http://10.0.0.7/admin\nhttp://192.168.1.1/\nhttp://127.0.0.1/\nhttp://[::1]/",
    )
    assert html.count(ERROR_TEXTS["blocked_address"]) == 4
    assert Prefetch.objects.count() == 0 and sent == []


@pytest.mark.django_db
def test_it_caps_pending_prefetches_per_contributor(
    contributor_client: Any, sent: list[int], django_capture_on_commit_callbacks: Any, settings: Any
) -> None:
    settings.EVIDENCE_PREFETCH_MAX_PENDING = 2
    html = _post(
        contributor_client,
        django_capture_on_commit_callbacks,
        "https://a.example.org/1\nhttps://a.example.org/2\nhttps://a.example.org/3",
    )
    assert len(sent) == 2
    assert "Not started: 2 of your links are already being read" in html
    # Once one is done, the next fits under the cap.
    Prefetch.objects.filter(url="https://a.example.org/1").update(state=Prefetch.State.READY)
    _post(contributor_client, django_capture_on_commit_callbacks, "https://a.example.org/3")
    assert len(sent) == 3


@pytest.mark.django_db
def test_only_contributors_may_start_a_head_start(rater_client: Any, anon_client: Any, sent: list[int]) -> None:
    assert rater_client.post("/evidence/prefetch/", {"urls": "https://www.cdc.gov/"}).status_code == 403
    assert anon_client.post("/evidence/prefetch/", {"urls": "https://www.cdc.gov/"}).status_code == 302
    assert Prefetch.objects.count() == 0


@pytest.mark.django_db
def test_the_contribute_form_wires_the_url_field_to_the_endpoint(contributor_client: Any) -> None:
    html = contributor_client.get("/contribute/").content.decode()
    assert 'hx-post="/evidence/prefetch/"' in html
    assert 'id="prefetch-status"' in html


@pytest.mark.worker
def test_a_prefetched_url_is_not_fetched_again_and_its_snippet_is_the_exhaustive_pick(
    celery_worker: Any, contributor_client: Any, web_server: WebServer
) -> None:
    from evidence import services

    # Long enough for several 512-token passages, the best one not the first.
    paragraphs = MEASLES[2:] * 12 + MEASLES[:2] + MEASLES[2:] * 12
    url = web_server.add("/measles", article(paragraphs, title="Measles").encode())
    response = contributor_client.post("/evidence/prefetch/", {"urls": url})
    assert "Queued" in response.content.decode()
    row = wait_for(
        lambda: Prefetch.objects.filter(url=url, state__in=[Prefetch.State.READY, Prefetch.State.FAILED]).first(),
        timeout=120,
    )
    assert row.state == Prefetch.State.READY, (row.error_code, row.error_message)
    passages = list(Passage.objects.filter(source=row.source).order_by("chunk_index"))
    assert len(passages) > 2 and all(p.embedding is not None for p in passages)
    assert "Ready" in contributor_client.get("/evidence/prefetch/", {"url": url}).content.decode()

    post = "The MMR vaccine does not work against measles."
    contributor_client.post("/contribute/", {"text": post, "urls": url})
    snippet = wait_for(
        lambda: Snippet.objects.filter(url=url, state__in=[Snippet.State.READY, Snippet.State.FAILED]).first(),
        timeout=120,
    )
    assert snippet.state == Snippet.State.READY, (snippet.error_code, snippet.error_message)
    assert [r["path"] for r in web_server.requests] == ["/measles"]  # fetched once, by the prefetch
    assert snippet.timings_ms.get("cache_hit") == 1 and snippet.timings_ms.get("match_all_cached") == 1
    assert all(score is not None for score in snippet.scores)  # every passage scored: nothing to refine
    exhaustive = services.get_matcher().match(post, [p.text for p in passages], strategy="exhaustive")
    assert snippet.passage_id == passages[exhaustive.best_index].pk
    assert "97 percent" in snippet.passage.text


@pytest.mark.django_db
def test_past_the_request_rate_it_answers_in_the_fragment_and_queues_nothing(
    contributor_client: Any, sent: list[int], django_capture_on_commit_callbacks: Any, settings: Any
) -> None:
    settings.RATE_LIMITS = {**settings.RATE_LIMITS, "prefetch": "2/m"}
    from django.core.cache import cache

    cache.clear()
    for i in range(2):
        _post(contributor_client, django_capture_on_commit_callbacks, f"https://b.example.org/{i}")
    html = _post(contributor_client, django_capture_on_commit_callbacks, "https://b.example.org/9")
    assert "Not started: too many requests" in html  # a 200 fragment, so htmx keeps the form as typed
    assert len(sent) == 2
    assert not Prefetch.objects.filter(url="https://b.example.org/9").exists()


@pytest.mark.django_db
def test_the_status_answers_only_about_the_asking_users_own_head_starts(
    contributor_client: Any, make_user: Any, sent: list[int], django_capture_on_commit_callbacks: Any
) -> None:
    """GET /evidence/prefetch/?url= tells no contributor whether someone else has read a URL."""
    from tests.conftest import CsrfClient

    url = "https://www.cdc.gov/measles/"
    assert "Queued" in _post(contributor_client, django_capture_on_commit_callbacks, url)
    Prefetch.objects.filter(url=url).update(state=Prefetch.State.FAILED, error_code="http_error")
    other = CsrfClient()
    other.force_login(make_user("other-contributor", "Contributor"))
    unasked = other.get("/evidence/prefetch/", {"url": url}).content.decode()
    assert url not in unasked and ERROR_TEXTS["http_error"] not in unasked
    # The owner still sees its status; so does the other, once they ask for it themselves.
    mine = contributor_client.get("/evidence/prefetch/", {"url": url}).content.decode()
    assert url in mine and ERROR_TEXTS["http_error"] in mine
    _post(other, django_capture_on_commit_callbacks, url)
    assert url in other.get("/evidence/prefetch/", {"url": url}).content.decode()


@pytest.mark.django_db
def test_a_post_for_a_url_someone_else_read_answers_as_for_an_unknown_url(
    contributor_client: Any, make_user: Any, sent: list[int], django_capture_on_commit_callbacks: Any
) -> None:
    """The head start answers only about the asking user's own head starts. A POST for a URL
    another contributor read (ready), is reading, or failed to read just now answers "Queued", as
    for a URL nobody read (never "Ready", "Fetching…" or the error), and starts this user's own head
    start (read from the shared cache)."""
    from evidence import services
    from tests.conftest import CsrfClient

    label = services.configured_model_label()
    urls = {state: f"https://www.cdc.gov/{state}/" for state in ("ready", "running", "failed")}
    for url in urls.values():
        assert "Queued" in _post(contributor_client, django_capture_on_commit_callbacks, url)
    source = EvidenceSource.objects.create(
        url=urls["ready"], url_hash=services.url_hash(urls["ready"]), cleaned_text="Measles text."
    )
    Passage.objects.create(
        source=source, embedding_model=label, chunk_index=0, text="Measles text.", char_start=0, char_end=13,
        embedding=b"\x00" * 16,
    )  # fmt: skip
    for state, url in urls.items():
        Prefetch.objects.filter(url=url).update(state=state, error_code="http_error" if state == "failed" else "")
    assert services.source_embedded(url=urls["ready"], model_label=label) is not None
    mine = _post(contributor_client, django_capture_on_commit_callbacks, urls["ready"])
    assert "Ready" in mine  # the reader's own head start still says so
    other_user = make_user("other-contributor", "Contributor")
    other = CsrfClient()
    other.force_login(other_user)

    def unnamed(html: str, url: str) -> str:  # the fragment with its URL (as typed and as in the poll link) left out
        return html.replace(url, "URL").replace(quote(url, safe=""), "URL")

    never_read = "https://www.who.int/never-read/"
    unknown = unnamed(_post(other, django_capture_on_commit_callbacks, never_read), never_read)
    queued_before = len(sent)
    for state, url in urls.items():
        html = _post(other, django_capture_on_commit_callbacks, url)
        assert unnamed(html, url) == unknown, state
        assert "Ready" not in html and "Fetching" not in html and ERROR_TEXTS["http_error"] not in html
    # The finished ones became the asking user's own head starts (queued for them); the one
    # still being read serves them as it is.
    assert len(sent) == queued_before + 2
    assert Prefetch.objects.get(url=urls["ready"]).requested_by_id == other_user.pk
    assert Prefetch.objects.get(url=urls["running"]).requested_by_id != other_user.pk


@pytest.mark.django_db
def test_a_url_someone_else_read_counts_against_the_askers_cap_like_a_new_one(
    contributor_client: Any, make_user: Any, sent: list[int], django_capture_on_commit_callbacks: Any, settings: Any
) -> None:
    """Re-queues count against the same per-user cap as first requests: a head start re-queued for
    another user is refused past their cap with the same answer as a URL nobody read."""
    from tests.conftest import CsrfClient

    settings.EVIDENCE_PREFETCH_MAX_PENDING = 1
    read = "https://www.cdc.gov/read-by-someone/"
    _post(contributor_client, django_capture_on_commit_callbacks, read)
    Prefetch.objects.filter(url=read).update(state=Prefetch.State.READY)
    other = CsrfClient()
    other.force_login(make_user("other-contributor", "Contributor"))
    assert "Queued" in _post(other, django_capture_on_commit_callbacks, "https://a.example.org/own")
    queued = len(sent)
    capped = _post(other, django_capture_on_commit_callbacks, read)
    assert "Not started: 1 of your links are already being read" in capped
    assert capped.replace(read, "URL") == _post(
        other, django_capture_on_commit_callbacks, "https://a.example.org/new"
    ).replace("https://a.example.org/new", "URL")
    assert len(sent) == queued
    assert Prefetch.objects.get(url=read).state == Prefetch.State.READY
