"""The PHM's note features on real notes of the public 2021 sample (colin-fraser): links and their
sources, search pages and social posts, a note without a link, a note in Spanish, specificity,
the writer's classification and reasons, and the writer's record."""

from __future__ import annotations

import csv
import html
from pathlib import Path

import pytest

from crowdnotes_site.lib.communitynotes.supernotes import features as nf

TWO_LINKS = "1355780762436440067"  # "Science doesn't care about your Senate hearings..." nih.gov + newsweek.com
TWITTER_SEARCH = "1355790009744297985"  # "No such tweet exists: https://twitter.com/search?q=from%3Ablklivesmatter..."
GOOGLE_SEARCH = "1357419045855854601"  # only https://www.google.com/search?q=florida+covid+numbers...
NO_LINK = "1354856908969168903"  # "Ted Cruz supported investigations into election integrity, but ..."
SPANISH = "1354875903764017155"  # "Este tuit promueve teorías conspirativas ..."
A_TWEET = "1370470289113505796"  # "What Turgeon actually said: https://mobile.twitter.com/SportsCenter/status/..."
NUMBERS = "1355971331297136641"  # "More than 438,000 Americans have died from COVID-19 https://covid.cdc.gov/..."


@pytest.fixture(scope="module")
def rows(cn_data: Path) -> dict[str, dict[str, str]]:
    with open(cn_data / "colin-fraser" / "notes-00000.tsv", newline="", encoding="utf-8") as f:
        return {r["noteId"]: r for r in csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE)}


def _note(rows: dict[str, dict[str, str]], note_id: str) -> nf.NoteInput:
    r = rows[note_id]
    return nf.NoteInput(html.unescape(r["summary"]), r["classification"], r)


def test_a_note_with_two_links_counts_both_their_domains_and_their_sources(rows: dict[str, dict[str, str]]) -> None:
    note = _note(rows, TWO_LINKS)
    links = nf.note_links(note)
    assert [link.split("/")[2] for link in links] == ["www.nih.gov", "www.newsweek.com"]
    f = nf.note_features(note)
    assert f["n_urls"] == 2 and f["n_domains"] == 2
    assert f["cat_health_authority"] == 1 and f["cat_news"] == 1 and f["cat_social"] == 0
    assert f["n_search_pages"] == 0 and f["n_social_posts"] == 0
    # The same link stored apart from the text (an app note's evidence link) is not counted twice.
    again = nf.NoteInput(note.text, note.classification, note.reasons, links=[links[0]])
    assert nf.note_features(again)["n_urls"] == 2


@pytest.mark.parametrize("note_id", [TWITTER_SEARCH, GOOGLE_SEARCH])
def test_a_link_to_search_results_is_a_search_page_not_a_post(rows: dict[str, dict[str, str]], note_id: str) -> None:
    f = nf.note_features(_note(rows, note_id))
    assert f["n_urls"] == 1 and f["n_search_pages"] == 1 and f["n_social_posts"] == 0


def test_a_link_to_a_tweet_is_a_social_post(rows: dict[str, dict[str, str]]) -> None:
    f = nf.note_features(_note(rows, A_TWEET))
    assert f["n_social_posts"] == 1 and f["n_search_pages"] == 0 and f["cat_social"] == 1


def test_a_note_without_a_link_has_no_source_features_but_its_text(rows: dict[str, dict[str, str]]) -> None:
    note = _note(rows, NO_LINK)
    f = nf.note_features(note)
    assert all(f[name] == 0 for name in nf.SOURCES)
    assert f["log_words"] > 2 and f["english_share"] > 0.2
    assert f["n_entities"] >= 1  # "Ted Cruz" opens the note; a later capitalised name is counted


def test_a_note_in_spanish_has_few_common_english_words(rows: dict[str, dict[str, str]]) -> None:
    spanish = nf.text_features(_note(rows, SPANISH).text)
    english = nf.text_features(_note(rows, NO_LINK).text)
    assert spanish["english_share"] < 0.15 < english["english_share"]
    assert spanish["log_words"] > 3  # a long note all the same


def test_specificity_counts_numbers_but_not_the_19_of_covid_19(rows: dict[str, dict[str, str]]) -> None:
    f = nf.text_features(_note(rows, NUMBERS).text)
    assert f["n_numbers"] == 1  # 438,000
    assert f["n_entities"] == 2  # Americans, COVID
    assert nf.text_features("On March 3, 2021 the CDC said 95% of cases ...")["n_dates"] == 1
    assert nf.text_features("On March 3, 2021 the CDC said 95% of cases ...")["n_percent"] == 1


def test_classification_and_stated_reasons_come_from_the_notes_file(rows: dict[str, dict[str, str]]) -> None:
    f = nf.note_features(_note(rows, TWO_LINKS))
    assert f["reasons_known"] == 1 and f["misleading"] == 1
    assert f["reason_misleadingFactualError"] == 1 and f["reason_trustworthySources"] == 1
    assert f["reason_misleadingSatire"] == 0
    assert f["ord_believable"] == 1 and f["ord_harmful"] == 1  # BELIEVABLE_BY_MANY, CONSIDERABLE_HARM
    # A Supernote candidate: no reasons known, and the model can tell "unknown" from "no".
    candidate = nf.note_features(nf.NoteInput(_note(rows, TWO_LINKS).text))
    assert candidate["reasons_known"] == 0 and candidate["reason_trustworthySources"] == 0
    assert candidate["ord_believable"] == 0


def test_the_writer_record_shrinks_few_notes_towards_zero() -> None:
    record = nf.writer_record([0.5, 0.3, float("nan")])
    assert record.notes == 2 and record.mean_intercept == pytest.approx(0.8 / 4) and record.helpful_share == 0.5
    assert nf.writer_features(None) == {name: 0.0 for name in nf.WRITER}
    assert nf.writer_features(record)["writer_known"] == 1


def test_the_matrix_follows_the_groups_and_a_stored_models_columns(rows: dict[str, dict[str, str]]) -> None:
    notes = [_note(rows, TWO_LINKS), _note(rows, NO_LINK)]
    m = nf.matrix(notes, ["text", "sources"])
    assert m.shape == (2, len(nf.SOURCES) + len(nf.TEXT))
    assert nf.feature_names(["text", "sources"])[: len(nf.SOURCES)] == list(nf.SOURCES)  # GROUPS order
    assert m[0, 0] == 2 and m[1, 0] == 0
    assert nf.columns(notes, ["n_urls"]).tolist() == [[2.0], [0.0]]
    with pytest.raises(ValueError, match="unknown feature groups"):
        nf.feature_names(["links"])
