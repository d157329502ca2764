"""The one content hash: sha256 hex of a text (posts, URLs, passages, sources, judge inputs).

Callers normalise first where their concept needs it (a post's whitespace and case, a URL's
surrounding spaces); the digest itself is the same everywhere, so stored hashes stay valid.
"""

from __future__ import annotations

import hashlib


def sha256_hex(text: str) -> str:
    # surrogatepass: text extracted from odd PDFs may hold lone surrogates; any other string
    # encodes exactly as plain UTF-8.
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
