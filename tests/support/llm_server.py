"""A loopback OpenAI-compatible chat-completions server whose replies each test scripts.

The real `openai` client talks to it over HTTP, so timeouts, 429 retries and malformed
output go through the same code path as a real endpoint.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    content: str = ""
    status: int = 200
    delay_s: float = 0.0
    # When set, the server waits for this event before answering (e.g. to kill a worker mid-call).
    hold: threading.Event | None = None
    headers: dict[str, str] = field(default_factory=dict)
    # When set, sent as the raw 200 response body (malformed-output tests).
    body: str | None = None


Responder = Callable[[list[dict[str, Any]]], str]


class ScriptedLLM:
    def __init__(self) -> None:
        self.replies: deque[Reply] = deque()
        self.requests: list[dict[str, Any]] = []
        self.responder: Responder | None = None
        self.lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def reset(self) -> None:
        with self.lock:
            self.replies.clear()
            self.requests.clear()
            self.responder = None

    def script(self, *replies: Reply | str) -> None:
        with self.lock:
            for reply in replies:
                self.replies.append(Reply(content=reply) if isinstance(reply, str) else reply)

    def respond_with(self, responder: Responder) -> None:
        """Answer every request not covered by a scripted reply with responder(messages)."""
        self.responder = responder

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def _next(self, body: dict[str, Any]) -> Reply:
        with self.lock:
            self.requests.append(body)
            if self.replies:
                return self.replies.popleft()
            responder = self.responder
        if responder is not None:
            return Reply(content=responder(body.get("messages", [])))
        return Reply(status=500, content="no scripted reply left")

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # headers and body are two writes: avoid a 40 ms stall

            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, status: int, payload: dict[str, Any], headers: dict[str, str]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for key, value in headers.items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                self._send(200, {"object": "list", "data": [{"id": "scripted-model", "object": "model"}]}, {})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                reply = outer._next(body)
                if reply.hold is not None:
                    reply.hold.wait(timeout=120)
                if reply.delay_s:
                    time.sleep(reply.delay_s)
                if reply.body is not None:
                    data = reply.body.encode()
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    return
                if reply.status != 200:
                    error = {"error": {"message": reply.content or "error", "type": "scripted", "code": reply.status}}
                    self._send(reply.status, error, reply.headers)
                    return
                prompt_tokens = sum(len(str(m.get("content", "")).split()) for m in body.get("messages", []))
                completion = {
                    "id": f"chatcmpl-{len(outer.requests)}",
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": body.get("model", "scripted-model"),
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": reply.content},
                            "finish_reason": "stop",
                        }
                    ],
                    "usage": {
                        "prompt_tokens": prompt_tokens,
                        "completion_tokens": len(reply.content.split()),
                        "total_tokens": prompt_tokens + len(reply.content.split()),
                    },
                }
                self._send(200, completion, reply.headers)

        return Handler
