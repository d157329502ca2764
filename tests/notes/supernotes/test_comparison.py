"""The blind comparison by raters: server-side order, stable per assignment and
varying across assignments; a page that hides origin and authors; one answer per rater and pair;
roles, CSRF and own notes; the Supernote's win rate with its Wilson interval."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from django.db import IntegrityError, transaction
from django.urls import reverse

from crowdnotes_site.lib.communitynotes.supernotes import comparison
from notes.models import Note, NoteStatus, Participant, Post, SupernoteComparison, SupernoteRun
from notes.roles import ADMIN, CONTRIBUTOR, RATER
from notes.services import participant_for_user, post_create
from notes.supernotes import selectors, services
from tests.conftest import CsrfClient

HUMAN_TEXT = "Large trials found no link between the vaccine and autism. https://example.org/trials"
WEAK_TEXT = "This is probably wrong, I think."
SUPER_TEXT = (
    "Studies of millions of children show no autism link; the 1998 paper was retracted. https://example.org/retraction"
)


def _answer(preferred: str = "A", a: int = 4, b: int = 2) -> dict[str, Any]:
    data: dict[str, Any] = {"preferred": preferred}
    for key in comparison.STATEMENT_KEYS:
        data[f"a_{key}"] = a
        data[f"b_{key}"] = b
    return data


def _pair(make_user: Any, author_name: str = "alice-author") -> tuple[Post, Note, Note, Any]:
    """A post with a scored human note by a named user, a weaker note, and a proposed Supernote."""
    author = make_user(author_name, CONTRIBUTOR, RATER)
    other_author = Participant.objects.create(external_id="ext-author-2")
    post = post_create(text="Vaccines cause autism, a new report shows.")
    best = Note.objects.create(post=post, author=participant_for_user(user=author), text=HUMAN_TEXT,
                               intercept=0.31, factor=0.1, num_ratings=12, origin=Note.Origin.AUGMENTED)  # fmt: skip
    Note.objects.create(post=post, author=other_author, text=WEAK_TEXT, intercept=0.05, factor=0.0, num_ratings=9)
    supernote = Note.objects.create(post=post, author=None, text=SUPER_TEXT, origin=Note.Origin.SUPERNOTE)
    return post, supernote, best, author


def _client(user: Any) -> CsrfClient:
    client = CsrfClient()
    client.force_login(user)
    return client


# --- pure ------------------------------------------------------------------------------------


def _wilson_by_quadratic(k: int, n: int, z: float) -> tuple[float, float]:
    """The interval's ends as the roots of (p̂ - p)² = z² p (1 - p) / n (an independent derivation)."""
    p_hat = k / n
    a = 1 + z * z / n
    b = -(2 * p_hat + z * z / n)
    c = p_hat * p_hat
    roots = sorted(np.roots([a, b, c]).real)
    return float(roots[0]), float(roots[1])


def test_wilson_interval_known_values() -> None:
    # Textbook values (95 %): 0/10 -> [0, 0.2775]; 1/10 -> [0.0179, 0.4042].
    assert comparison.wilson_interval(0, 10) == pytest.approx((0.0, 0.2775), abs=5e-5)
    assert comparison.wilson_interval(1, 10) == pytest.approx((0.0179, 0.4042), abs=5e-5)
    for k, n in [(3, 7), (50, 60), (75, 100), (200, 266)]:
        assert comparison.wilson_interval(k, n) == pytest.approx(_wilson_by_quadratic(k, n, comparison.Z_95), abs=1e-9)
    assert comparison.wilson_interval(0, 0) == (0.0, 1.0)
    with pytest.raises(ValueError):
        comparison.wilson_interval(5, 3)


def test_summarize_counts_wins_and_means_per_side() -> None:
    scores = dict.fromkeys(comparison.STATEMENT_KEYS, 5)
    low = dict.fromkeys(comparison.STATEMENT_KEYS, 2)
    result = comparison.summarize([(True, scores, low), (True, scores, low), (False, low, {"clear": 4})])
    assert (result.n, result.wins) == (3, 2)
    assert result.rate == pytest.approx(2 / 3)
    assert (result.low, result.high) == comparison.wilson_interval(2, 3)
    clear = next(s for s in result.statements if s.key == "clear")
    assert (clear.supernote_mean, clear.supernote_n) == (pytest.approx(4.0), 3)
    assert (clear.other_mean, clear.other_n) == (pytest.approx(8 / 3), 3)
    sources = next(s for s in result.statements if s.key == "sources")
    assert (sources.other_mean, sources.other_n) == (pytest.approx(2.0), 2)
    empty = comparison.summarize([])
    assert (empty.n, empty.rate, empty.low, empty.high) == (0, None, 0.0, 1.0)
    assert not math.isnan(empty.low)


# --- assignment and order --------------------------------------------------------------------


def test_pair_is_the_supernote_and_the_highest_intercept_note(make_user: Any) -> None:
    post, supernote, best, _ = _pair(make_user)
    pair = selectors.comparison_pair(post=post)
    assert pair is not None and (pair.supernote, pair.other) == (supernote, best)


def test_order_is_drawn_per_assignment_and_stable_on_reload(make_user: Any) -> None:
    post, *_ = _pair(make_user)
    orders = []
    for i in range(40):
        rater = make_user(f"rater-{i}", RATER)
        client = _client(rater)
        start = client.post(reverse("comparison_start", args=[post.pk]))
        assert start.status_code == 302
        again = client.post(reverse("comparison_start", args=[post.pk]))
        assert again["Location"] == start["Location"]  # same assignment, not a new draw
        item = SupernoteComparison.objects.get(rater__user=rater)
        first = client.get(start["Location"]).content.decode()
        second = client.get(start["Location"]).content.decode()
        a_first = first.index(SUPER_TEXT) < first.index(HUMAN_TEXT)
        assert a_first == (second.index(SUPER_TEXT) < second.index(HUMAN_TEXT)) == item.supernote_first
        orders.append(item.supernote_first)
    # Both orders occur (all 40 the same: probability 2 x 2^-40).
    assert 0 < sum(orders) < len(orders)


def test_comparison_page_hides_origin_author_and_status(make_user: Any) -> None:
    post, *_ = _pair(make_user)
    rater = make_user("blind-rater", RATER)
    client = _client(rater)
    page = client.get(client.post(reverse("comparison_start", args=[post.pk]))["Location"])
    assert page.status_code == 200
    html = page.content.decode()
    assert SUPER_TEXT in html and HUMAN_TEXT in html and WEAK_TEXT not in html
    lowered = html.lower()
    assert "supernote" not in lowered
    assert "alice-author" not in lowered and "ext-author-2" not in lowered
    for label in Note.Origin.labels:
        assert label not in html, label
    for label in NoteStatus.labels:
        assert label not in html, label
    assert "0.31" not in html and "origin" not in lowered and "author" not in lowered
    assert "Note A" in html and "Note B" in html


# --- answering -------------------------------------------------------------------------------


def test_answer_is_stored_on_the_right_side_and_a_second_answer_is_refused(make_user: Any) -> None:
    post, supernote, best, _ = _pair(make_user)
    rater = make_user("answering-rater", RATER)
    client = _client(rater)
    url = client.post(reverse("comparison_start", args=[post.pk]))["Location"]
    item = SupernoteComparison.objects.get(rater__user=rater)
    # Prefer whichever letter the Supernote got; score Note A 5 and Note B 1.
    preferred = "A" if item.supernote_first else "B"
    saved = client.post(url, _answer(preferred, a=5, b=1))
    assert saved.status_code == 302 and saved["Location"] == reverse("rating_queue")
    item.refresh_from_db()
    assert item.supernote_preferred is True and item.answered_at is not None
    sn, other = (5, 1) if item.supernote_first else (1, 5)
    assert item.supernote_scores == dict.fromkeys(comparison.STATEMENT_KEYS, sn)
    assert item.other_scores == dict.fromkeys(comparison.STATEMENT_KEYS, other)

    again = client.post(url, _answer("A" if preferred == "B" else "B", a=1, b=1))
    assert again.status_code == 400 and b"already answered" in again.content
    item.refresh_from_db()
    assert item.supernote_preferred is True and item.supernote_scores == dict.fromkeys(comparison.STATEMENT_KEYS, sn)
    with pytest.raises(services.ComparisonError, match="already answered"):
        services.comparison_answer(item=item, rater=item.rater, preferred="A", scores_a={}, scores_b={})
    # The database refuses a second row for the same rater and pair.
    with pytest.raises(IntegrityError), transaction.atomic():
        SupernoteComparison.objects.create(rater=item.rater, supernote=supernote, other_note=best, supernote_first=True)
    # The pair leaves the rater's queue once answered.
    assert selectors.comparisons_available(participant=item.rater) == []


def test_missing_answers_are_shown_as_errors(make_user: Any) -> None:
    post, *_ = _pair(make_user)
    client = _client(make_user("hasty-rater", RATER))
    url = client.post(reverse("comparison_start", args=[post.pk]))["Location"]
    data = _answer()
    del data["preferred"], data["b_neutral"]
    page = client.post(url, data)
    assert page.status_code == 400
    assert b"Choose the more helpful note" in page.content and b"Rate Note B on this statement." in page.content
    assert SupernoteComparison.objects.get().answered_at is None


def test_csrf_is_required(make_user: Any) -> None:
    post, *_ = _pair(make_user)
    client = _client(make_user("csrf-rater", RATER))
    assert client.post(reverse("comparison_start", args=[post.pk]), csrf=False).status_code == 403
    url = client.post(reverse("comparison_start", args=[post.pk]))["Location"]
    assert client.post(url, _answer(), csrf=False).status_code == 403
    assert SupernoteComparison.objects.get().answered_at is None


# --- permissions -----------------------------------------------------------------------------


def test_a_rater_cannot_compare_a_pair_with_their_own_note(make_user: Any) -> None:
    post, _, _, author = _pair(make_user)
    client = _client(author)
    assert client.post(reverse("comparison_start", args=[post.pk])).status_code == 403
    assert not SupernoteComparison.objects.exists()
    assert selectors.comparisons_available(participant=participant_for_user(user=author)) == []
    assert b"Compare two notes" not in client.get(reverse("rating_queue")).content


def test_anonymous_and_non_raters_are_refused(make_user: Any, anon_client: Any) -> None:
    post, *_ = _pair(make_user)
    start = reverse("comparison_start", args=[post.pk])
    assert "/accounts/login/" in anon_client.post(start)["Location"]
    assert "/accounts/login/" in anon_client.get(reverse("comparison_results"))["Location"]
    contributor = _client(make_user("only-contributor", CONTRIBUTOR))
    assert contributor.post(start).status_code == 403
    rater_client = _client(make_user("rater-a", RATER))
    url = rater_client.post(start)["Location"]
    assert anon_client.get(url).status_code == 302
    assert contributor.get(url).status_code == 403
    # Another rater cannot open or answer someone else's comparison.
    intruder = _client(make_user("rater-b", RATER))
    assert intruder.get(url).status_code == 404
    assert intruder.post(url, _answer()).status_code == 404
    assert rater_client.get(reverse("comparison_results")).status_code == 403


def test_a_post_without_a_pair_says_so(make_user: Any) -> None:
    post = post_create(text="One note only.")
    Note.objects.create(post=post, text="Only note.")
    client = _client(make_user("rater-c", RATER))
    response = client.post(reverse("comparison_start", args=[post.pk]), follow=True)
    assert b"no proposed Supernote together with another note" in response.content


# --- entry points and results ----------------------------------------------------------------


def test_rating_queue_and_post_page_offer_the_comparison(make_user: Any) -> None:
    post, supernote, _best, _ = _pair(make_user)
    client = _client(make_user("rater-d", RATER))
    queue = client.get(reverse("rating_queue")).content.decode()
    assert "Compare two notes" in queue and reverse("comparison_start", args=[post.pk]) in queue
    SupernoteRun.objects.create(post=post, state=SupernoteRun.State.DONE, proposed_note=supernote)
    page = client.get(reverse("post_detail", args=[post.pk])).content.decode()
    assert "Compare two notes" in page and reverse("comparison_start", args=[post.pk]) in page
    # Not offered to those without the Rater role.
    contributor = _client(make_user("contrib-e", CONTRIBUTOR))
    assert (
        reverse("comparison_start", args=[post.pk])
        not in contributor.get(reverse("post_detail", args=[post.pk])).content.decode()
    )


def test_admin_sees_win_rate_with_wilson_interval_and_statement_means(make_user: Any) -> None:
    post, *_ = _pair(make_user)
    for i, wins in enumerate([True, True, True, False]):
        rater = participant_for_user(user=make_user(f"r{i}", RATER))
        item = services.comparison_assign(rater=rater, post=post)
        sn_letter, other_letter = ("A", "B") if item.supernote_first else ("B", "A")
        scores = {
            sn_letter: dict.fromkeys(comparison.STATEMENT_KEYS, 4),
            other_letter: dict.fromkeys(comparison.STATEMENT_KEYS, 2),
        }
        services.comparison_answer(item=item, rater=rater, preferred=sn_letter if wins else other_letter,
                                   scores_a=scores["A"], scores_b=scores["B"])  # fmt: skip
    services.comparison_assign(rater=participant_for_user(user=make_user("unanswered", RATER)), post=post)
    page = _client(make_user("boss", ADMIN, staff=True)).get(reverse("comparison_results"))
    html = page.content.decode()
    low, high = comparison.wilson_interval(3, 4)
    assert "Supernote preferred in 3 of 4 comparisons: 75.0%" in html
    assert f"{100 * low:.1f}%–{100 * high:.1f}%" in html and "Wilson" in html and "n = 4" in html
    assert "study" in html and "75.2%" in html
    assert html.count("<td>4.00</td>") == 5 and html.count("<td>2.00</td>") == 5
