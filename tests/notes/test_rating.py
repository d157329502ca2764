"""Rating service, rating queue and rating pages (with and without htmx)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from notes import selectors
from notes.models import Note, Rating, RatingLevel
from notes.roles import RATER
from notes.services import RatingError, participant_for_user, post_create, rating_submit

pytestmark = pytest.mark.django_db


@pytest.fixture
def note(contributor: Any) -> Note:
    post = post_create(text="Vitamin C megadoses cure sepsis.", flagged_by=contributor)
    return Note.objects.create(
        post=post,
        author=participant_for_user(user=contributor),
        text="Trials found no mortality benefit from high-dose vitamin C in sepsis.",
        evidence_urls=["https://example.org/vitamin-c-trial"],
    )


def test_it_keeps_one_rating_per_rater_and_lets_it_change(rater: Any, note: Note) -> None:
    me = participant_for_user(user=rater)
    _, created = rating_submit(rater=me, note=note, level=RatingLevel.HELPFUL, tags=["helpfulGoodSources"])
    assert created
    _, created = rating_submit(rater=me, note=note, level=RatingLevel.NOT_HELPFUL, tags=["notHelpfulIncorrect"])
    assert not created
    rating = Rating.objects.get(note=note)
    assert (rating.level, rating.tags) == (RatingLevel.NOT_HELPFUL, ["notHelpfulIncorrect"])
    note.refresh_from_db()
    assert note.num_ratings == 1


def test_it_refuses_authors_rating_their_own_note(contributor: Any, note: Note) -> None:
    with pytest.raises(RatingError):
        rating_submit(rater=participant_for_user(user=contributor), note=note, level=RatingLevel.HELPFUL)
    assert not Rating.objects.exists()


def test_it_refuses_tags_of_another_level(rater: Any, note: Note) -> None:
    me = participant_for_user(user=rater)
    with pytest.raises(RatingError):
        rating_submit(rater=me, note=note, level=RatingLevel.HELPFUL, tags=["notHelpfulIncorrect"])
    rating_submit(
        rater=me, note=note, level=RatingLevel.SOMEWHAT_HELPFUL, tags=["helpfulClear", "notHelpfulMissingKeyPoints"]
    )
    assert Rating.objects.get().level == RatingLevel.SOMEWHAT_HELPFUL


def test_it_rates_without_javascript(rater_client: Any, rater: Any, note: Note) -> None:
    page = rater_client.get(f"/rate/{note.pk}/")
    assert page.status_code == 200
    html = page.content.decode()
    assert note.text in html and note.post.text in html and "https://example.org/vitamin-c-trial" in html
    response = rater_client.post(
        f"/rate/{note.pk}/", {"level": "HELPFUL", "helpful_tags": ["helpfulGoodSources", "helpfulClear"]}
    )
    assert response.status_code == 302 and response["Location"] == "/rate/"
    rating = Rating.objects.get(note=note, rater=participant_for_user(user=rater))
    assert rating.tags == ["helpfulClear", "helpfulGoodSources"]
    # The form comes back filled in with the rater's own answer.
    assert 'value="HELPFUL"' in rater_client.get(f"/rate/{note.pk}/").content.decode().split("checked")[0][-200:]


def test_it_rates_with_htmx_returning_only_the_form(rater_client: Any, note: Note) -> None:
    response = rater_client.post(f"/rate/{note.pk}/", {"level": "NOT_HELPFUL"}, headers={"HX-Request": "true"})
    assert response.status_code == 200
    html = response.content.decode()
    assert html.lstrip().startswith('<form method="post"') and "<html" not in html
    assert "your rating is saved" in html
    assert Rating.objects.get(note=note).level == RatingLevel.NOT_HELPFUL


def test_it_shows_errors_for_wrong_tags(rater_client: Any, note: Note) -> None:
    data = {"level": "HELPFUL", "not_helpful_tags": ["notHelpfulIncorrect"]}
    response = rater_client.post(f"/rate/{note.pk}/", data)
    assert response.status_code == 400
    assert "do not go with a Helpful rating" in response.content.decode()
    # With htmx the form fragment comes back as 200 (htmx does not swap error responses).
    response = rater_client.post(f"/rate/{note.pk}/", data, headers={"HX-Request": "true"})
    assert response.status_code == 200
    html = response.content.decode()
    assert "do not go with a Helpful rating" in html and "<html" not in html
    assert not Rating.objects.exists()


def test_it_never_shows_other_ratings_before_rating(rater_client: Any, make_user: Any, note: Note) -> None:
    other = make_user("olga", RATER)
    rating_submit(
        rater=participant_for_user(user=other), note=note, level=RatingLevel.NOT_HELPFUL, tags=["notHelpfulIncorrect"]
    )
    html = rater_client.get(f"/rate/{note.pk}/").content.decode()
    assert "checked" not in html
    assert "olga" not in html


def test_it_forbids_rating_own_note_on_the_page(make_user: Any, note: Note, contributor: Any) -> None:
    from django.contrib.auth.models import Group

    from tests.conftest import CsrfClient

    contributor.groups.add(Group.objects.get(name=RATER))
    client = CsrfClient()
    client.force_login(contributor)
    assert client.get(f"/rate/{note.pk}/").status_code == 403
    assert client.post(f"/rate/{note.pk}/", {"level": "HELPFUL"}).status_code == 403
    assert not Rating.objects.exists()


@pytest.mark.parametrize("who", ["anon", "contributor"])
def test_it_refuses_non_raters(who: str, request: pytest.FixtureRequest, note: Note) -> None:
    client = request.getfixturevalue(f"{who}_client")
    for response in (client.get("/rate/"), client.get(f"/rate/{note.pk}/"), client.post(f"/rate/{note.pk}/", {})):
        if who == "anon":
            assert response.status_code == 302 and "/accounts/login/" in response["Location"]
        else:
            assert response.status_code == 403
    assert not Rating.objects.exists()


def test_it_lists_notes_needing_this_raters_side_first(make_user: Any, rater: Any, contributor: Any) -> None:
    author = participant_for_user(user=contributor)
    post = post_create(text="5G towers spread viruses.", flagged_by=contributor)
    rated_by_my_side, rated_by_other_side, unrated = (
        Note.objects.create(post=post, author=author, text=t) for t in ("mine", "theirs", "none")
    )
    me = participant_for_user(user=rater)
    me.rater_factor = -0.6
    me.save()
    for i, (note, factor) in enumerate(
        [(rated_by_my_side, -0.5), (rated_by_my_side, -0.7), (rated_by_other_side, 0.8)]
    ):
        other = participant_for_user(user=make_user(f"r{i}", RATER))
        other.rater_factor = factor
        other.save(update_fields=["rater_factor"])
        rating_submit(rater=other, note=note, level=RatingLevel.HELPFUL)
    queue = selectors.rating_queue(participant=me)
    # Notes lacking my side first (fewest ratings first among them), the one my side rated last.
    assert [n.text for n in queue] == ["none", "theirs", "mine"]
    rating_submit(rater=me, note=unrated, level=RatingLevel.HELPFUL)
    assert [n.text for n in selectors.rating_queue(participant=me)] == ["theirs", "mine"]
    # Authors never see their own notes in the queue.
    assert selectors.rating_queue(participant=author) == []


def test_a_new_rating_counts_on_its_raters_side_until_the_next_scoring(
    make_user: Any, contributor: Any, note: Note
) -> None:
    for i, factor in enumerate([-0.4, 0.3, 0.0, None]):
        other = participant_for_user(user=make_user(f"side{i}", RATER))
        other.rater_factor = factor
        other.save(update_fields=["rater_factor"])
        rating_submit(rater=other, note=note, level=RatingLevel.HELPFUL)
        rating_submit(rater=other, note=note, level=RatingLevel.NOT_HELPFUL)  # a change counts once
    note.refresh_from_db()
    # A factor of 0 is the non-negative side, as in the scorer; a rater without a factor has no side yet.
    assert (note.num_ratings, note.neg_side_ratings, note.pos_side_ratings) == (4, 1, 2)


@pytest.mark.parametrize("factor", [-0.5, 0.5, None])
def test_the_rating_queue_reads_through_its_index_without_sorting(
    make_user: Any, contributor: Any, note: Note, factor: float | None
) -> None:
    from tests.support.plans import index_plan

    me = participant_for_user(user=make_user("queue", RATER))
    me.rater_factor = factor
    plan = index_plan(selectors.rating_queue_queryset(participant=me)[:20])
    expected = {-0.5: "note_queue_neg_side", 0.5: "note_queue_pos_side", None: "note_queue_min_side"}[factor]
    assert expected in plan, plan
    assert "Sort" not in plan, plan


def test_it_lists_the_queue_page_for_raters(rater_client: Any, note: Note) -> None:
    html = rater_client.get("/rate/").content.decode()
    assert f"/rate/{note.pk}/" in html
    assert "Rescore all notes now" not in html  # raters cannot trigger scoring


def test_it_shows_scores_to_admins_only(admin_client: Any, rater_client: Any, note: Note) -> None:
    Note.objects.filter(pk=note.pk).update(status="CURRENTLY_RATED_HELPFUL", intercept=0.4567, factor=-0.1234)
    admin_html = admin_client.get(f"/posts/{note.post_id}/").content.decode()
    rater_html = rater_client.get(f"/posts/{note.post_id}/").content.decode()
    for html in (admin_html, rater_html):
        assert "Currently Rated Helpful" in html
    assert "0.457" in admin_html and "-0.123" in admin_html
    assert "0.457" not in rater_html and "-0.123" not in rater_html


def test_it_offers_the_rating_link_to_raters_only(contributor_client: Any, rater_client: Any, note: Note) -> None:
    assert f"/rate/{note.pk}/" not in contributor_client.get(f"/posts/{note.post_id}/").content.decode()
    assert f"/rate/{note.pk}/" in rater_client.get(f"/posts/{note.post_id}/").content.decode()


def test_it_never_offers_raters_their_own_notes(make_user: Any, rater_client: Any, rater: Any, note: Note) -> None:
    own = Note.objects.create(post=note.post, author=participant_for_user(user=rater), text="My own note.")
    html = rater_client.get(f"/posts/{note.post_id}/").content.decode()
    assert f"/rate/{note.pk}/" in html and f"/rate/{own.pk}/" not in html
    assert rater_client.get(f"/rate/{own.pk}/").status_code == 403
    with pytest.raises(RatingError, match="your own note"):
        rating_submit(rater=participant_for_user(user=rater), note=own, level=RatingLevel.HELPFUL)
    assert own.can_be_rated_by(participant_for_user(user=make_user("other", RATER)))
    assert not own.can_be_rated_by(None)


def test_it_shows_the_tags_of_the_chosen_level_with_htmx(rater_client: Any, note: Note) -> None:
    full = rater_client.get(f"/rate/{note.pk}/").content.decode()
    assert "Cites high-quality sources" in full and "Incorrect information" in full  # no JS: both groups
    htmx = {"HX-Request": "true"}
    helpful = rater_client.get(f"/rate/{note.pk}/?level=HELPFUL", headers=htmx).content.decode()
    assert "Cites high-quality sources" in helpful and "Incorrect information" not in helpful
    assert "<html" not in helpful
    not_helpful = rater_client.get(
        f"/rate/{note.pk}/?level=NOT_HELPFUL&not_helpful_tags=notHelpfulIncorrect", headers=htmx
    ).content.decode()
    assert "Cites high-quality sources" not in not_helpful and "Incorrect information" in not_helpful
    tag_input = re.search(r'<input[^>]*value="notHelpfulIncorrect"[^>]*>', not_helpful)
    assert tag_input is not None and "checked" in tag_input.group(0)  # kept while switching level
    somewhat = rater_client.get(f"/rate/{note.pk}/?level=SOMEWHAT_HELPFUL", headers=htmx).content.decode()
    assert "Cites high-quality sources" in somewhat and "Incorrect information" in somewhat


@pytest.mark.django_db
def test_an_imported_post_without_text_is_shown_as_such(rater_client: Any) -> None:
    from django.urls import reverse

    from notes.models import Note, Post

    post = Post.objects.create(
        text="Post 1353031711349739523 (imported from the public Community Notes data; text not included)",
        text_hash="p", external_id="1353031711349739523", text_available=False,
    )  # fmt: skip
    note = Note.objects.create(post=post, text="An imported note.")
    marker = "Imported post 1353031711349739523: its text is not in the public Community Notes data"
    assert marker in rater_client.get(reverse("rate_note", args=[note.pk])).content.decode()
    assert marker in rater_client.get(reverse("post_detail", args=[post.pk])).content.decode()


def test_it_explains_why_a_rater_cannot_open_their_own_note_and_where_to_go(
    rater_client: Any, rater: Any, note: Note
) -> None:
    own = Note.objects.create(post=note.post, author=participant_for_user(user=rater), text="My own note.")
    response = rater_client.get(f"/rate/{own.pk}/")
    html = response.content.decode()
    assert response.status_code == 403
    assert "authors cannot rate their own notes" in html
    assert 'href="/rate/"' in html  # back to the rating queue


def test_it_refuses_an_empty_rating_post_with_a_message(rater_client: Any, note: Note) -> None:
    response = rater_client.post(f"/rate/{note.pk}/", {})
    assert response.status_code == 400
    assert "This field is required" in response.content.decode()
    assert not Rating.objects.exists()
