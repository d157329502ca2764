"""The one ratings rule on edge lines (crowdnotes_site/lib/communitynotes/data/ratings.py).

Each case is one data line and what every reader of ratings makes of it: the parser's vectorised
path, its line rule alone and the row view here, the database import in
tests/notes/test_import_communitynotes.py. Where the parsers that came before disagreed, the
case says what the others did; the rule is the scorer's line rule, with two changes: a control
character skips its line everywhere (the import already skipped it; the database cannot store
NUL) and a createdAtMillis outside the years 1-9999 is a bad one (the import crashed on it, the
scorer kept it or crashed on "1e400").
"""

from __future__ import annotations

from pathlib import Path

import pytest

from crowdnotes_site.lib.communitynotes.data import files as download_file
from crowdnotes_site.lib.communitynotes.data import ratings as cnr
from crowdnotes_site.lib.communitynotes.data import tsv as cio

HEADER = [
    "noteId", "raterParticipantId", "createdAtMillis", "helpfulnessLevel", "notHelpfulIncorrect", "helpfulClear",
    "helpful", "notHelpful",
]  # fmt: skip
GOOD = {"noteId": "12", "raterParticipantId": "A", "createdAtMillis": "1700000000000", "helpfulnessLevel": "HELPFUL",
        "notHelpfulIncorrect": "0", "helpfulClear": "1", "helpful": "", "notHelpful": ""}  # fmt: skip
MS = 1700000000000
Outcome = tuple[object, ...]


def line(**edit: str) -> str:
    return "\t".join({**GOOD, **edit}.values())


def rating(
    note: int = 12, ms: int = MS, level: str = "HELPFUL", rater: str = "A", tags: tuple[str, ...] = ("helpfulClear",)
) -> Outcome:
    return ("rating", note, rater, ms, level, tags)


def skip(reason: str) -> Outcome:
    return ("skip", reason)


IGNORED: Outcome = ("ignored",)

# name: (line, outcome by the rule, what the earlier parsers did where they differed). The
# earlier parsers: the scorer's line rule and its numpy scan ("scorer"), the row reader of the
# --no-copy import ("rows"), the import's pyarrow parse and its SQL staging ("SQL").
CASES: dict[str, tuple[str, Outcome, str]] = {
    "plain": (line(), rating(), ""),
    "note +12": (line(noteId="+12"), rating(), "SQL: bad noteId"),
    "note -5": (line(noteId="-5"), rating(-5), "SQL: bad noteId"),
    "note spaces": (line(noteId=" 12 "), rating(), ""),
    "note 12.0": (line(noteId="12.0"), skip(cnr.BAD_NOTE), "rows: noteId 12"),
    "note 1.7e12": (line(noteId="1.7e12"), skip(cnr.BAD_NOTE), "rows: noteId 1700000000000"),
    "note 007": (line(noteId="007"), rating(7), ""),
    "note empty": (line(noteId=""), skip(cnr.BAD_NOTE), ""),
    "note x": (line(noteId="x"), skip(cnr.BAD_NOTE), ""),
    "note 1_2": (line(noteId="1_2"), rating(12), "SQL: bad noteId"),
    "note 2**63-1": (line(noteId=str(2**63 - 1)), rating(2**63 - 1), ""),
    "note 2**63": (line(noteId=str(2**63)), skip(cnr.BAD_NOTE), "rows and SQL: a note id, then note not imported"),
    "note 20 digits": (line(noteId="9" * 20), skip(cnr.BAD_NOTE), "rows and SQL: imported where such a note was"),
    "ms +12": (line(createdAtMillis="+12"), rating(ms=12), "SQL: bad createdAtMillis"),
    "ms -5": (line(createdAtMillis="-5"), rating(ms=-5), ""),
    "ms 12.7": (line(createdAtMillis="12.7"), rating(ms=12), "SQL: bad createdAtMillis"),
    "ms 1.7e12": (line(createdAtMillis="1.7e12"), rating(), "SQL: bad createdAtMillis"),
    "ms spaces": (line(createdAtMillis=" 12 "), rating(ms=12), ""),
    "ms empty": (line(createdAtMillis=""), skip(cnr.BAD_TIME), ""),
    "ms True": (line(createdAtMillis="True"), skip(cnr.BAD_TIME), ""),
    "ms nan": (line(createdAtMillis="nan"), skip(cnr.BAD_TIME), ""),
    "ms 1_000": (line(createdAtMillis="1_000"), rating(ms=1000), "SQL: bad createdAtMillis"),
    "ms year 31 million": (line(createdAtMillis="1" + "0" * 18), skip(cnr.BAD_TIME), "scorer: kept; import: crashed"),
    "ms 1e400": (line(createdAtMillis="1e400"), skip(cnr.BAD_TIME), "scorer and rows: crashed (OverflowError)"),
    "ms last of year 9999": (line(createdAtMillis=str(cnr.MAX_MS)), rating(ms=cnr.MAX_MS), ""),
    "rater empty": (line(raterParticipantId=""), skip(cnr.NO_RATER), ""),
    "rater space": (line(raterParticipantId=" "), rating(rater=" "), ""),
    "rater NUL": (line(raterParticipantId="A\x00B"), skip(cnr.CONTROL), "scorer and rows: rater 'A\\x00B'"),
    "rater non-ASCII": (line(raterParticipantId="Cé"), rating(rater="Cé"), ""),
    "rater backslash quote": (line(raterParticipantId='B\\N"'), rating(rater='B\\N"'), ""),
    "level padded": (line(helpfulnessLevel=" HELPFUL "), rating(), ""),
    "level lower case": (line(helpfulnessLevel="helpful"), skip(cnr.NO_ANSWER), ""),
    "level unknown": (line(helpfulnessLevel="BAD"), skip(cnr.NO_ANSWER), ""),
    "level unknown, helpful 1": (line(helpfulnessLevel="BAD", helpful="1"), rating(), ""),
    "level empty": (line(helpfulnessLevel=""), skip(cnr.NO_ANSWER), ""),
    "helpful 1": (line(helpfulnessLevel="", helpful="1"), rating(), ""),
    "helpful 1.0": (line(helpfulnessLevel="", helpful="1.0"), rating(), ""),
    "helpful True": (line(helpfulnessLevel="", helpful="True"), skip(cnr.NO_ANSWER), "rows and SQL: HELPFUL"),
    "helpful ' 1'": (line(helpfulnessLevel="", helpful=" 1"), skip(cnr.NO_ANSWER), "rows and SQL: HELPFUL"),
    "helpful 2": (line(helpfulnessLevel="", helpful="2"), skip(cnr.NO_ANSWER), ""),
    "notHelpful 1": (line(helpfulnessLevel="", notHelpful="1"), rating(level="NOT_HELPFUL"), ""),
    "both flags 1": (line(helpfulnessLevel="", helpful="1", notHelpful="1"), rating(level="NOT_HELPFUL"), ""),
    "both flags 0": (line(helpfulnessLevel="", helpful="0", notHelpful="0"), skip(cnr.NO_ANSWER), ""),
    "level beats a flag": (line(helpfulnessLevel="NOT_HELPFUL", helpful="1"), rating(level="NOT_HELPFUL"), ""),
    "tag 1.0": (line(notHelpfulIncorrect="1.0"), rating(tags=("helpfulClear", "notHelpfulIncorrect")), ""),
    "tag True": (line(notHelpfulIncorrect="True"), rating(), ""),
    "tag ' 1'": (line(notHelpfulIncorrect=" 1"), rating(), ""),
    "tag 2": (line(notHelpfulIncorrect="2"), rating(), ""),
    "short": ("\t".join(list(GOOD.values())[:5]), skip(cnr.WRONG_FIELDS), ""),
    "long": (line() + "\tx", skip(cnr.WRONG_FIELDS), ""),
    "blank": ("", IGNORED, ""),
    "spaces": ("   ", IGNORED, "rows: wrong number of fields"),
    "tabs only": ("\t" * (len(HEADER) - 1), skip(cnr.BAD_NOTE), "SQL: also counted -1 wrong number of fields"),
    "CRLF": (line() + "\r", rating(), ""),
}


def _outcomes(blk: cnr.RatingBlock) -> list[Outcome]:
    out: list[Outcome] = [skip(s.reason) for s in blk.skips]
    for note, code, ms, v2, bits in zip(blk.note_id.tolist(), blk.rater_code.tolist(), blk.created_at_ms.tolist(),
                                        blk.value2.tolist(), blk.tags.tolist(), strict=True):  # fmt: skip
        tags = tuple(t for k, t in enumerate(blk.tag_names) if bits >> k & 1)
        out.append(("rating", note, blk.rater_keys[code], ms, cnr.LEVELS[v2], tags))
    return out


def _row_view(path: Path) -> list[Outcome]:
    out: list[Outcome] = []
    for r in cnr.read_ratings(path):
        if isinstance(r, cio.Skipped):
            out.append(skip(r.reason))
        else:
            out.append(("rating", r.note_id, r.rater_id, r.created_at_ms, r.level, tuple(sorted(r.tags))))
    return out


@pytest.mark.parametrize("name", list(CASES))
def test_each_reader_reads_an_edge_line_by_the_one_rule(name: str, tmp_path: Path) -> None:
    text, expected, _earlier = CASES[name]
    block = (text + "\n").encode()
    lay = cnr.RatingLayout.from_header(HEADER)
    want = [] if expected == IGNORED else [expected]
    assert _outcomes(cnr.parse_block(block, lay)) == want
    assert _outcomes(cnr.parse_block(block, lay, line_by_line=True)) == want
    path = tmp_path / "ratings.tsv"
    path.write_bytes(("\t".join(HEADER) + "\n").encode() + block)
    assert _row_view(path) == want


def test_every_edge_line_in_one_file_keeps_its_line_number_and_order(tmp_path: Path) -> None:
    path = tmp_path / "ratings.tsv"
    path.write_bytes(("\t".join([*HEADER]) + "\n" + "".join(text + "\n" for text, _o, _e in CASES.values())).encode())
    report = cio.ReadReport()
    blocks = list(cnr.iter_rating_blocks(path, report, block_bytes=256))
    ratings = [o for blk in blocks for o in _outcomes(blk) if o[0] == "rating"]
    assert ratings == [o for _t, o, _e in CASES.values() if o[0] == "rating"]
    skipped = [(2 + k, o[1]) for k, (_t, o, _e) in enumerate(CASES.values()) if o[0] == "skip"]
    assert [(e.line, e.reason) for e in report.examples] == skipped[:20]
    assert sum(report.skipped.values()) == len(skipped) and report.read == len(ratings)


def test_text_that_is_not_utf8_is_refused_naming_its_line(tmp_path: Path) -> None:
    path = tmp_path / "ratings.tsv"
    path.write_bytes(
        ("\t".join(HEADER) + "\n" + line() + "\n").encode() + line().encode().replace(b"A", b"\xff") + b"\n"
    )
    with pytest.raises(download_file.DownloadError, match=r"ratings.tsv:3: not UTF-8 text"):
        list(cnr.iter_rating_blocks(path, cio.ReadReport()))
