"""Loopback web server and connection auditing for the evidence tests.

The lead's tests/conftest.py will offer a shared `web_server`; this one is local to
tests/evidence so the pure modules can be tested before the foundation lands.
"""

from __future__ import annotations

import socket
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from evidence.fetch import FetchPolicy

Body = bytes | Callable[[], Iterable[bytes]]


@dataclass
class Route:
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: Body = b""
    # Send Content-Length from the real body unless the route sets its own header.
    auto_length: bool = True


class LoopbackServer:
    def __init__(self) -> None:
        self.routes: dict[str, Route] = {}
        self.requests: list[dict[str, str]] = []
        self.connections = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                server.requests.append({"path": self.path, **{k.lower(): v for k, v in self.headers.items()}})
                route = server.routes.get(self.path.split("?")[0])
                if route is None:
                    route = Route(404, {"Content-Type": "text/html"}, b"<html><body><h1>Not found</h1></body></html>")
                self.send_response(route.status)
                for key, value in route.headers.items():
                    self.send_header(key, value)
                try:
                    if callable(route.body):
                        self.send_header("Connection", "close")
                        self.end_headers()
                        for piece in route.body():
                            self.wfile.write(piece)
                            self.wfile.flush()
                    else:
                        if route.auto_length and "Content-Length" not in route.headers:
                            self.send_header("Content-Length", str(len(route.body)))
                        self.send_header("Connection", "close")
                        self.end_headers()
                        self.wfile.write(route.body)
                except (BrokenPipeError, ConnectionResetError):
                    pass
                self.close_connection = True

        class Server(ThreadingHTTPServer):
            daemon_threads = True

            def get_request(self) -> tuple[socket.socket, object]:
                pair = super().get_request()
                server.connections += 1
                return pair

        self.httpd = Server(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def add(
        self,
        path: str,
        body: Body = b"",
        *,
        status: int = 200,
        content_type: str | None = "text/html; charset=utf-8",
        headers: dict[str, str] | None = None,
    ) -> str:
        all_headers = dict(headers or {})
        if content_type is not None:
            all_headers.setdefault("Content-Type", content_type)
        self.routes[path] = Route(status, all_headers, body)
        return self.url(path)

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def evidence_server() -> Iterator[LoopbackServer]:
    server = LoopbackServer()
    yield server
    server.close()


@pytest.fixture
def test_policy(evidence_server: LoopbackServer) -> FetchPolicy:
    return FetchPolicy(
        allow_loopback_for_tests=True,
        allowed_ports=frozenset({80, 443, evidence_server.port}),
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
def minilm_matcher():
    """all-MiniLM-L6-v2, loaded once per test session (fast; mpnet gets a single test)."""
    from evidence.embedding import MINILM
    from evidence.matching import MatchConfig, Matcher

    return Matcher(MatchConfig(model_name=MINILM, strategy="exhaustive", window_tokens=256, overlap_tokens=64))


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
