"""Sentences of a passage with their offsets (evidence.sentences): what the matcher may highlight."""

from __future__ import annotations

from evidence.sentences import MIN_WORDS, candidates, split_sentences

HTML_TEXT = (
    "Steps you can take\n"
    "In 1992, the American Academy of Pediatrics recommended that healthy babies be placed on their backs to "
    "sleep. Dr. Smith of the U.S. task force said the campaign worked. See the latest recommendations.\n"
    "- Feeling more thirsty than usual.\n"
    "- Urinating often."
)
PDF_TEXT = (
    "Good hand hygiene, including use of alcohol-\nbased hand rubs (ABHR) and handwashing with \nsoap and water, "
    "is critical to reduce the risk of \nspreading infections in outpatient settings. Use of \nABHR as the primary "
    "mode of hand hygiene in \nhealthcare settings is recommended by the CDC.\n\nFor these reasons, ABHR is the "
    "preferred \nmethod for hand hygiene in most clinical situations."
)


def test_it_splits_lines_and_sentences_with_exact_offsets() -> None:
    spans = split_sentences(HTML_TEXT)
    assert [s.text for s in spans] == [
        "Steps you can take",
        "In 1992, the American Academy of Pediatrics recommended that healthy babies be placed on their backs to sleep.",
        "Dr. Smith of the U.S. task force said the campaign worked.",  # abbreviations do not end it
        "See the latest recommendations.",
        "Feeling more thirsty than usual.",  # the bullet is not part of the sentence
        "Urinating often.",
    ]
    assert all(HTML_TEXT[s.start : s.end] == s.text for s in spans)


def test_it_joins_a_pdf_sentence_wrapped_over_lines() -> None:
    spans = split_sentences(PDF_TEXT)
    assert len(spans) == 3
    assert spans[0].text.startswith("Good hand hygiene") and spans[0].text.endswith("outpatient settings.")
    assert spans[1].text.startswith("Use of \nABHR") and spans[1].text.endswith("by the CDC.")
    assert spans[2].text.startswith("For these reasons")
    assert all(PDF_TEXT[s.start : s.end] == s.text for s in spans)


def test_candidates_are_real_sentences_and_adjacent_pairs() -> None:
    found = candidates(HTML_TEXT)
    singles = [c for c in found if not c.pair]
    pairs = [c for c in found if c.pair]
    assert all(c.n_words >= MIN_WORDS for c in singles)  # no heading, no two-word list stub
    assert "Steps you can take" not in [c.text for c in singles]
    assert pairs and all(HTML_TEXT[c.start : c.end] == c.text for c in pairs)
    # No pair across a paragraph (or PDF page) break.
    assert not [c for c in candidates(PDF_TEXT) if c.pair and "\n\n" in c.text]


def test_a_passage_of_stubs_still_has_candidates() -> None:
    assert [c.text for c in candidates("Home\nAbout us") if not c.pair] == ["Home", "About us"]
