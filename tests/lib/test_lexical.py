"""crowdnotes_site.lib.lexical: the word overlaps the baselines and the sentence choice use."""

from __future__ import annotations

import pytest

from crowdnotes_site.lib.lexical import content_words, idf_overlap, lexical_overlap, term_coverage

POST = "Only children get type 1 diabetes; adults with high blood sugar always have type 2."


def test_a_word_every_text_repeats_counts_for_little_and_a_specific_one_for_much() -> None:
    texts = [
        "Diabetes is a disease of blood sugar; diabetes can develop at any age.",
        "Type 1 diabetes can start at any age, in adults too.",
        "Diabetes care means checking blood sugar often.",
    ]
    scores = idf_overlap(POST, texts)
    # Each shares "diabetes"/"blood"/"sugar" (the page's topic); only the second has "type", "1" and "adults".
    assert scores[1] == max(scores) and scores[1] > 2 * scores[0]
    assert all(0.0 <= s <= 1.0 for s in scores)


def test_short_numbers_count_for_the_matcher_but_not_for_the_baselines() -> None:
    assert (
        idf_overlap("type 2", ["type 1 diabetes", "type 2 diabetes"])[1]
        > idf_overlap("type 2", ["type 1 diabetes", "type 2 diabetes"])[0]
    )
    assert "2" not in content_words("type 2 diabetes") and "2" in content_words("type 2", short_numbers=True)
    assert lexical_overlap("vaccines for kids", "the vaccinated kids") == pytest.approx(1.0)  # stems meet


def test_no_words_no_overlap() -> None:
    assert idf_overlap("the and of", ["anything at all"]) == [0.0]
    assert idf_overlap(POST, []) == []


def test_a_key_term_counts_only_when_the_text_holds_all_of_it() -> None:
    terms = ["nsw hospitals", "ventilators", "covid 19"]
    nsw = "NSW Health: 12 COVID-19 patients are in our hospitals, none on ventilators."
    queensland = "Queensland hospitals treat 40 COVID-19 patients; 3 are on ventilators."
    assert term_coverage(terms, nsw) == 1.0
    # "hospitals" alone is not "nsw hospitals": the page about another state misses that term.
    assert term_coverage(terms, queensland) == pytest.approx(2 / 3)
    assert term_coverage(terms, "") == 0.0
    assert term_coverage(["the", "of it"], nsw) == 0.0  # no content words: nothing to count


def test_it_lists_the_terms_a_text_touches() -> None:
    from crowdnotes_site.lib.lexical import terms_touched

    terms = ["feather duvet", "lung disease", "type 2 diabetes"]
    assert terms_touched(terms, "Feather bedding and type 1 diabetes.") == ["feather duvet", "type 2 diabetes"]
    assert terms_touched(terms, "Steroids helped.") == []
    # Singular or plural: the crude six-letter stem alone would keep "duvets" and "duvet" apart.
    assert terms_touched(["duvets", "lungs"], "A duvet inflamed his lung.") == ["duvets", "lungs"]
