"""The one loopback web server of the test suite: evidence pages, redirects, slow drips, lies.

Tests register a path with a body (bytes, text, or a callable yielding chunks that are streamed
without a Content-Length), a status, a content type and headers; unknown paths answer 404. Every
request is recorded (`requests`: path plus lower-cased headers) and every accepted connection is
counted (`connections`), so a test can prove a refused URL was never contacted. One server runs
per test session; the `web_server` fixture (tests/conftest.py) clears it before each test.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

Body = bytes | Callable[[], Iterable[bytes]]
Handler = Callable[[BaseHTTPRequestHandler], None]
NOT_FOUND = b"<html><body><h1>Not found</h1></body></html>"


@dataclass
class Route:
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: Body = b""


class WebServer:
    def __init__(self) -> None:
        self.routes: dict[str, Route | Handler] = {}
        self.requests: list[dict[str, str]] = []
        self.connections = 0
        server = self

        class RequestHandler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def end_headers(self) -> None:
                # One request per connection, said out loud: a client that believed the connection
                # stays open would reuse a socket this server has closed and see a spurious error.
                self.send_header("Connection", "close")
                super().end_headers()

            def do_GET(self) -> None:
                server.requests.append({"path": self.path, **{k.lower(): v for k, v in self.headers.items()}})
                route = server.routes.get(self.path.split("?")[0])
                if route is None:
                    route = Route(404, {"Content-Type": "text/html"}, NOT_FOUND)
                if not isinstance(route, Route):
                    route(self)
                    self.close_connection = True
                    return
                self.send_response(route.status)
                for key, value in route.headers.items():
                    self.send_header(key, value)
                try:
                    if callable(route.body):
                        self.end_headers()
                        for piece in route.body():
                            self.wfile.write(piece)
                            self.wfile.flush()
                    else:
                        if "Content-Length" not in route.headers:
                            self.send_header("Content-Length", str(len(route.body)))
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

        self.httpd = Server(("127.0.0.1", 0), RequestHandler)
        self.port = int(self.httpd.server_address[1])
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def add(
        self,
        path: str,
        body: Body | str = b"",
        *,
        status: int = 200,
        content_type: str | None = "text/html; charset=utf-8",
        headers: dict[str, str] | None = None,
    ) -> str:
        """Serve `body` at `path`; returns its URL. `content_type=None` sends no Content-Type."""
        all_headers = dict(headers or {})
        if content_type is not None:
            all_headers.setdefault("Content-Type", content_type)
        self.routes[path] = Route(status, all_headers, body.encode() if isinstance(body, str) else body)
        return self.url(path)

    def add_handler(self, path: str, handler: Handler) -> str:
        """Full control of the response (for what `add` cannot say)."""
        self.routes[path] = handler
        return self.url(path)

    def reset(self) -> None:
        self.routes.clear()
        self.requests.clear()
        self.connections = 0

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
