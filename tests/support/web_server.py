"""A loopback web server for evidence pages: tests register paths with bodies or custom handlers."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any


@dataclass
class Page:
    body: bytes
    content_type: str = "text/html; charset=utf-8"
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)


Handler = Callable[[BaseHTTPRequestHandler], None]


class WebServer:
    def __init__(self) -> None:
        self.pages: dict[str, Page | Handler] = {}
        self.hits: list[str] = []
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def add(
        self,
        path: str,
        body: bytes | str,
        content_type: str = "text/html; charset=utf-8",
        status: int = 200,
        **headers: str,
    ) -> str:
        data = body.encode() if isinstance(body, str) else body
        self.pages[path] = Page(data, content_type, status, headers)
        return self.url(path)

    def add_file(self, path: str, file: Path, content_type: str) -> str:
        return self.add(path, file.read_bytes(), content_type)

    def add_handler(self, path: str, handler: Handler) -> str:
        """Full control of the response (slow drips, lying headers, redirects...)."""
        self.pages[path] = handler
        return self.url(path)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        outer = self

        class RequestHandler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                outer.hits.append(self.path)
                page = outer.pages.get(self.path.split("?")[0])
                if page is None:
                    self.send_error(404)
                    return
                if callable(page):
                    page(self)
                    return
                self.send_response(page.status)
                self.send_header("Content-Type", page.content_type)
                self.send_header("Content-Length", str(len(page.body)))
                for key, value in page.headers.items():
                    self.send_header(key.replace("_", "-"), value)
                self.end_headers()
                self.wfile.write(page.body)

            do_HEAD = do_GET

        return RequestHandler
