"""One file of the public download in either form its folder may hold: `name.tsv`, or `name.zip`
holding that one TSV, as X publishes it (`ratings-00000.zip` with `ratings-00000.tsv` inside,
possibly under plain folder names in the zip; `member_refusal` judges a member's name).

`open_data` gives the TSV's bytes as one binary stream whichever the form: a zip's member is
decompressed as it is read, never extracted to disk. A member cannot seek (`skip_to` reads and
discards up to an offset); its CRC is checked when it is read to its end, and a corrupt or cut
zip raises DownloadError naming the zip. `data_name` and `data_size` are the TSV's name and its
uncompressed size; `data_files` lists a folder's download files, refusing a stem present both
as `.tsv` and `.zip`. `write_data` writes a file in either form (the synthetic download).
"""

from __future__ import annotations

import io
import zipfile
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, BinaryIO

import numpy as np

BUFFER_BYTES = 1 << 20
SUFFIXES = (".tsv", ".zip")
ZIP_LEVEL = 1  # deflate level of the zips written here: fast (X's own zips may use another)


class DownloadError(ValueError):
    """A download file the import or the research path refuses, with the file (and line) it names."""


def is_zip(path: Path) -> bool:
    return path.suffix == ".zip"


def data_name(path: Path) -> str:
    """The TSV's name: `ratings-00000.tsv` for `ratings-00000.tsv` and for `ratings-00000.zip`."""
    return path.stem + ".tsv" if is_zip(path) else path.name


def data_files(folder: Path) -> list[Path]:
    """The folder's `.tsv` and `.zip` files, sorted; a stem in both forms is refused (which one
    is the download?)."""
    files = sorted(f for f in folder.iterdir() if f.suffix in SUFFIXES and f.is_file())
    by_stem: dict[str, list[str]] = {}
    for f in files:
        by_stem.setdefault(f.stem, []).append(f.name)
    both = [names for names in by_stem.values() if len(names) > 1]
    if both:
        raise DownloadError(
            f"{folder}: {' and '.join(both[0])} are the same file twice (zipped and not): keep one of them"
            + (f" (and {len(both) - 1} more such pairs)" if len(both) > 1 else "")
        )
    return files


def member_refusal(name: str, want: str) -> str | None:
    """Why the zip member `name` is not the TSV `want`, or None when it is: the one place a
    member's name is judged. It is `want` itself, or `want` under plain folder names (X's zips put
    it under a dated folder path); a `..`, `.` or empty part, a leading `/` or a backslash is
    refused wherever it stands, whatever the last part."""
    *folders, last = name.split("/")
    if "\\" in name or any(part in ("", ".", "..") for part in folders):
        return f"{name}, not {want} under plain folder names (no '..' or '.' part, no leading or doubled '/', no '\\')"
    if last != want:
        return f"{name}, not {want}"
    return None


def _member(zf: zipfile.ZipFile, path: Path) -> zipfile.ZipInfo:
    """The zip's one TSV, named as the zip (see member_refusal)."""
    tsvs = [i for i in zf.infolist() if not i.is_dir() and i.filename.endswith(".tsv")]
    want = data_name(path)
    if len(tsvs) != 1:
        names = ", ".join(i.filename for i in tsvs[:5]) + (", ..." if len(tsvs) > 5 else "")
        held = f"holds {len(tsvs)} TSVs ({names})" if tsvs else "holds no TSV"
        raise DownloadError(f"{path}: the zip {held}; a download zip holds exactly one, {want}")
    if refusal := member_refusal(tsvs[0].filename, want):
        raise DownloadError(f"{path}: the zip holds {refusal}")
    return tsvs[0]


def _zip(path: Path) -> zipfile.ZipFile:
    try:
        return zipfile.ZipFile(path)
    except (zipfile.BadZipFile, EOFError, OSError) as exc:
        raise DownloadError(
            f"{path}: not a readable zip ({exc}): a truncated or corrupt download; fetch it again"
        ) from exc


def data_size(path: Path) -> int:
    """The TSV's size in bytes (a zip's member uncompressed, from the zip's directory)."""
    if not is_zip(path):
        return path.stat().st_size
    with _zip(path) as zf:
        return _member(zf, path).file_size


class _Member(io.RawIOBase):
    """A zip member as a raw stream whose read errors (bad CRC, data cut short, bad deflate data)
    are DownloadErrors naming the zip."""

    def __init__(self, path: Path, fh: IO[bytes]) -> None:
        self.path, self.fh = path, fh

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]  # BufferedReader passes a memoryview
        try:
            data = self.fh.read(len(buffer))
        except (zipfile.BadZipFile, EOFError, zlib.error) as exc:
            raise DownloadError(f"{self.path}: the zip is corrupt or truncated ({exc}); fetch it again") from exc
        buffer[: len(data)] = data
        return len(data)


@contextmanager
def open_data(path: Path) -> Iterator[BinaryIO]:
    """The TSV's bytes as a buffered binary stream (lines iterate at C speed either way); a
    plain file can seek, a zip's member cannot (`fh.seekable()` says which)."""
    if not is_zip(path):
        with path.open("rb") as fh:
            yield fh
        return
    with _zip(path) as zf:
        info = _member(zf, path)
        try:
            member = zf.open(info)
        except (zipfile.BadZipFile, EOFError, zlib.error, OSError, NotImplementedError) as exc:
            raise DownloadError(
                f"{path}: cannot read its member {info.filename} ({exc}): a corrupt or truncated zip; fetch it again"
            ) from exc
        with member, io.BufferedReader(_Member(path, member), BUFFER_BYTES) as fh:
            yield fh


def skip_to(fh: BinaryIO, at: int, offset: int) -> None:
    """Move `fh` from byte `at` to byte `offset`: a seek, or for a zip's member, reading and
    discarding the bytes between."""
    if fh.seekable():
        fh.seek(offset)
        return
    left = offset - at
    while left > 0:
        got = len(fh.read(min(left, 16 << 20)))
        if not got:
            raise DownloadError(f"the file ends before byte {offset:,}, where the import stopped")
        left -= got


def line_blocks(fh: BinaryIO, n_lines: int, piece_bytes: int = 8 << 20) -> Iterator[tuple[int, bytes]]:
    """The rest of `fh` as (number of lines, bytes) blocks of `n_lines` whole lines each (the
    last block may hold fewer, and a last line without its newline): the lines iterating `fh`
    gives, joined, but read in large pieces and cut at newlines found by numpy instead of one
    Python call per line."""
    buf = bytearray()
    ends = np.empty(0, dtype=np.int64)  # where each newline of `buf` is
    while True:
        while len(ends) < n_lines and (piece := fh.read(piece_bytes)):
            ends = np.concatenate([ends, np.flatnonzero(np.frombuffer(piece, dtype=np.uint8) == 10) + len(buf)])
            buf += piece
        if len(ends) < n_lines:
            if buf:
                yield len(ends) + (buf[-1:] != b"\n"), bytes(buf)
            return
        cut = int(ends[n_lines - 1]) + 1
        yield n_lines, bytes(buf[:cut])
        del buf[:cut]
        ends = ends[n_lines:] - cut


@contextmanager
def reopened_at(path: Path, fh: BinaryIO, offset: int) -> Iterator[BinaryIO]:
    """`fh` (the data of `path`) moved to byte `offset`, backwards too: a seek, or for a zip's
    member (which cannot go back) the data opened again and read up to there."""
    if fh.seekable():
        fh.seek(offset)
        yield fh
        return
    with open_data(path) as again:
        skip_to(again, 0, offset)
        yield again


def read_tail(fh: BinaryIO, size: int, n_bytes: int = 1 << 16) -> bytes:
    """The last `n_bytes` of the data: a seek to them, or for a zip's member, reading it all
    (which checks its CRC at the end)."""
    if fh.seekable():
        fh.seek(max(size - n_bytes, 0))
        return fh.read()
    tail = b""
    while chunk := fh.read(16 << 20):
        tail = (tail + chunk[-n_bytes:])[-n_bytes:]
    return tail


@contextmanager
def write_data(tsv: Path, *, zipped: bool = False) -> Iterator[IO[bytes]]:
    """A binary stream that writes the TSV `tsv` (`.../name.tsv`), or with `zipped` X's form of
    it, `name.zip` holding `name.tsv` (deflate at ZIP_LEVEL; zip64 headers, so a member may pass
    4 GB), compressed as it is written: no TSV on disk. The file appears under its name only when
    complete (written as `.part`, then renamed)."""
    path = tsv.with_suffix(".zip") if zipped else tsv
    tmp = path.with_name(path.name + ".part")
    if zipped:
        with (
            zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED, compresslevel=ZIP_LEVEL) as zf,
            zf.open(tsv.name, "w", force_zip64=True) as fh,
        ):
            yield fh
    else:
        with tmp.open("wb") as fh:
            yield fh
    tmp.replace(path)
