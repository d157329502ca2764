"""PostgreSQL's binary COPY format, as the ratings import writes it and the rescoring reads it:
fixed-width rows without NULLs ("Binary Format" in PostgreSQL's COPY documentation)."""

from __future__ import annotations

import numpy as np

HEADER = b"PGCOPY\n\xff\r\n\x00" + bytes(8)  # signature, flags, header extension length
TRAILER = b"\xff\xff"  # a field count of -1


def row_dtype(columns: tuple[tuple[str, str], ...]) -> np.dtype:
    """One row of `columns` ((name, big-endian numpy type) each, none NULL): the field count,
    then each field's length and value."""
    return np.dtype(
        [("fields", ">i2")] + [pair for name, kind in columns for pair in ((f"{name}_len", ">i4"), (name, kind))]
    )


def empty_rows(columns: tuple[tuple[str, str], ...], n: int) -> np.ndarray:
    """`n` rows of `columns` with their field count and lengths set; the values are zero."""
    rows = np.zeros(n, dtype=row_dtype(columns))
    rows["fields"] = len(columns)
    for name, kind in columns:
        rows[f"{name}_len"] = np.dtype(kind).itemsize
    return rows
