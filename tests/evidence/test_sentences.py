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


# Extracted HTML: one heading, paragraph or list item per line (lines of a paragraph's length), as
# trafilatura gives healthline's and WebMD's pages.
HEADED_HTML = (
    "Binge eating disorder is the most common eating disorder in the United States, and many people "
    "with it feel a loss of control while eating.\n"
    "7. Clean out the kitchen\n"
    "Having lots of junk food or trigger foods in the kitchen can make it much easier to binge eat.\n"
    "Green tea vs. black tea\n"
    "Green and black tea come from the same plant, Camellia sinensis, but they are processed differently.\n"
    "This is particularly important if you:\n"
    "- are pregnant or nursing\n"
    "Here are answers to the most common questions about intermittent fasting."
)


def test_a_heading_is_not_glued_to_the_sentence_below_it() -> None:
    texts = [s.text for s in split_sentences(HEADED_HTML)]
    # Five-word headings that end in a lower-case word, each followed by a capital: in
    # hard-wrapped (PDF) text such a line is a wrapped sentence; in HTML each line stands alone.
    assert "7. Clean out the kitchen" in texts
    assert "Having lots of junk food or trigger foods in the kitchen can make it much easier to binge eat." in texts
    assert "Green tea vs. black tea" in texts
    assert "are pregnant or nursing" in texts  # a list item stays off the next paragraph too
    assert "Here are answers to the most common questions about intermittent fasting." in texts


def test_a_heading_is_never_a_candidate_nor_half_of_a_pair() -> None:
    spans = split_sentences(HEADED_HTML)
    assert [s.text for s in spans if s.heading] == ["7. Clean out the kitchen", "Green tea vs. black tea"]
    shown = [c.text for c in candidates(HEADED_HTML)]
    assert not [t for t in shown if "Clean out the kitchen" in t or "Green tea vs. black tea" in t]
    # The list item is a statement without its full stop, not a heading; the passage's last line
    # may be a sentence cut by the passage's edge, not a heading either.
    assert "are pregnant or nursing" in [s.text for s in spans if not s.heading]
    assert not split_sentences("Intro text that goes on.\nThe passage ends in the middle of a sentence")[-1].heading


def test_a_capital_after_a_full_pdf_line_still_continues_the_sentence() -> None:
    # The same "5+ words, lower-case end, capital next" break inside a PDF column is a wrap.
    pdf = (
        "Healthy diet\n"
        "Consuming a healthy diet throughout life helps to\n"
        "prevent malnutrition in all its forms as well as a\n"
        "range of noncommunicable diseases, as set out by the\n"
        "World Health Organization in its guidance on diet.\n"
        "Key facts"
    )
    texts = [s.text for s in split_sentences(pdf)]
    assert texts[0] == "Healthy diet"
    assert texts[1].startswith("Consuming") and texts[1].endswith("guidance on diet.")
    assert "set out by the\nWorld Health" in texts[1]
