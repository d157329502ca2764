"""The one ratings parser: the public download's ratings files as compact arrays.

Every reader of ratings goes through `parse_block`: the columnar conversion and the scorer's
loader (`iter_rating_blocks`), the database import (a block per checkpointed chunk) and the row
view `read_ratings`. Columns are found by header name, so every schema version reads (old v1
files carry participantId and helpful / notHelpful flags instead of helpfulnessLevel).

The rule, line by line (fields split on tabs, no quoting, a line ends at LF, CR or CRLF):
1. a line holding a control character (C0 other than tab, LF and CR, or DEL) is skipped:
   "control character (e.g. NUL) in the line" (the database cannot store NUL, and every reader
   keeps the same ratings);
2. an empty or whitespace-only line is ignored, not counted; any other line with a field count
   other than the header's is skipped: "wrong number of fields";
3. noteId: Python's int() of the field (surrounding whitespace, a sign, leading zeros and digit
   underscores allowed), within 64 bits; else "bad noteId";
4. the rater: raterParticipantId (or, without that column, participantId), not empty; else
   "missing rater id";
5. createdAtMillis: an integer as for noteId, or a decimal or exponent number truncated toward
   zero ("12.7" is 12, "1.7e12"), within the years 1 to 9999 (what a date holds); else
   "bad createdAtMillis";
6. the answer: helpfulnessLevel, whitespace stripped, HELPFUL, SOMEWHAT_HELPFUL or NOT_HELPFUL;
   else notHelpful "1" or "1.0" is NOT_HELPFUL, else helpful "1" or "1.0" is HELPFUL; else
   "no helpfulness answer";
7. a tag (a helpful* or notHelpful* column other than those answers) is set by "1" or "1.0".
The first failing step names the skip. Text must be UTF-8: anything else is a DownloadError
naming the file and line.

A block of whole lines is parsed by pyarrow's CSV reader and checked with compute functions;
only the lines it refuses (a wrong field count) and those whose fields are not plain (digits, an
exact level word or an empty level with the v1 flags) go through `_line_rule`, which spells out
the rule above, so the rows, values, skips and their order do not depend on which lines took
which path. A block holding a lone CR (a line end pyarrow and numpy would count differently) is
read by `_line_rule` alone.
"""

from __future__ import annotations

import io
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import BinaryIO

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from crowdnotes_site.lib.communitynotes.data import files as download_file
from crowdnotes_site.lib.communitynotes.data.tsv import ReadReport, Skipped, tsv_files
from crowdnotes_site.lib.communitynotes.scoring.inputs import NOT_HELPFUL_TAGS

HELPFUL = "HELPFUL"
SOMEWHAT_HELPFUL = "SOMEWHAT_HELPFUL"
NOT_HELPFUL = "NOT_HELPFUL"
LEVELS = (NOT_HELPFUL, SOMEWHAT_HELPFUL, HELPFUL)  # index: value2, twice the rating's value
LEVEL_VALUES = {HELPFUL: 1.0, SOMEWHAT_HELPFUL: 0.5, NOT_HELPFUL: 0.0}

CONTROL = "control character (e.g. NUL) in the line"
WRONG_FIELDS = "wrong number of fields"
BAD_NOTE = "bad noteId"
NO_RATER = "missing rater id"
BAD_TIME = "bad createdAtMillis"
NO_ANSWER = "no helpfulness answer"

# Rating columns that are answers, not tags, although their names start like tags.
_NOT_TAGS = {"helpful", "notHelpful", "helpfulnessLevel", "helpfulNum"}
_ONES = frozenset({"1", "1.0"})
_CONTROL_BYTES = bytes([*range(0x00, 0x09), 0x0B, 0x0C, *range(0x0E, 0x20), 0x7F])
_IS_CONTROL = np.zeros(256, dtype=bool)
_IS_CONTROL[list(_CONTROL_BYTES)] = True
_CONTROL_CHARS = frozenset(chr(b) for b in _CONTROL_BYTES)
# createdAtMillis of 0001-01-01 and of 9999-12-31 23:59:59.999 UTC: the range of a date.
MIN_MS, MAX_MS = -62_135_596_800_000, 253_402_300_799_999
_INT64_MAX = str(2**63 - 1)
MAX_TAGS = 64  # tag columns a header may have: one bit each of a uint64


def is_tag(column: str) -> bool:
    """A rating column that is a reason tag (helpful* / notHelpful*), not an answer."""
    return (column.startswith("helpful") or column.startswith("notHelpful")) and column not in _NOT_TAGS


@dataclass(frozen=True)
class RatingLayout:
    """Where a ratings file keeps each column (positions from its header; a repeated name: its
    last column), and its tag columns sorted by name (bit k of a block's `tags`: tags[k])."""

    width: int
    note: int | None
    rater: int | None
    time: int | None
    level: int | None
    helpful: int | None
    not_helpful: int | None
    tags: tuple[tuple[str, int], ...]  # (name, position)

    @classmethod
    def from_header(cls, header: list[str], file: str = "") -> RatingLayout:
        pos = {h.strip(): i for i, h in enumerate(header)}
        tags = tuple(sorted((name, i) for name, i in pos.items() if is_tag(name)))
        if len(tags) > MAX_TAGS:
            raise download_file.DownloadError(f"{file}:1: {len(tags)} tag columns, more than the {MAX_TAGS} read")
        return cls(
            width=len(header),
            note=pos.get("noteId"),
            rater=pos.get("raterParticipantId", pos.get("participantId")),
            time=pos.get("createdAtMillis"),
            level=pos.get("helpfulnessLevel"),
            helpful=pos.get("helpful"),
            not_helpful=pos.get("notHelpful"),
            tags=tags,
        )

    @property
    def tag_names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.tags)


@dataclass
class RatingBlock:
    """A block's ratings in file order, and its skipped lines (in line order)."""

    note_id: np.ndarray  # int64
    rater: pa.DictionaryArray  # int32 codes into the block's distinct ids, in order of first appearance
    created_at_ms: np.ndarray  # int64
    value2: np.ndarray  # int8: twice the value (0 Not helpful, 1 Somewhat, 2 Helpful); LEVELS[value2]
    tags: np.ndarray  # uint64, bit k: tag_names[k]
    tag_names: tuple[str, ...]
    skips: list[Skipped]
    slow_lines: int = 0  # lines read by _line_rule (for tests and benchmarks)

    def __len__(self) -> int:
        return len(self.note_id)

    def count_into(self, report: ReadReport) -> None:
        report.read += len(self)
        for skip in self.skips:
            report.add_skip(skip)

    @property
    def rater_keys(self) -> list[str]:
        return self.rater.dictionary.to_pylist()  # type: ignore[no-any-return]

    @property
    def rater_code(self) -> np.ndarray:
        return np.asarray(self.rater.indices.to_numpy(zero_copy_only=False), dtype=np.int32)

    @property
    def value(self) -> np.ndarray:
        """float32 (0, 0.5, 1: exact)."""
        return self.value2.astype(np.float32) * np.float32(0.5)

    def _tag(self, name: str) -> np.ndarray:
        if name not in self.tag_names:
            return np.zeros(len(self), dtype=bool)
        return (self.tags >> np.uint64(self.tag_names.index(name)) & np.uint64(1)).astype(bool)

    @property
    def incorrect(self) -> np.ndarray:
        return self._tag("notHelpfulIncorrect")

    @property
    def any_not_helpful_tag(self) -> np.ndarray:
        mask = sum(1 << k for k, name in enumerate(self.tag_names) if name.startswith("notHelpful"))
        return (self.tags & np.uint64(mask)) != 0

    @property
    def not_helpful_tags(self) -> np.ndarray:
        """uint16, bit k: the scorer's NOT_HELPFUL_TAGS[k]."""
        out = np.zeros(len(self), dtype=np.uint16)
        for k, name in enumerate(NOT_HELPFUL_TAGS):
            if name in self.tag_names:
                out[self._tag(name)] |= np.uint16(1 << k)
        return out


# One rating read by _line_rule: note id, rater id, createdAtMillis, value2, tag bits.
_Row = tuple[int, str, int, int, int]


def _int(value: str) -> int | None:
    try:
        return int(float(value)) if ("." in value or "e" in value.lower()) else int(value)
    except (ValueError, OverflowError):  # not a number; inf
        return None


def _line_rule(line: str, lay: RatingLayout) -> _Row | str | None:
    """One line (its line end removed or not): the rating, its skip reason, or None (blank)."""
    line = line.rstrip("\r\n")
    if not _CONTROL_CHARS.isdisjoint(line):
        return CONTROL
    f = line.split("\t")
    if len(f) != lay.width:
        return WRONG_FIELDS if line.strip() else None
    try:
        note_id = int(f[lay.note])  # type: ignore[index]
    except (TypeError, ValueError):
        return BAD_NOTE
    if not -(2**63) <= note_id < 2**63:  # ids are 64-bit (the database column too)
        return BAD_NOTE
    if lay.rater is None or not f[lay.rater]:
        return NO_RATER
    created = _int(f[lay.time]) if lay.time is not None else None
    if created is None or not MIN_MS <= created <= MAX_MS:
        return BAD_TIME
    level = f[lay.level].strip() if lay.level is not None else ""
    if level in LEVEL_VALUES:
        value2 = LEVELS.index(level)
    elif lay.not_helpful is not None and f[lay.not_helpful] in _ONES:
        value2 = 0
    elif lay.helpful is not None and f[lay.helpful] in _ONES:
        value2 = 2
    else:
        return NO_ANSWER
    tags = sum(1 << k for k, (_name, i) in enumerate(lay.tags) if f[i] in _ONES)
    return note_id, f[lay.rater], created, value2, tags


def _block_of_rows(rows: list[tuple[int, _Row]], skips: list[tuple[int, str]], lay: RatingLayout,
                   file: str, first_line: int, slow: int) -> RatingBlock:  # fmt: skip
    """A block from _line_rule's rows ((line index, row) each, in line order) and skips."""
    rater = pa.array([r[1] for _i, r in rows], pa.string())
    return RatingBlock(
        note_id=np.array([r[0] for _i, r in rows], dtype=np.int64),
        rater=pc.dictionary_encode(rater),
        created_at_ms=np.array([r[2] for _i, r in rows], dtype=np.int64),
        value2=np.array([r[3] for _i, r in rows], dtype=np.int8),
        tags=np.array([r[4] for _i, r in rows], dtype=np.uint64),
        tag_names=lay.tag_names,
        skips=[Skipped(file, first_line + i, reason) for i, reason in skips],
        slow_lines=slow,
    )


def _by_lines(block: bytes, lay: RatingLayout, file: str, first_line: int) -> RatingBlock:
    """Every line of `block` by _line_rule (universal newlines: LF, CR or CRLF ends a line)."""
    rows: list[tuple[int, _Row]] = []
    skips: list[tuple[int, str]] = []
    lines = io.StringIO(_decoded(block, file, first_line), newline="").readlines()
    for i, line in enumerate(lines):
        row = _line_rule(line, lay)
        if isinstance(row, str):
            skips.append((i, row))
        elif row is not None:
            rows.append((i, row))
    return _block_of_rows(rows, skips, lay, file, first_line, len(lines))


def _decoded(block: bytes, file: str, first_line: int) -> str:
    try:
        return block.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = first_line + block[: exc.start].count(b"\n")
        raise download_file.DownloadError(f"{file}:{line}: not UTF-8 text ({exc.reason})") from exc


def universal_lines(block: bytes) -> int:
    """The lines of `block` as a text file opened with newline="" counts them (LF, CR, CRLF)."""
    crs = block.count(b"\r")
    n = block.count(b"\n") + crs - (block.count(b"\r\n") if crs else 0)
    return n + (bool(block) and block[-1:] not in (b"\n", b"\r"))


def parse_block(
    block: bytes, lay: RatingLayout, *, file: str = "", first_line: int = 2, line_by_line: bool = False
) -> RatingBlock:
    """The ratings of `block` (whole lines of one file, its header excluded; its first line is
    line `first_line` of the file), by the rule of this module's docstring. `line_by_line`:
    every line through _line_rule (the rule's own spelling; tests compare the two)."""
    lone_cr = b"\r" in block and block.count(b"\r") != block.count(b"\r\n")
    if line_by_line or lone_cr or None in (lay.note, lay.rater, lay.time):
        return _by_lines(block, lay, file, first_line)
    if not block.isascii():
        _decoded(block, file, first_line)  # refuse what is not UTF-8, naming the line
    lines = _Lines.of(block)
    table = _Table.read(block, lay, lines)
    if table is None:
        return _by_lines(block, lay, file, first_line)
    fast = _Fast.check(table.col, lay, lines.control[table.row_line])
    skips = [(int(i), NO_ANSWER) for i in table.row_line[fast.ok & (fast.value2 < 0)].tolist()]
    # The rest, line by line: lines pyarrow refused and rows the checks did not take.
    slow = np.union1d(table.refused, table.row_line[~fast.ok])
    slow_rows: list[tuple[int, _Row]] = []
    for i in slow.tolist():
        row = _line_rule(block[lines.starts[i] : lines.ends[i]].decode("utf-8"), lay)
        if isinstance(row, str):
            skips.append((i, row))
        elif row is not None:
            slow_rows.append((i, row))
    skips.sort()
    rating = fast.ok & (fast.value2 >= 0)
    assert lay.rater is not None
    rater = table.col[lay.rater].filter(pa.array(rating))
    out = (fast.note_id[rating], fast.created[rating], fast.value2[rating], fast.tags[rating])
    if slow_rows:  # the rule's ratings back into file order
        order = np.argsort(np.r_[table.row_line[rating], [i for i, _r in slow_rows]], kind="stable")
        rater = pa.concat_arrays([rater, pa.array([r[1] for _i, r in slow_rows], pa.string())]).take(order)
        out = tuple(
            np.r_[part, np.array([r[k] for _i, r in slow_rows], dtype=part.dtype)][order]
            for k, part in zip((0, 2, 3, 4), out, strict=True)
        )
    return RatingBlock(
        note_id=out[0],
        rater=pc.dictionary_encode(rater),
        created_at_ms=out[1],
        value2=out[2],
        tags=out[3],
        tag_names=lay.tag_names,
        skips=[Skipped(file, first_line + i, reason) for i, reason in skips],
        slow_lines=len(slow),
    )


@dataclass(frozen=True)
class _Lines:
    """Where each line of a block is (byte offsets), which are empty and which hold a control
    character."""

    starts: np.ndarray
    ends: np.ndarray  # where each line's LF is (or the block's end, for a last line without one)
    nonempty: np.ndarray  # indices of the lines pyarrow reads: not empty once a CRLF's CR is off
    control: np.ndarray  # bool per line

    @classmethod
    def of(cls, block: bytes) -> _Lines:
        a = np.frombuffer(block, dtype=np.uint8)
        ends = np.flatnonzero(a == 10)
        if block and block[-1:] != b"\n":
            ends = np.append(ends, len(block))
        starts = np.zeros(len(ends), dtype=np.int64)
        starts[1:] = ends[:-1] + 1
        stops = ends.copy()  # where each line's text ends: before its CR, in a CRLF line
        if b"\r" in block:
            stops -= (stops > starts) & (a[np.maximum(stops - 1, 0)] == 13)
        control = np.zeros(len(ends), dtype=bool)
        if len(block.translate(None, _CONTROL_BYTES)) != len(block):
            control[np.searchsorted(ends, np.flatnonzero(_IS_CONTROL[a]))] = True
        return cls(starts, ends, np.flatnonzero(stops > starts), control)


@dataclass(frozen=True)
class _Table:
    """A block's fields as pyarrow's CSV reader reads them: a string column per header column,
    the line of each of its rows, and the lines it refused (a wrong field count)."""

    col: list[pa.Array]
    row_line: np.ndarray
    refused: np.ndarray

    @classmethod
    def read(cls, block: bytes, lay: RatingLayout, lines: _Lines) -> _Table | None:
        """None where pyarrow's rows and the lines found do not match up (then the rule reads
        the block)."""
        refused: list[int] = []  # (1-based) numbers among the non-empty lines

        def wrong(row: pacsv.InvalidRow) -> str:
            refused.append(row.number)
            return "skip"

        names = [f"c{i}" for i in range(lay.width)]  # positions, not names: a name may repeat
        col = [pa.array([], pa.string())] * lay.width
        if len(lines.nonempty):  # (pyarrow refuses an input without a line)
            table = pacsv.read_csv(
                io.BytesIO(block),
                read_options=pacsv.ReadOptions(column_names=names, use_threads=False, block_size=len(block) + 1),
                parse_options=pacsv.ParseOptions(
                    delimiter="\t", quote_char=False, escape_char=False, invalid_row_handler=wrong
                ),
                convert_options=pacsv.ConvertOptions(
                    column_types=dict.fromkeys(names, pa.string()), strings_can_be_null=False
                ),
            ).combine_chunks()
            if table.num_rows:
                col = [table.column(i).chunk(0) for i in range(lay.width)]
        at = np.array(refused, dtype=np.int64) - 1
        row_line = np.delete(lines.nonempty, at)
        if len(row_line) != len(col[0]):
            return None
        return cls(col, row_line, lines.nonempty[at])


@dataclass(frozen=True)
class _Fast:
    """The fields of a block's rows read by the vectorised checks: `ok` for a row whose noteId
    and createdAtMillis are plain digits (in range), whose rater is not empty, without a control
    character, and whose level is one of the three words or empty; its answer (value2, -1: none,
    from the v1 flags when the level is empty) and its tag bits."""

    ok: np.ndarray
    note_id: np.ndarray
    created: np.ndarray
    value2: np.ndarray
    tags: np.ndarray

    @classmethod
    def check(cls, col: list[pa.Array], lay: RatingLayout, control: np.ndarray) -> _Fast:
        assert lay.note is not None and lay.rater is not None and lay.time is not None
        note_id, ok = _digits(col[lay.note], 19)
        created, ok_time = _digits(col[lay.time], 15)
        ok &= ok_time & (created <= MAX_MS) & ~control
        ok &= _bool(pc.greater(pc.binary_length(col[lay.rater]), 0))
        n = len(ok)
        value2 = np.full(n, -1, dtype=np.int8)
        if lay.level is not None:
            for code, word in enumerate(LEVELS):
                value2[_bool(pc.equal(col[lay.level], word))] = code
            empty = _bool(pc.equal(pc.binary_length(col[lay.level]), 0))
        else:
            empty = np.ones(n, dtype=bool)
        flags = np.full(n, -1, dtype=np.int8)  # the v1 answer: notHelpful first, then helpful
        if lay.helpful is not None:
            flags[_one(col[lay.helpful])] = 2
        if lay.not_helpful is not None:
            flags[_one(col[lay.not_helpful])] = 0
        value2[empty] = flags[empty]
        ok &= (value2 >= 0) | empty  # any other level text (padded, unknown) goes to the rule
        tags = np.zeros(n, dtype=np.uint64)
        for k, (_name, i) in enumerate(lay.tags):
            tags[_one(col[i])] |= np.uint64(1 << k)
        return cls(ok, note_id, created, value2, tags)


def _bool(values: pa.Array) -> np.ndarray:
    return np.asarray(values.to_numpy(zero_copy_only=False), dtype=bool)


def _one(values: pa.Array) -> np.ndarray:
    """Fields equal to "1" or "1.0" (a set flag)."""
    return _bool(pc.is_in(values, pa.array(sorted(_ONES))))


def _digits(values: pa.Array, most: int) -> tuple[np.ndarray, np.ndarray]:
    """Fields of 1..`most` ASCII digits within int64, read (int64; 0 where not ok) and the ok
    mask. Anything else (a sign, spaces, a decimal point) is not ok: the rule reads it."""
    length = np.asarray(pc.binary_length(values).to_numpy(), dtype=np.int64)
    ok = (length >= 1) & (length <= most) & _bool(pc.ascii_is_decimal(values))
    if most >= len(_INT64_MAX):
        ok &= (length < len(_INT64_MAX)) | _bool(pc.less_equal(values, _INT64_MAX))
    plain = values if ok.all() else pc.if_else(pa.array(ok), values, "0")
    return np.asarray(pc.cast(plain, pa.int64()).to_numpy(), dtype=np.int64), ok


def _header(raw: BinaryIO, file: Path) -> tuple[list[str], bytes]:
    """The header's names, and the bytes after it on its line (a lone CR ends the header line)."""
    line = raw.readline()
    head, rest = line.rstrip(b"\r\n"), b""
    if b"\r" in head:
        head, _, rest = line.partition(b"\r")
    return _decoded(head, str(file), 1).lstrip("\ufeff").split("\t"), rest


def rating_files(path: str | Path | list[Path]) -> list[Path]:
    """A file, every *.tsv file of a folder (sorted), or the files given."""
    return list(path) if isinstance(path, list) else tsv_files(path)


def blocks(
    path: str | Path | list[Path], block_bytes: int = 8 << 20, workers: int = 2, *, line_by_line: bool = False
) -> Iterator[RatingBlock]:
    """Every block of the file(s) at `path` (X's zips too), in file order, skips and blocks
    without a rating included: blocks of about `block_bytes` of whole lines, parsed in `workers`
    threads (pyarrow and numpy release the interpreter lock, so blocks parse side by side).
    At most `workers` + 1 blocks are held at once: memory is flat in the file size."""
    with ThreadPoolExecutor(max_workers=workers) as pool:
        for file in rating_files(path):
            with download_file.open_data(file) as raw:
                header, carry = _header(raw, file)
                if header == [""]:
                    continue
                lay = RatingLayout.from_header(header, str(file))
                pending: deque[Future[RatingBlock]] = deque()
                line_no = 2
                while True:
                    chunk = raw.read(block_bytes)
                    block, carry = carry + chunk, b""
                    if chunk:
                        cut = block.rfind(b"\n") + 1
                        if cut == 0:
                            carry = block
                            continue
                        block, carry = block[:cut], block[cut:]
                    if not block:
                        break
                    parse = partial(parse_block, file=str(file), first_line=line_no, line_by_line=line_by_line)
                    pending.append(pool.submit(parse, block, lay))
                    line_no += universal_lines(block)
                    while len(pending) > workers:
                        yield pending.popleft().result()
                while pending:
                    yield pending.popleft().result()


def iter_rating_blocks(
    path: str | Path | list[Path], report: ReadReport, block_bytes: int = 8 << 20, workers: int = 2
) -> Iterator[RatingBlock]:
    """The blocks of `blocks` that hold ratings, their counts and skips added to `report` in
    file order (the counts and examples of a sequential read)."""
    for blk in blocks(path, block_bytes, workers):
        blk.count_into(report)
        if len(blk):
            yield blk


@dataclass(frozen=True)
class RatingRow:
    note_id: int
    rater_id: str
    created_at_ms: int
    level: str
    tags: frozenset[str] = frozenset()

    @property
    def value(self) -> float:
        return LEVEL_VALUES[self.level]


def read_ratings(path: str | Path | list[Path]) -> Iterator[RatingRow | Skipped]:
    """The parser's ratings one row at a time (for small files and comparisons): each block's
    skips, then its rows."""
    for blk in blocks(path):
        yield from blk.skips
        keys = blk.rater_keys
        names = blk.tag_names
        for note, code, ms, v2, bits in zip(
            blk.note_id.tolist(), blk.rater_code.tolist(), blk.created_at_ms.tolist(), blk.value2.tolist(),
            blk.tags.tolist(), strict=True,
        ):  # fmt: skip
            tags = frozenset(name for k, name in enumerate(names) if bits >> k & 1)
            yield RatingRow(note, keys[code], ms, LEVELS[v2], tags)
