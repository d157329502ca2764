"""Readers on every public sample file, writers, and scoring files without the database."""

from __future__ import annotations

import csv
import functools
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

from crowdnotes_site.lib.communitynotes import scoring
from crowdnotes_site.lib.communitynotes.data import ratings as cnr
from crowdnotes_site.lib.communitynotes.data import scorer_input as scoring_tsv
from crowdnotes_site.lib.communitynotes.data import synthetic
from crowdnotes_site.lib.communitynotes.data import tsv as cio


def _data_lines(path: Path) -> int:
    with path.open() as fh:
        return sum(1 for _ in fh) - 1


def _columns(path: Path, report: cio.ReadReport, **how: object) -> SimpleNamespace:
    """The parser's blocks of `path` as one list per column (`how`: iter_rating_blocks' or, with
    line_by_line, the blocks of the line rule alone)."""
    if how.pop("line_by_line", False):
        blocks = []
        for blk in cnr.blocks(path, line_by_line=True):
            blk.count_into(report)
            blocks.append(blk)
    else:
        blocks = list(cnr.iter_rating_blocks(path, report, **how))  # type: ignore[arg-type]
    return SimpleNamespace(**_flatten(blocks))


def test_it_reads_old_notes_by_header_name(cn_data: Path) -> None:
    path = cn_data / "colin-fraser" / "notes-00000.tsv"
    report: cio.ReadReport = cio.ReadReport()
    rows = list(report.rows(cio.read_notes(path)))
    assert len(rows) == _data_lines(path) == 4880
    assert not report.skipped
    first = rows[0]
    assert first.note_id == 1354870745806086150
    assert first.author_id == "7EDD07641861C52611BCEB9F9BE7CD21"  # from the old participantId column
    assert first.classification == cio.MISLEADING
    assert first.trustworthy_sources is True
    assert {r.classification for r in rows} == {cio.MISLEADING, cio.NOT_MISLEADING}


def test_it_reads_v1_ratings_and_reports_skips(cn_data: Path) -> None:
    path = cn_data / "colin-fraser" / "ratings-00000.tsv"
    report: cio.ReadReport = cio.ReadReport()
    rows = list(report.rows(cnr.read_ratings(path)))
    assert report.read + sum(report.skipped.values()) == _data_lines(path)
    # v1 rows with neither helpful nor notHelpful set carry no answer (the reference drops them too).
    assert report.skipped == {"no helpfulness answer": 259}
    assert {r.level for r in rows} == {cnr.HELPFUL, cnr.NOT_HELPFUL}
    assert rows[0].value == 1.0
    assert "helpfulInformative" in rows[0].tags
    assert all("helpful" not in r.tags and "notHelpful" not in r.tags for r in rows)


def test_it_reads_ratings_split_across_a_folder(tmp_path: Path, cn_data: Path) -> None:
    src = cn_data / "colin-fraser" / "ratings-00000.tsv"
    lines = src.read_text().splitlines(keepends=True)
    (tmp_path / "ratings-00000.tsv").write_text("".join(lines[:5000]))
    (tmp_path / "ratings-00001.tsv").write_text(lines[0] + "".join(lines[5000:]))
    (tmp_path / "README.md").write_text("not a tsv")
    whole = list(cio.ReadReport().rows(cnr.read_ratings(src)))
    split = list(cio.ReadReport().rows(cnr.read_ratings(tmp_path)))
    assert split == whole


def test_it_reads_new_helpfulness_levels(tmp_path: Path) -> None:
    data = synthetic.generate(2_000, seed=1)
    _, ratings = synthetic.write_tsv(data, tmp_path)
    rows = list(cio.ReadReport().rows(cnr.read_ratings(ratings)))
    assert len(rows) == len(data.value)
    assert sorted({r.value for r in rows}) == sorted(set(data.value.tolist()))


def test_it_reads_old_status_history(cn_data: Path) -> None:
    path = cn_data / "mcroston" / "noteStatusHistory-00000.tsv"
    report: cio.ReadReport = cio.ReadReport()
    rows = list(report.rows(cio.read_status_history(path)))
    assert len(rows) == _data_lines(path) == 36118
    helpful = [r for r in rows if r.current_status == "CURRENTLY_RATED_HELPFUL"]
    assert len(helpful) == 1154
    # -1 means "never" in the dump; it reads as None. Old notes were Helpful before timestamps existed.
    timed = [r for r in helpful if r.first_non_nmr_ms is not None]
    assert len(timed) == 1154 - 866
    assert all(r.first_non_nmr_status and (r.first_non_nmr_ms or 0) > 1.6e12 for r in timed)


@pytest.mark.parametrize("name", ["scoredNotes_2022-12-10.tsv", "scoredNotes_2023-02-18.tsv"])
def test_it_reads_reference_scored_notes(name: str, cn_data: Path) -> None:
    path = cn_data / "shiruken" / name
    rows = list(cio.ReadReport().rows(cio.read_scored_notes(path)))
    assert len(rows) == _data_lines(path)
    helpful = [r for r in rows if r.status == "CURRENTLY_RATED_HELPFUL"]
    assert helpful
    assert all(r.intercept is not None for r in helpful)
    if name.startswith("scoredNotes_2022"):
        # Core scorer only at that time; its inertia keeps nothing Helpful below 0.39.
        assert min(r.intercept for r in helpful) == pytest.approx(0.390, abs=5e-4)  # type: ignore[type-var]
        assert all(r.num_ratings >= 5 for r in helpful)  # type: ignore[operator]


def test_it_skips_malformed_rows(tmp_path: Path) -> None:
    path = tmp_path / "ratings.tsv"
    path.write_text(
        "noteId\traterParticipantId\tcreatedAtMillis\thelpfulnessLevel\n"
        "1\tA\t5\tHELPFUL\n"
        "x\tA\t5\tHELPFUL\n"
        "2\t\t5\tHELPFUL\n"
        "3\tB\t5\tMAYBE\n"
        "4\tB\t5\n"
    )
    report: cio.ReadReport = cio.ReadReport()
    rows = list(report.rows(cnr.read_ratings(path)))
    assert [r.note_id for r in rows] == [1]
    assert report.skipped == {
        "bad noteId": 1,
        "missing rater id": 1,
        "no helpfulness answer": 1,
        "wrong number of fields": 1,
    }
    assert report.examples[0].line == 3


def test_it_writes_reference_column_names(tmp_path: Path) -> None:
    out = tmp_path / "scored_notes.tsv"
    cio.write_scored_notes(out, [cio.ScoredNoteRow(7, 6, 0.41, -0.2, "CURRENTLY_RATED_HELPFUL")])
    back = list(cio.ReadReport().rows(cio.read_scored_notes(out)))
    assert back == [cio.ScoredNoteReference(7, 0.41, -0.2, "CURRENTLY_RATED_HELPFUL", 6)]
    cio.write_helpfulness_scores(tmp_path / "h.tsv", [("A", 0.1, None)])
    with (tmp_path / "h.tsv").open() as fh:
        assert list(csv.reader(fh, delimiter="\t")) == [
            ["raterParticipantId", "coreRaterIntercept", "coreRaterFactor1"],
            ["A", "0.1", ""],
        ]


def test_it_scores_the_public_sample_files(tmp_path: Path, cn_data: Path) -> None:
    shutil.copy(cn_data / "colin-fraser" / "notes-00000.tsv", tmp_path / "notes.tsv")
    summary = scoring_tsv.score_files(
        notes_path=tmp_path / "notes.tsv",
        ratings_path=cn_data / "colin-fraser" / "ratings-00000.tsv",
        outdir=tmp_path / "out",
    )
    assert summary["notes_written"] == 4880
    assert summary["helpful"] + summary["not_helpful"] + summary["needs_more_ratings"] == 4880  # type: ignore[operator]
    assert summary["not_helpful"] > 0  # type: ignore[operator]
    with (tmp_path / "out" / "scored_notes.tsv").open() as fh:
        rows = list(csv.DictReader(fh, delimiter="\t"))
    assert list(rows[0]) == cio.SCORED_NOTES_COLUMNS + list(scoring_tsv.EXTRA_COLUMNS)
    # Every note says why: the deciding rule is the last active rule and the sentence names the status.
    labels = {"NEEDS_MORE_RATINGS": "Needs More Ratings", "CURRENTLY_RATED_HELPFUL": "Currently Rated Helpful",
              "CURRENTLY_RATED_NOT_HELPFUL": "Currently Rated Not Helpful"}  # fmt: skip
    for r in rows:
        assert r["activeRules"].split(",")[-1] == r["decidedBy"]
        assert r["explanation"].startswith(labels[r["coreRatingStatus"]] + ":")
    helpful = [r for r in rows if r["coreRatingStatus"] == "CURRENTLY_RATED_HELPFUL"]
    assert helpful and all(r["decidedBy"] in ("GeneralCRH", "GeneralCRHInertia") for r in helpful)
    assert all(int(r["negFactorRatingCount"]) + int(r["posFactorRatingCount"]) <= int(r["numRatings"]) for r in rows)
    scored = [r for r in rows if r["coreNoteIntercept"]]
    assert all(float(r["noteInterceptMax"]) >= float(r["coreNoteIntercept"]) for r in scored)
    assert scored
    assert all(int(r["numRatings"]) >= 5 for r in scored)
    assert {r["coreRatingStatus"] for r in rows} <= {
        "NEEDS_MORE_RATINGS",
        "CURRENTLY_RATED_HELPFUL",
        "CURRENTLY_RATED_NOT_HELPFUL",
    }
    with (tmp_path / "out" / "helpfulness_scores.tsv").open() as fh:
        raters = list(csv.DictReader(fh, delimiter="\t"))
    assert raters
    assert sum(float(r["coreRaterFactor1"]) < 0 for r in raters) >= len(raters) / 2


@pytest.mark.parametrize("make", ["sample", "synthetic"])
def test_it_reads_the_same_ratings_on_the_fast_path(make: str, tmp_path: Path, cn_data: Path) -> None:
    if make == "sample":
        path = cn_data / "colin-fraser" / "ratings-00000.tsv"
    else:
        _, path = synthetic.write_tsv(synthetic.generate(3_000, seed=2), tmp_path)
    slow: cio.ReadReport = cio.ReadReport()
    rows = list(slow.rows(cnr.read_ratings(path)))
    fast: cio.ReadReport = cio.ReadReport()
    cols = _columns(path, fast)
    assert (fast.read, fast.skipped) == (slow.read, slow.skipped)
    assert cols.note_id == [r.note_id for r in rows]
    assert cols.rater_id == [r.rater_id for r in rows]
    assert cols.value == [r.value for r in rows]
    assert cols.incorrect == ["notHelpfulIncorrect" in r.tags for r in rows]
    assert cols.any_not_helpful_tag == [any(t.startswith("notHelpful") for t in r.tags) for r in rows]
    assert cols.not_helpful_tags == [sum(bit for tag, bit in scoring.TAG_BIT.items() if tag in r.tags) for r in rows]
    if make == "sample":
        assert sum(1 for m in cols.not_helpful_tags if m) > 100  # the 2021 sample has tagged ratings


def test_it_keeps_the_last_of_duplicate_ratings(tmp_path: Path) -> None:
    notes = tmp_path / "notes.tsv"
    notes.write_text(
        "noteId\tnoteAuthorParticipantId\tcreatedAtMillis\ttweetId\tclassification\tsummary\n"
        "1\tA\t1700000000000\t9\tMISINFORMED_OR_POTENTIALLY_MISLEADING\tx\n"
    )
    ratings = tmp_path / "ratings.tsv"
    ratings.write_text(
        "noteId\traterParticipantId\tcreatedAtMillis\thelpfulnessLevel\n"
        "1\tB\t1700000000001\tHELPFUL\n1\tC\t1700000000002\tHELPFUL\n1\tB\t1700000000003\tNOT_HELPFUL\n"
    )
    data = scoring_tsv.load(notes, ratings)
    assert data.dropped["duplicate rating"] == 1
    by_rater = dict(zip([data.participant_ids[u] for u in data.ratings.rater], data.ratings.value, strict=True))
    assert by_rater == {"B": 0.0, "C": 1.0}


def test_it_reads_ratings_in_chunks_without_losing_rows(cn_data: Path) -> None:
    path = cn_data / "colin-fraser" / "ratings-00000.tsv"
    whole = _columns(path, cio.ReadReport())
    report: cio.ReadReport = cio.ReadReport()
    chunks = list(cnr.iter_rating_blocks(path, report, block_bytes=64 << 10))  # many small blocks
    assert len(chunks) > 10 and all(len(c.value) for c in chunks)
    assert [n for c in chunks for n in c.note_id.tolist()] == whole.note_id
    assert [t for c in chunks for t in c.not_helpful_tags.tolist()] == whole.not_helpful_tags
    assert report.read == len(whole.value)


# Lines the vectorised reader must hand to the line-by-line rules: blank lines, a missing rater,
# a bad noteId, a decimal time, v1 helpful/notHelpful answers, a padded level, a negative time,
# an unknown level, a 20-digit noteId, a short row, a long rater id, a last line without "\n".
_EDGE_RATINGS = (
    "noteId\traterParticipantId\tcreatedAtMillis\thelpfulnessLevel\tnotHelpfulIncorrect\thelpful\tnotHelpful\n"
    "1\tA\t17\tHELPFUL\t1\t\t\n\n  \n2\t\t17\tHELPFUL\t0\t\t\n x\tB\t1\tHELPFUL\t0\t\t\n3\tB\t1.5\tHELPFUL\t1.0\t\t\n"
    "4\tC\t12\t\t\t1\t\n5\tC\t12\t\t\t1\t1\n6\tD\t12\t HELPFUL \t\t\t\n7\tD\t-3\tHELPFUL\t\t\t\n8\tE\t3\tBAD\t\t\t\n"
    "99999999999999999999\tE\t3\tHELPFUL\t\t\t\n9\tF\t3\tHELPFUL\t\t\n10\t" + "A" * 90 + "\t3\tHELPFUL\t\t\t\n"
    "011\tA\t4\tNOT_HELPFUL\t\t\t"
)


def _flatten(blocks: list[cnr.RatingBlock]) -> dict[str, list[object]]:
    return {
        "note_id": [n for b in blocks for n in b.note_id.tolist()],
        "rater_id": [b.rater_keys[c] for b in blocks for c in b.rater_code.tolist()],
        "created_at_ms": [t for b in blocks for t in b.created_at_ms.tolist()],
        "value": [v for b in blocks for v in b.value.tolist()],
        "incorrect": [x for b in blocks for x in b.incorrect.tolist()],
        "any_not_helpful_tag": [x for b in blocks for x in b.any_not_helpful_tag.tolist()],
        "not_helpful_tags": [x for b in blocks for x in b.not_helpful_tags.tolist()],
    }


@pytest.mark.parametrize("make", ["sample", "synthetic", "edge", "crlf", "non-ascii"])
@pytest.mark.parametrize(("block_bytes", "workers"), [(32 << 20, 2), (997, 1), (997, 3)])
def test_the_vectorised_reader_reads_what_the_line_rule_reads(
    make: str, block_bytes: int, workers: int, tmp_path: Path, cn_data: Path
) -> None:
    path = tmp_path / "ratings.tsv"
    if make == "sample":
        path = cn_data / "colin-fraser" / "ratings-00000.tsv"
    elif make == "synthetic":
        _, path = synthetic.write_tsv(synthetic.generate(3_000, seed=2), tmp_path)
    elif make == "edge":
        path.write_bytes(_EDGE_RATINGS.encode())
    elif make == "crlf":  # a lone CR ends a line too: from that block on, read line by line
        path.write_bytes(_EDGE_RATINGS.replace("\n5\t", "\r\n5\t").replace("\n7\t", "\r7\t").encode())
    else:
        path.write_bytes(_EDGE_RATINGS.replace("\tC\t", "\tCé\t").encode())
    line_report: cio.ReadReport = cio.ReadReport()
    cols = _columns(path, line_report, line_by_line=True)
    report: cio.ReadReport = cio.ReadReport()
    # Several blocks parsed side by side must come out in file order, skips and examples too.
    got = _flatten(list(cnr.iter_rating_blocks(path, report, block_bytes=block_bytes, workers=workers)))
    assert (report.read, report.skipped, report.examples) == (
        line_report.read,
        line_report.skipped,
        line_report.examples,
    )
    assert got == {name: getattr(cols, name) for name in got}
    if make == "edge":
        assert report.read == 8 and report.skipped["bad noteId"] == 2  # 20 digits do not fit 64 bits


def test_load_numbers_notes_and_raters_in_order_of_first_appearance(tmp_path: Path) -> None:
    """The block-wise id lookup gives every note and rater the index a per-rating lookup gives
    (the order decides the solver's start, so results stay identical)."""
    data = synthetic.generate(20_000, seed=5)
    notes, ratings = synthetic.write_tsv(data, tmp_path)
    loaded = scoring_tsv.load(notes, ratings)
    ids: dict[object, int] = {}
    people: dict[object, int] = {}
    for n in cio.ReadReport().rows(cio.read_notes(notes)):
        ids.setdefault(n.note_id, len(ids))
        people.setdefault(n.author_id, len(people))
    cols = _columns(ratings, cio.ReadReport())
    note = [ids.setdefault(i, len(ids)) for i in cols.note_id]
    rater = [people.setdefault(u, len(people)) for u in cols.rater_id]
    assert loaded.note_ids == list(ids) and loaded.participant_ids == list(people)
    assert loaded.dropped["duplicate rating"] == 0
    assert sum(loaded.dropped.values()) == 0  # synthetic notes are all known and recent
    assert loaded.ratings.note.tolist() == note and loaded.ratings.rater.tolist() == rater


def test_load_numbers_notes_missing_from_the_notes_file_as_a_per_rating_lookup_would(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ratings of notes the notes file lacks (deleted notes) number them in order of first
    appearance across many blocks, then are dropped."""
    data = synthetic.generate(20_000, seed=6)
    notes, ratings = synthetic.write_tsv(data, tmp_path)
    header, *rows = notes.read_text().splitlines(keepends=True)
    notes.write_text(header + "".join(row for k, row in enumerate(rows) if k % 7))  # every 7th note deleted
    small_blocks = functools.partial(cnr.iter_rating_blocks, block_bytes=4096)
    monkeypatch.setattr(scoring_tsv.cnr, "iter_rating_blocks", small_blocks)
    loaded = scoring_tsv.load(notes, ratings)
    ids: dict[object, int] = {n.note_id: k for k, n in enumerate(cio.ReadReport().rows(cio.read_notes(notes)))}
    in_file = set(ids)
    cols = _columns(ratings, cio.ReadReport())
    for i in cols.note_id:
        ids.setdefault(i, len(ids))
    assert len(ids) > len(in_file)
    assert loaded.note_ids == list(ids)
    kept = [ids[i] for i in cols.note_id if i in in_file]
    assert loaded.dropped["rating of a deleted note"] == len(cols.note_id) - len(kept) > 0
    assert loaded.ratings.note.tolist() == kept


IMPORT_HEADER = [
    "noteId",
    "raterParticipantId",
    "createdAtMillis",
    "helpfulnessLevel",
    "notHelpfulIncorrect",
    "helpfulClear",
]


def _block(*lines: str) -> bytes:
    return "".join(line + "\n" for line in lines).encode()


def _parse(block: bytes, header: list[str], *, line_by_line: bool = False) -> cnr.RatingBlock:
    return cnr.parse_block(block, cnr.RatingLayout.from_header(header), line_by_line=line_by_line)


def _skips(rows: cnr.RatingBlock) -> tuple[int, int]:
    """(lines of a wrong field count, lines without an answer) among the block's skips."""
    reasons = [s.reason for s in rows.skips]
    return reasons.count(cnr.WRONG_FIELDS), reasons.count(cnr.NO_ANSWER)


def test_the_import_parse_reads_levels_tags_and_skips() -> None:
    block = _block(
        "12\tA\t1700000000000\tHELPFUL\t0\t1",
        "007\tB\t1700000000001\tNOT_HELPFUL\t1.0\t0",  # leading zeros: noteId 7
        "12\tA\t1700000000002\tSOMEWHAT_HELPFUL\t1\t1",
        "too\tfew",
        "\t  ",  # blank: not counted
        "12\tC\t1700000000003\t\t0\t0",  # no answer (no v1 flags in this layout): skipped
    )
    rows = _parse(block, IMPORT_HEADER)
    assert rows is not None
    assert rows.note_id.tolist() == [12, 7, 12]
    assert [rows.rater_keys[c] for c in rows.rater_code] == ["A", "B", "A"]
    assert rows.created_at_ms.tolist() == [1700000000000, 1700000000001, 1700000000002]
    assert [cnr.LEVELS[k] for k in rows.value2] == ["HELPFUL", "NOT_HELPFUL", "SOMEWHAT_HELPFUL"]
    assert rows.tag_names == ("helpfulClear", "notHelpfulIncorrect")  # sorted: tags are stored in this order
    assert rows.tags.tolist() == [0b01, 0b10, 0b11]
    assert _skips(rows) == (1, 1)


def test_the_import_parse_reads_v1_answers_and_counts_rows_without_one() -> None:
    header = ["noteId", "participantId", "createdAtMillis", "helpful", "notHelpful", "notHelpfulOther"]
    block = _block("1\tA\t5\t1\t0\t0", "1\tB\t6\t0\t1\t1", "1\tC\t7\t0\t0\t1", "1\tD\t8\t\t\t0")
    rows = _parse(block, header)
    assert rows is not None
    assert [cnr.LEVELS[k] for k in rows.value2] == ["HELPFUL", "NOT_HELPFUL"]
    assert [rows.rater_keys[c] for c in rows.rater_code] == ["A", "B"]
    assert rows.tags.tolist() == [0, 1] and _skips(rows)[1] == 2


def test_the_import_parse_of_a_block_without_ratings_is_empty_not_refused() -> None:
    for block in (b"", b"\n\n", b"  \n\t\n"):
        rows = _parse(block, IMPORT_HEADER)
        assert rows is not None and len(rows.note_id) == 0 and rows.rater_keys == []
        assert _skips(rows) == (0, 0)  # blank lines are not counted


@pytest.mark.parametrize(
    ("line", "by_the_rule"),
    [
        (" 12\tA\t1\tHELPFUL\t0\t0", 1),  # spaces around the noteId: the rule reads them
        ("+12\tA\t1\tHELPFUL\t0\t0", 1),
        ("12\t\t1\tHELPFUL\t0\t0", 1),  # no rater: a skip reason of its own
        ("12\tA\t-1\tHELPFUL\t0\t0", 1),  # negative createdAtMillis
        ("12\tA\t1\t HELPFUL\t0\t0", 1),
        ("12\tA\t1\thelpful\t0\t0", 1),
        ("12\tÄ\t1\tHELPFUL\t0\t0", 0),  # not ASCII: UTF-8, as pyarrow reads it
        ("12\tA\t1\tHELPFUL\t0\t0\r", 0),  # a CRLF line end: pyarrow's too
        ("99999999999999999999\tA\t1\tHELPFUL\t0\t0", 1),  # more than 64 bits
        ("12\tA\x00\t1\tHELPFUL\t0\t0", 1),  # a control character
    ],
)
def test_the_import_parse_leaves_every_other_line_to_the_general_rules(line: str, by_the_rule: int) -> None:
    good = "12\tA\t1\tHELPFUL\t0\t0"
    assert _parse(_block(good, good), IMPORT_HEADER).slow_lines == 0
    parsed = _parse(_block(good, line, good), IMPORT_HEADER)
    assert parsed.slow_lines == by_the_rule
    rule = _parse(_block(good, line, good), IMPORT_HEADER, line_by_line=True)
    assert _flatten([parsed]) == _flatten([rule]) and parsed.skips == rule.skips
