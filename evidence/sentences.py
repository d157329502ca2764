"""Sentences of a passage, with character offsets, and the candidates the matcher scores against
the post: each sentence and each pair of adjacent sentences (pure: regular expressions only).

Extracted HTML puts one paragraph, list item or heading per line; a PDF wraps its lines inside
sentences. So a line break ends a sentence unless the text goes on: the line does not end with
sentence punctuation and the next one starts in lower case, with a digit or a bracket
(evidence.prose.join_wrapped_lines). Inside a line, a sentence ends at . ! ? (and closing quotes)
before a capital, a digit or an opening quote, except after common abbreviations and initials.

A heading is a line of its own that is not a sentence: no closing punctuation, fewer than
HEADING_MAX_WORDS words, no list bullet, not a table row, and more text below it. It is never highlighted (nor
half of a highlighted pair): it names the topic the post is about, so it scores high against the
post while saying nothing a note could quote.
"""

from __future__ import annotations

import dataclasses
import itertools
import re
from dataclasses import dataclass

from evidence.prose import join_wrapped_lines

# Fewer words than this is a heading or a list stub: a candidate only when nothing longer exists.
MIN_WORDS = 5
# A pair is offered only when both halves are short enough that together they still read as
# "the sentence" (a quoted claim and its number, a heading-less two-line statement).
MAX_PAIR_CHARS = 400
# A line without closing punctuation and with fewer words than this, followed by more text, is a
# heading ("7. Clean out the kitchen", "Green tea vs. black tea"); a longer one is a statement
# that lacks its full stop (a quoted tweet, a list item).
HEADING_MAX_WORDS = 12

_ABBREVIATIONS = {
    "dr", "mr", "mrs", "ms", "prof", "st", "vs", "etc", "e.g", "i.e", "al", "fig", "no", "vol", "pp", "approx",
    "inc", "ltd", "co", "jr", "sr", "u.s", "u.k", "dept", "est", "min", "max", "ca", "cf", "jan", "feb", "mar",
    "apr", "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec",
}  # fmt: skip
_CLOSED = re.compile(r"[.!?…:;][\"'”’)\]]*$")
_END = re.compile(r"[.!?…]+[\"'”’)\]]*(?=\s+[\"'“‘(\[]?[A-Z0-9•\-–])")
_WORD = re.compile(r"\w+", re.UNICODE)
# The number that opens a numbered heading or list item: "7." "2.1." "iv." "B."
_NUMBERING = re.compile(r"(?:[-•*]\s*)?(?:\d{1,3}(?:\.\d{1,3})*|[ivxIVX]{1,4}|[A-Z])\.")


@dataclass(frozen=True)
class Span:
    start: int  # offsets into the passage text
    end: int
    text: str
    pair: bool = False  # two adjacent sentences
    heading: bool = False  # a line of its own that is not a sentence (see the module docstring)

    @property
    def n_words(self) -> int:
        return len(_WORD.findall(self.text))


def _abbreviation_before(text: str, end: int) -> bool:
    match = re.search(r"([\w.]+)\.$", text[:end])
    if not match:
        return False
    word = match.group(1).lower()
    # "J." "A.B." initials and the listed abbreviations do not end a sentence.
    return word in _ABBREVIATIONS or bool(re.fullmatch(r"(?:[a-z]\.)*[a-z]", word))


def _trim(text: str, start: int, end: int) -> Span | None:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    # A list bullet is not part of the sentence.
    bullet = re.match(r"[-•*›\u009f]\s+", text[start:end])
    if bullet:
        start += bullet.end()
    if start >= end or not _WORD.search(text[start:end]):
        return None
    return Span(start, end, text[start:end])


def _is_heading(text: str, span: Span, line_start: int, line_end: int) -> bool:
    """The span is its line's whole text, without bullet or closing punctuation, short, and text follows."""
    if text[line_start : span.start].strip() or text[span.end : line_end].strip():
        return False  # part of a line (or the line had a bullet, stripped by _trim)
    if _CLOSED.search(span.text) or span.n_words >= HEADING_MAX_WORDS or span.text.startswith("|"):
        return False  # a sentence, a statement without its full stop, or a table row (data)
    return bool(_WORD.search(text[line_end:]))  # the passage's last line may be a cut sentence


def split_sentences(text: str) -> list[Span]:
    """The sentences of `text` in order, as spans of the original text (offsets unchanged)."""
    joined = join_wrapped_lines(text)  # same length as text
    spans: list[Span] = []
    line_start = 0
    for line in joined.split("\n"):
        line_end = line_start + len(line)
        start = line_start
        for match in _END.finditer(joined, line_start, line_end):
            if match.group(0).startswith(".") and len(match.group(0).rstrip("\"'”’)]")) == 1:
                if _abbreviation_before(joined, match.start() + 1):
                    continue
                if _NUMBERING.fullmatch(joined[line_start : match.start() + 1].strip()):
                    continue  # "7. Clean out the kitchen": a numbered heading or list item
            span = _trim(text, start, match.end())
            if span is not None:
                spans.append(span)
            start = match.end()
        span = _trim(text, start, line_end)
        if span is not None:
            if _is_heading(text, span, line_start, line_end):
                span = dataclasses.replace(span, heading=True)
            spans.append(span)
        line_start = line_end + 1
    return spans


def candidates(text: str) -> list[Span]:
    """What may be highlighted: every sentence of MIN_WORDS+ words, and every adjacent pair of
    sentences short enough to read as one statement; never a heading. Shorter sentences and
    headings only if nothing else."""
    sentences = split_sentences(text)
    long_enough = [s for s in sentences if s.n_words >= MIN_WORDS and not s.heading]
    out = long_enough or sentences
    for first, second in itertools.pairwise(sentences):
        if first.heading or second.heading:
            continue
        if first.n_words + second.n_words < MIN_WORDS or second.end - first.start > MAX_PAIR_CHARS:
            continue
        if "\n\n" in text[first.end : second.start]:
            continue  # a paragraph (or PDF page) break: not one statement
        out.append(Span(first.start, second.end, text[first.start : second.end], pair=True))
    return out
