"""Every evidence error code the code can produce has a sentence for contributors."""

from __future__ import annotations

import re
from pathlib import Path

from django.template import Context, Template

from evidence.errors import ERROR_TEXTS, UNKNOWN_ERROR_TEXT, error_text

EVIDENCE = Path(__file__).resolve().parents[2] / "evidence"
# FetchError("code", ...), ExtractionError("code", ...), error_code="code" (multi-line calls too).
CODE_RE = re.compile(r"""(?:FetchError|ExtractionError)\(\s*["'](\w+)["']|error_code=["'](\w+)["']""")


def _codes_in_source() -> set[str]:
    found: set[str] = set()
    for path in EVIDENCE.rglob("*.py"):
        for match in CODE_RE.finditer(path.read_text()):
            found.add(match.group(1) or match.group(2))
    return found


def test_it_has_a_text_for_every_error_code_the_evidence_code_raises() -> None:
    codes = _codes_in_source()
    assert {"tls_error", "bad_pdf", "blocked_address", "empty_text", "timeout"} <= codes  # the scan sees them
    assert codes - set(ERROR_TEXTS) == set()


def test_it_says_something_plain_for_an_unknown_code() -> None:
    assert error_text("tls_error") == ERROR_TEXTS["tls_error"]
    assert error_text("no_such_code") == error_text("") == UNKNOWN_ERROR_TEXT


def test_it_only_looks_texts_up_in_templates() -> None:
    html = Template("{% load crowdnotes %}{{ code|error_text }}").render(Context({"code": "tls_error"}))
    assert html == ERROR_TEXTS["tls_error"].replace("'", "&#x27;")
