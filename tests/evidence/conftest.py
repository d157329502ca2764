"""Evidence test helpers: a fetch policy for the loopback web server, connection auditing,
documents (articles, PDFs, slow drips) and a MiniLM matcher loaded once per session."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from evidence.fetch import FetchPolicy
from evidence.models import Snippet
from tests.evidence.corpus import corpus  # noqa: F401 - a fixture for tests/evidence/*
from tests.support.web_server import WebServer


@pytest.fixture
def test_policy(web_server: WebServer) -> FetchPolicy:
    return FetchPolicy(
        allowed_local=frozenset({("127.0.0.1", web_server.port)}),
        total_timeout=3.0,
        max_bytes=200_000,
    )


class ConnectAudit:
    """Records every socket.connect() and getaddrinfo() of this process via audit hooks."""

    def __init__(self) -> None:
        self.active = False
        self.connects: list[object] = []
        self.lookups: list[object] = []

    def __call__(self, event: str, args: tuple[object, ...]) -> None:
        if not self.active:
            return
        if event == "socket.connect":
            self.connects.append(args[1])
        elif event == "socket.getaddrinfo":
            self.lookups.append(args[0])


_audit = ConnectAudit()
sys.addaudithook(_audit)  # audit hooks cannot be removed; the flag keeps it inert outside the fixture


@pytest.fixture
def connect_audit() -> Iterator[ConnectAudit]:
    _audit.connects.clear()
    _audit.lookups.clear()
    _audit.active = True
    yield _audit
    _audit.active = False


def slow_drip(pieces: int = 100, delay: float = 0.2) -> Callable[[], Iterator[bytes]]:
    def generate() -> Iterator[bytes]:
        yield b"<html><body><p>"
        for _ in range(pieces):
            time.sleep(delay)
            yield b"drip "
        yield b"</p></body></html>"

    return generate


@pytest.fixture(scope="session")
def minilm_matcher(_evidence_model_warm: None):
    """all-MiniLM-L6-v2, loaded once per test session (fast; mpnet gets a single test). Its
    pre-filter table is the one the session's warm-up built in MODEL_CACHE_DIR."""
    from django.conf import settings

    from evidence.embedding import MINILM
    from evidence.matching import MatchConfig, Matcher

    config = MatchConfig(
        model_name=MINILM,
        strategy="exhaustive",
        window_tokens=256,
        overlap_tokens=64,
        cache_dir=settings.MODEL_CACHE_DIR,
    )
    return Matcher(config)


def make_pdf(lines: list[str], title: str = "Test PDF") -> bytes:
    """A minimal valid one-page PDF with real text objects (pypdf can extract them)."""
    ops = ["BT", "/F1 11 Tf", "14 TL", "50 780 Td"]
    for line in lines:
        escaped = line.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
        ops.append(f"({escaped}) Tj T*")
    ops.append("ET")
    stream = "\n".join(ops).encode("latin-1")
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 842] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        b"<< /Title (" + title.encode("latin-1") + b") /CreationDate (D:20240315120000Z) >>",
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    for offset in offsets:
        out += b"%010d 00000 n \n" % offset
    out += b"trailer\n<< /Size %d /Root 1 0 R /Info 6 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


def article(paragraphs: list[str], title: str = "Test article", extra_head: str = "") -> str:
    body = "".join(f"<p>{p}</p>" for p in paragraphs)
    return (
        f"<!doctype html><html><head><title>{title}</title>{extra_head}</head><body>"
        f"<nav><a href='/'>Home</a> <a href='/about'>About</a></nav>"
        f"<article><h1>{title}</h1>{body}</article><footer>Copyright 2024 Example</footer></body></html>"
    )


MEASLES = [
    "Measles is a highly contagious viral disease that spreads through the air when an infected person coughs or sneezes.",
    "Two doses of the measles, mumps and rubella vaccine are about 97 percent effective at preventing measles infection.",
    "Volcanic ash clouds can disrupt air travel for days, and lava flows destroy roads and farmland on the slopes.",
    "The football championship was decided by a penalty shootout after a goalless final at the national stadium.",
    "Sourdough bread needs an active starter, a long cold fermentation and a very hot oven with steam.",
]


def snippets_for(job: Any, urls: list[str]) -> list[Snippet]:
    """Snippet rows of a draft, queued, without starting their tasks."""
    return [Snippet.objects.create(post=job.post, draft_job=job, url=url, position=i) for i, url in enumerate(urls)]
