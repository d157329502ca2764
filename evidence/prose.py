"""How much a passage reads like prose, and how much a match score is demoted when it does not
(pure: regular expressions only).

Sentence embeddings score keyword-dense text high: a reference list whose titles repeat the
post's words ("Diabetes Care. 2022; doi:..."), a table of case counts, a menu of headings. Such a
passage is not what a note writer quotes. `prose_score` is 1.0 for running sentences and falls
towards 0 with three signals:
  - citations: lines shaped like a reference (DOI, PMID, "et al.", "Accessed", journal
    "2022;61(6):980-7" volume/page runs, numbered author lists), and citation markers per word
    for PDF reference sections, whose entries are broken across lines;
  - short lines: lines of fewer than 5 words (navigation, headings, table cells, figure labels),
    counted by the share of the passage's words they hold;
  - sentence shape: the share of words in sentences (6+ words ending in . ! ? or :).
The matcher multiplies a passage's cosine by `demotion(prose)` to rank passages; it never
drops one, and the cosine it reports for the chosen passage stays the raw one.
"""

from __future__ import annotations

import re

# How far a passage with no prose at all is pushed down: its cosine times 1 - DEMOTION.
DEMOTION = 0.5

_WORD = re.compile(r"\w+", re.UNICODE)
_STRONG = re.compile(
    r"\bdoi:|\bdoi\.org/|\b10\.\d{4,9}/\S+|\bPMID\b|\bPMCID\b|\bet al\b\.?|\bAccessed\b|Crossref|Google Scholar|"
    r"\bISBN\b|\bRetrieved\b|\[PubMed\]|\bibid\b",
    re.IGNORECASE,
)
_WEAK = re.compile(
    r"\b(?:19|20)\d{2}\s*[;:]\s*\d+|"  # 2022;61 or 2015:980
    r"\b\d+\s*\(\d+\)\s*:\s*\d+|"  # 61(6):980
    r"\b\d+\s*[-–]\s*\d+\s*\.?\s*$|"  # page range at line end
    r"\b(?:19|20)\d{2}\b|"  # a year
    r"https?://\S+|www\.\S+|"
    r"\b(?:Vol|pp|No)\.\s*\d+|"
    r"\b(?:Press|Publishers?|Publishing|Elsevier|Wiley|McGraw[- ]Hill)\b|"  # a publisher
    r"\b[A-Z][a-z]+, [A-Z]{2}:",  # "Washington, DC:"
    re.IGNORECASE,
)
# "12. Smith J, ..." or "- Moro PL, Perez-Vilar S, ..." : a numbered or bulleted author list.
_AUTHORS = re.compile(r"^\s*(?:[-•*]\s*)?(?:\[?\d{1,3}[.)\]]\s*)?(?:[A-Z][\w'’-]+,?\s+[A-Z]{1,3}\b[,.;]?\s*){2,}")
_SENTENCE = re.compile(r"[^.!?:\n]*?\w[^.!?:\n]*[.!?:](?=[\s\"'”’)\]]|$)")


# The start of a numbered reference entry: "28. Scheckler WE, Brimhall D," or "- 7. Hurwitz ES ,Haber M".
_ENTRY = re.compile(
    r"^\s*(?:[-•*]\s*)?\[?\d{1,3}[.)\]]\s*(?:\d{1,3}\.\s*)?[A-Z][\w'’-]+,?\s+(?:[A-Z]{1,3}\b|[A-Z]\.)",
    re.MULTILINE,
)


def _entry_words(text: str) -> int:
    """Words in numbered reference entries, each running to the next entry (they wrap over lines)."""
    starts = [m.start() for m in _ENTRY.finditer(text)]
    if len(starts) < 2:
        return 0
    words = 0
    for start, end in zip(starts, [*starts[1:], len(text)], strict=True):
        entry = text[start:end]
        if _STRONG.search(entry) or _WEAK.search(entry):
            words += _words(entry)
    return words


def _words(text: str) -> int:
    return len(_WORD.findall(text))


def _reference_line(line: str) -> bool:
    strong = len(_STRONG.findall(line))
    weak = len(_WEAK.findall(line))
    authors = 3 if _AUTHORS.match(line) else 0  # "Moro PL, Arana J, ..." is a reference by itself
    markers = strong + 0.5 * weak + authors
    shaped = (strong >= 1 and strong + weak >= 2) or weak >= 3 or (authors and weak >= 1)
    # A reference entry is short and dense with markers; a paragraph citing one study is not.
    return bool(shaped) and markers * 20 >= _words(line)


# A line break inside a sentence (PDF columns, hard-wrapped text): the line does not end a
# sentence, and the next one goes on in lower case (or, in hard-wrapped text, a digit, quote or
# bracket), or the break splits a hyphenated word, or (hard-wrapped text only) a line filling the column ends in a lower-case word
# or a comma before a capital ("... adopted by the\nWorld Health Organization"). A heading is
# shorter than the column; extracted HTML has no column (one paragraph, list item or heading per
# line), so there a capital always starts a new line's sentence: "7. Clean out the kitchen" stays
# off the sentence below it.
_BREAK = re.compile(r"[ \t]*\n[ \t]*")
_GOES_ON = re.compile(r"[a-z0-9(\[“\"‘']")
# Hard-wrapped text is wrapped at a column: 90% of its lines are at most this many characters (PDF
# text here: 60-75). Extracted HTML paragraphs run to hundreds of characters on one line.
WRAP_WIDTH = 100
# A line at least this share of the column wide is a full line, one the wrap may have cut.
FULL_LINE = 0.7


def column_width(text: str) -> int | None:
    """The width hard-wrapped text is wrapped at (the 90th percentile of its line lengths), or None
    when the text is not hard-wrapped (fewer than 3 lines, or lines longer than WRAP_WIDTH)."""
    lengths = sorted(len(line.strip()) for line in text.splitlines() if line.strip())
    if len(lengths) < 3:
        return None
    width = lengths[int(0.9 * (len(lengths) - 1))]
    return width if width <= WRAP_WIDTH else None


def join_wrapped_lines(text: str) -> str:
    """The text with hard-wrapped lines joined (same length: each joining newline becomes a space)."""
    out = list(text)
    width = column_width(text)
    for match in _BREAK.finditer(text):
        before = text[max(0, match.start() - 200) : match.start()]
        after = text[match.end() : match.end() + 1]
        line = before.rsplit("\n", 1)[-1]
        if not line.strip() or not after or re.search(r"[.!?:;][\"'”’)\]]*$", line):
            continue
        # Without a column a digit, quote or bracket starts a new paragraph ("Summary\n3-D scanners").
        goes_on = _GOES_ON.match(after) if width is not None else after.islower()
        wrapped = bool(goes_on) or line.endswith("-")
        full = width is not None and len(line.strip()) >= FULL_LINE * width
        if not wrapped and full and after.isupper() and len(line.split()) >= 5:
            wrapped = bool(re.search(r"(?:\b[a-z][\w'’-]*|,)$", line))
        if wrapped:
            for i in range(match.start(), match.end()):
                if text[i] == "\n":
                    out[i] = " "
    return "".join(out)


def prose_features(text: str) -> dict[str, float]:
    """The three signals, each in [0, 1]: citations (0 = none), short_lines, sentences."""
    text = join_wrapped_lines(text)
    lines = [line for line in text.splitlines() if line.strip()]
    total = max(1, _words(text))
    if not lines:
        return {"citations": 0.0, "short_lines": 0.0, "sentences": 0.0}
    ref_words = sum(_words(line) for line in lines if _reference_line(line))
    markers = len(_STRONG.findall(text)) + 0.5 * len(_WEAK.findall(text))
    # About one marker per 12 words is a reference section; prose citing a study or two has under
    # half that density.
    density = min(1.0, max(0.0, (markers / total * 12 - 0.5) / 0.4))
    citations = max(ref_words / total, _entry_words(text) / total, density * 0.9)
    short_words = sum(_words(line) for line in lines if _words(line) < 5)
    short_lines = min(1.0, short_words / total * 3)  # a third of the words in stubs reads as a menu
    sentence_words = sum(_words(m.group(0)) for m in _SENTENCE.finditer(text) if _words(m.group(0)) >= 6)
    sentences = min(1.0, sentence_words / total)
    return {"citations": min(1.0, citations), "short_lines": short_lines, "sentences": sentences}


def prose_score(text: str) -> float:
    """1.0 for running prose, down to 0.0 for a reference list, a table or a menu."""
    f = prose_features(text)
    not_prose = max(f["citations"], 0.5 * f["short_lines"] + 0.5 * (1 - f["sentences"]))
    return round(max(0.0, 1.0 - not_prose), 4)


def demotion(prose: float) -> float:
    """The factor a passage's cosine is multiplied by for ranking: 1.0 for prose, 1 - DEMOTION for none."""
    return 1.0 - DEMOTION * (1.0 - min(1.0, max(0.0, prose)))
