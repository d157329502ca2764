"""A loopback OpenAI-compatible chat-completions server whose replies the test scripts.

Replies are taken from `script` in order; when it is empty, `responder(request_json)` is
asked (default: a 500 "unscripted" error, so a test never passes by accident).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    text: str = ""
    status: int = 200
    delay_s: float = 0.0
    body: str | None = None  # raw body, for malformed replies
    headers: dict[str, str] = field(default_factory=dict)
    block: threading.Event | None = None  # wait for this event before replying


def error(status: int, **headers: str) -> Reply:
    return Reply(
        status=status,
        body=json.dumps({"error": {"message": f"scripted {status}", "type": "server_error"}}),
        headers=headers,
    )


class ScriptedLLMServer:
    def __init__(self) -> None:
        self.script: list[Reply] = []
        self.responder: Callable[[dict[str, Any]], Reply] | None = None
        self.requests: list[dict[str, Any]] = []
        self.entered = threading.Event()  # set whenever a request arrives
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            disable_nagle_algorithm = True  # no 40 ms Nagle/delayed-ACK stall per reply

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                payload = json.loads(self.rfile.read(length) or b"{}")
                reply = server._next(payload)
                server.entered.set()
                if reply.block is not None:
                    reply.block.wait(timeout=120)
                if reply.delay_s:
                    time.sleep(reply.delay_s)
                body = reply.body if reply.body is not None else _completion(payload, reply.text)
                data = body.encode()
                try:
                    self.send_response(reply.status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(data)))
                    for k, v in reply.headers.items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout test)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def _next(self, payload: dict[str, Any]) -> Reply:
        with self._lock:
            self.requests.append(payload)
            if self.script:
                return self.script.pop(0)
        if self.responder is not None:
            return self.responder(payload)
        return error(500)

    def start(self) -> ScriptedLLMServer:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def _completion(payload: dict[str, Any], text: str) -> str:
    return json.dumps(
        {
            "id": "chatcmpl-test",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": payload.get("model", "stub-model"),
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
        }
    )


def stage_of(payload: dict[str, Any]) -> str:
    """Which judge a request is for, from its prompt (for responders)."""
    user = payload["messages"][-1]["content"]
    if "is this snippet relevant" in user:
        return "relevance"
    if "faithful to the snippets" in user:
        return "correctness"
    if "find this note helpful" in user:
        return "helpfulness"
    return "other"
