"""Why an evidence source could not be used: the error classes of the fetcher and extractor,
and the one text per error code that contributors read (pure: no Django).

An error code is stable (stored on snippets and sources, printed by `evidence_probe`); its
`message` is the technical detail for operators; `error_text(code)` is the plain sentence shown
on the draft page. tests/evidence/test_errors.py checks that every code raised has a text.
"""

from __future__ import annotations


class FetchError(Exception):
    """A refused or failed fetch; error_code is stable and shown to users and operators."""

    def __init__(self, error_code: str, message: str, *, url: str = "", status: int | None = None) -> None:
        super().__init__(f"{error_code}: {message}")
        self.error_code = error_code
        self.message = message
        self.url = url
        self.status = status


class ExtractionError(Exception):
    """A fetched document without usable main text (empty, a block page, an unreadable PDF)."""

    def __init__(self, error_code: str, message: str) -> None:
        super().__init__(f"{error_code}: {message}")
        self.error_code = error_code
        self.message = message


ERROR_TEXTS: dict[str, str] = {
    # Refused before any request (evidence.fetch validates every hop).
    "bad_url": "This link is not a valid web address.",
    "bad_scheme": "Only http:// and https:// links can be used as evidence.",
    "bad_port": "This link uses a port that CrowdNotes does not fetch.",
    "blocked_address": "This address points to a private or local network, which CrowdNotes never fetches.",
    # Network and HTTP failures.
    "dns_error": "The site's name could not be found.",
    "connection_error": "The site could not be reached.",
    "tls_error": "The site's secure connection (HTTPS certificate) could not be verified.",
    "timeout": "The site took too long to answer.",
    "too_large": "The page is too large to fetch.",
    "too_many_redirects": "The link redirects too many times.",
    "http_error": "The site answered with an error instead of the page.",
    "unsupported_type": "This link is not a web page, plain text or PDF.",
    # Extraction (evidence.extract) and matching.
    "empty_text": "No readable main text was found on this page.",
    "block_page": "The site showed a block, consent or captcha page instead of its content.",
    "bad_pdf": "This PDF could not be read.",
    "internal_error": "Something went wrong on our side while processing this source.",
    # Not a failure of the source: its draft was discarded by its owner before it was processed.
    "discarded": "Not processed: the draft was discarded.",
}
UNKNOWN_ERROR_TEXT = "This source could not be used."


def error_text(code: str | None) -> str:
    """The sentence a contributor reads for an error code."""
    return ERROR_TEXTS.get(code or "", UNKNOWN_ERROR_TEXT)
