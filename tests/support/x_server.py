"""A loopback fake of the X API v2 endpoints CrowdNotes uses, controlled by the test.

It checks what the real API checks and what our client must get right: the OAuth 1.0a
HMAC-SHA1 signature of every user-context request (oauthlib's SignatureOnlyEndpoint recomputes
it from the method, URL, query and Authorization header with the consumer and token secrets),
the bearer token of app-only lookups, `test_mode`, required parameters, X's rate-limit headers.
Tests script pages, 5xx answers, timeouts and 429s; a request that arrives while a 429's window
is still closed is recorded in `violations` (the client must never send one).
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from oauthlib.oauth1 import RequestValidator, SignatureOnlyEndpoint

CONSUMER_KEY = "ck-test-consumer-key-0001"
CONSUMER_SECRET = "cs-test-consumer-secret-0000000000001"
ACCESS_TOKEN = "at-test-access-token-000000001"
ACCESS_TOKEN_SECRET = "ats-test-access-token-secret-00001"
BEARER_TOKEN = "bearer-test-token-0001"

CN_PATHS = (
    "/2/notes/search/posts_eligible_for_notes",
    "/2/notes/search/notes_written",
    "/2/evaluate_note",
    "/2/notes",
)
TAGS = {
    "disputed_claim_as_fact", "factual_error", "manipulated_media", "misinterpreted_satire",
    "missing_important_context", "outdated_information", "other",
}  # fmt: skip


class _Validator(RequestValidator):
    def __init__(self) -> None:
        super().__init__()
        self.seen_nonces: set[tuple[str, str, str]] = set()

    enforce_ssl = False
    safe_characters = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-")
    client_key_length = (1, 64)
    access_token_length = (1, 64)
    nonce_length = (1, 64)
    allowed_signature_methods = ("HMAC-SHA1",)

    @property
    def dummy_client(self) -> str:
        return "dummy-client-key-000000000"

    @property
    def dummy_access_token(self) -> str:
        return "dummy-access-token-0000000"

    def validate_client_key(self, client_key: str, request: Any) -> bool:
        return client_key == CONSUMER_KEY

    def get_client_secret(self, client_key: str, request: Any) -> str:
        return CONSUMER_SECRET if client_key == CONSUMER_KEY else "wrong"

    def get_access_token_secret(self, client_key: str, token: str, request: Any) -> str:
        return ACCESS_TOKEN_SECRET if token == ACCESS_TOKEN else "wrong"

    def validate_timestamp_and_nonce(self, client_key: str, timestamp: str, nonce: str, request: Any,
                                     request_token: Any = None, access_token: Any = None) -> bool:  # fmt: skip
        key = (client_key, timestamp, nonce)
        if key in self.seen_nonces or abs(time.time() - int(timestamp)) > 600:
            return False
        self.seen_nonces.add(key)
        return True


@dataclass
class Scripted:
    status: int  # 0: answer as usual, after delay_s
    body: dict[str, Any] = field(default_factory=dict)
    delay_s: float = 0.0
    # Sent verbatim instead of `body` (an HTML page, garbage, a bare JSON number), with this type.
    raw: bytes | None = None
    content_type: str = "text/html; charset=utf-8"


@dataclass
class Seen:
    method: str
    path: str
    params: dict[str, str]
    body: Any
    at: float
    auth: str  # "oauth1", "bearer"
    status: int = 0


class FakeX:
    def __init__(self, port: int = 0) -> None:
        self.lock = threading.Lock()
        self._validator = _Validator()
        self._endpoint = SignatureOnlyEndpoint(self._validator)
        self.server = ThreadingHTTPServer(("127.0.0.1", port), self._handler())
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.reset()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def reset(self) -> None:
        with self.lock:
            self.requests: list[Seen] = []
            self.violations: list[str] = []
            self.eligible_pages: list[list[dict[str, Any]]] = []
            self.eligible_includes: dict[str, Any] = {}
            self.tweets: dict[str, dict[str, Any]] = {}
            self.tweet_errors: dict[str, str] = {}
            self.evaluator_score = 0.5
            self.notes: list[dict[str, Any]] = []  # notes written, newest last
            self.live_note_ids: set[str] = set()  # notes proposed with test_mode=false (the rest are test notes)
            self.outcomes: list[dict[str, str]] = [
                {"evaluator_type": "UrlValidity", "evaluator_score_bucket": "High"},
                {"evaluator_type": "ClaimOpinion", "evaluator_score_bucket": "High"},
                {"evaluator_type": "HarassmentAbuse", "evaluator_score_bucket": "High"},
            ]
            self.scripted: dict[str, deque[Scripted]] = {}
            self.closed_until = 0.0  # a 429 answered: no request may come before this
            self.window_limit = 90
            self.window_s = 900.0
            self.window_used = 0
            self.window_reset = time.time() + self.window_s
            self.written_page_size = 100
            self.live_allowed = False

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    # --- scripting ----------------------------------------------------------------------------
    def script(self, path: str, *answers: Scripted) -> None:
        with self.lock:
            self.scripted.setdefault(path, deque()).extend(answers)

    def set_window(self, *, limit: int, seconds: float) -> None:
        """X's fixed window: `limit` requests per `seconds`, starting now."""
        with self.lock:
            self.window_limit, self.window_s = limit, seconds
            self.window_used, self.window_reset = 0, time.time() + seconds

    def rate_limit_next(self, path: str, *, reset_in_s: float) -> None:
        """The next request to `path` gets a 429 whose x-rate-limit-reset is `reset_in_s` ahead."""
        self.script(path, Scripted(429, {"title": "Too Many Requests", "reset_in_s": reset_in_s}))

    def rate_note(self, note_id: str, *, status: str, ratings: dict[str, int]) -> None:
        """A live note rated by contributors on X: its status and rating counts in notes_written.
        X's docs name `status` (NoteRatingStatus) but no field for the counts ("statuses and rating
        feedback"); `rating_counts` is one of the names CrowdNotes reads."""
        with self.lock:
            note = next(n for n in self.notes if n["id"] == note_id)
            note["status"] = status
            note["rating_counts"] = dict(ratings)

    def of(self, path: str, method: str | None = None) -> list[Seen]:
        return [r for r in self.requests if r.path == path and (method is None or r.method == method)]

    # --- answers ------------------------------------------------------------------------------
    def _handler(self) -> type[BaseHTTPRequestHandler]:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _answer(self, status: int, body: dict[str, Any] | Scripted, headers: dict[str, str]) -> None:
                raw = body.raw if isinstance(body, Scripted) else None
                data = raw if raw is not None else json.dumps(body).encode()
                self.send_response(status)
                self.send_header(
                    "Content-Type", body.content_type if isinstance(body, Scripted) else "application/json"
                )
                self.send_header("Content-Length", str(len(data)))
                for k, v in headers.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            def _serve(self, method: str) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                split = urlsplit(self.path)
                params = {k: v[-1] for k, v in parse_qs(split.query, keep_blank_values=True).items()}
                status, body, headers, delay = outer._dispatch(
                    method, split.path, params, raw, dict(self.headers), self.path
                )
                if delay:
                    time.sleep(delay)
                try:
                    self._answer(status, body, headers)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def do_GET(self) -> None:
                self._serve("GET")

            def do_POST(self) -> None:
                self._serve("POST")

        return Handler

    def _auth(self, method: str, raw_path: str, headers: dict[str, str], app_only_ok: bool) -> str | None:
        auth = headers.get("Authorization", "")
        if app_only_ok and auth == f"Bearer {BEARER_TOKEN}":
            return "bearer"
        if not auth.startswith("OAuth "):
            return None
        uri = f"http://{headers.get('Host')}{raw_path}"
        valid, request = self._endpoint.validate_request(uri, http_method=method, body=None, headers=headers)
        if not valid or request is None or request.resource_owner_key != ACCESS_TOKEN:
            return None
        return "oauth1"

    def _rate_headers(self) -> dict[str, str]:
        now = time.time()
        if now >= self.window_reset:
            self.window_used = 0
            self.window_reset = now + self.window_s
        return {"x-rate-limit-limit": str(self.window_limit),
                "x-rate-limit-remaining": str(max(0, self.window_limit - self.window_used)),
                "x-rate-limit-reset": f"{self.window_reset:.3f}"}  # fmt: skip

    def _dispatch(self, method: str, path: str, params: dict[str, str], raw: bytes, headers: dict[str, str],
                  raw_path: str) -> tuple[int, dict[str, Any] | Scripted, dict[str, str], float]:  # fmt: skip
        with self.lock:
            now = time.time()
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                body = None
            auth = self._auth(method, raw_path, headers, app_only_ok=path == "/2/tweets")
            seen = Seen(method, path, params, body, now, auth or "")
            self.requests.append(seen)
            if now < self.closed_until:
                self.violations.append(f"{method} {path} {self.closed_until - now:.2f}s before the reset")
                seen.status = 429
                return 429, {"title": "Too Many Requests"}, {"x-rate-limit-remaining": "0", "x-rate-limit-reset": str(int(self.closed_until) + 1)}, 0  # fmt: skip
            if auth is None:
                seen.status = 401
                return 401, {"title": "Unauthorized", "detail": "signature or token invalid"}, {}, 0
            rate = self._rate_headers()
            self.window_used += 1
            if self.window_used > self.window_limit:  # X's own limit: the window is spent
                seen.status = 429
                self.closed_until = self.window_reset
                return 429, {"title": "Too Many Requests"}, {**rate, "x-rate-limit-remaining": "0"}, 0
            rate = self._rate_headers()
            queue = self.scripted.get(path)
            if queue:
                answer = queue.popleft()
                seen.status = answer.status
                if answer.status == 429:
                    reset = now + float(answer.body.get("reset_in_s", 3))
                    self.closed_until = reset
                    return 429, {"title": "Too Many Requests"}, {"x-rate-limit-remaining": "0", "x-rate-limit-reset": f"{reset:.3f}"}, 0  # fmt: skip
                if answer.status == 0:  # the normal answer, late (e.g. past the client's timeout)
                    status, out = self._route(method, path, params, body)
                    seen.status = status
                    return status, out, rate, answer.delay_s
                return answer.status, (answer if answer.raw is not None else answer.body), rate, answer.delay_s
            status, out = self._route(method, path, params, body)
            seen.status = status
            return status, out, rate, 0

    def _problem(self, status: int, title: str, detail: str) -> tuple[int, dict[str, Any]]:
        return status, {
            "errors": [{"title": title, "detail": detail, "status": status}],
            "title": title,
            "detail": detail,
        }

    def _test_mode_ok(self, value: Any) -> bool:
        return value in ("true", True) or (self.live_allowed and value in ("false", False))

    def _route(self, method: str, path: str, params: dict[str, str], body: Any) -> tuple[int, dict[str, Any]]:
        if path == "/2/notes/search/posts_eligible_for_notes" and method == "GET":
            if not self._test_mode_ok(params.get("test_mode")):
                return self._problem(400, "Invalid Request", "test_mode must be true")
            size = int(params.get("max_results", "0") or 0)
            if not 1 <= size <= 100:
                return self._problem(400, "Invalid Request", "max_results must be 1..100")
            page = int(params.get("pagination_token", "p0")[1:] or 0)
            if page >= len(self.eligible_pages):
                return 200, {"meta": {"result_count": 0}}
            data = self.eligible_pages[page][:size]
            meta: dict[str, Any] = {"result_count": len(data)}
            if page + 1 < len(self.eligible_pages):
                meta["next_token"] = f"p{page + 1}"
            return 200, {"data": data, "includes": self.eligible_includes, "meta": meta}
        if path == "/2/tweets" and method == "GET":
            ids = [i for i in params.get("ids", "").split(",") if i]
            if not 1 <= len(ids) <= 100:
                return self._problem(400, "Invalid Request", "1..100 ids")
            data = [self.tweets[i] for i in ids if i in self.tweets]
            errors = [
                {"value": i, "resource_id": i, "resource_type": "tweet", "parameter": "ids",
                 "title": self.tweet_errors.get(i, "Not Found Error"), "detail": f"Could not find tweet with ids: [{i}]."}
                for i in ids if i not in self.tweets
            ]  # fmt: skip
            out: dict[str, Any] = {}
            if data:
                out["data"] = data
            if errors:
                out["errors"] = errors
            return 200, out
        if path == "/2/evaluate_note" and method == "POST":
            if not isinstance(body, dict) or not body.get("note_text") or not body.get("post_id"):
                return self._problem(400, "Invalid Request", "note_text and post_id are required")
            return 200, {"data": {"claim_opinion_score": self.evaluator_score}}
        if path == "/2/notes" and method == "POST":
            return self._create_note(body)
        if path == "/2/notes/search/notes_written" and method == "GET":
            if not self._test_mode_ok(params.get("test_mode")):
                return self._problem(400, "Invalid Request", "test_mode must be true")
            start = int(params.get("pagination_token", "w0")[1:] or 0)
            live = params.get("test_mode") == "false"
            newest = [n for n in reversed(self.notes) if (n["id"] in self.live_note_ids) == live]
            size = min(int(params.get("max_results", "100") or 100), self.written_page_size)
            chunk = newest[start : start + size]
            meta = {"result_count": len(chunk)}
            if start + size < len(newest):
                meta["next_token"] = f"w{start + size}"
            return 200, {"data": chunk, "meta": meta}
        return self._problem(404, "Not Found", path)

    def _create_note(self, body: Any) -> tuple[int, dict[str, Any]]:
        if not isinstance(body, dict) or not self._test_mode_ok(body.get("test_mode")):
            return self._problem(400, "Invalid Request", "test_mode must be true")
        info = body.get("info") or {}
        post_id = str(body.get("post_id") or "")
        text = str(info.get("text") or "")
        if not post_id.isdigit() or not 1 <= len(text) <= 280 or "http" not in text:
            return self._problem(400, "Invalid Request", "post_id, and text of 1-280 characters with a source URL")
        classification = info.get("classification")
        tags = info.get("misleading_tags") or []
        if classification not in ("misinformed_or_potentially_misleading", "not_misleading"):
            return self._problem(400, "Invalid Request", "classification")
        if classification == "misinformed_or_potentially_misleading" and (not tags or not set(tags) <= TAGS):
            return self._problem(400, "Invalid Request", "misleading_tags")
        if not isinstance(info.get("trustworthy_sources"), bool):
            return self._problem(400, "Invalid Request", "trustworthy_sources must be a boolean")
        if any(n["info"]["post_id"] == post_id for n in self.notes):
            return self._problem(403, "Forbidden", "You can only write one note per post; a note already exists.")
        note_id = str((int(time.time() * 1000) - 1288834974657) << 22 | len(self.notes))
        note: dict[str, Any] = {"id": note_id, "info": {**info, "post_id": post_id}, "status": "needs_more_ratings"}
        if body.get("test_mode") in ("true", True):
            note["test_result"] = {"evaluation_outcome": list(self.outcomes)}
        else:  # a live note: rated by contributors, not scored by the evaluator
            self.live_note_ids.add(note_id)
        self.notes.append(note)
        return 200, {"data": {"id": note_id}}


# Eligible posts the stand-in serves when run on its own (clearly not real posts).
STAND_IN_POSTS = (
    ("1990000000000000001", "Stand-in X post: garlic water cures measles in three days, doctors hide it."),
    ("1990000000000000002", "Stand-in X post: the flu shot gives you the flu, so skip it this year."),
    ("1990000000000000003", "Stand-in X post: vitamin C megadoses replace the measles vaccine."),
)


def main(argv: list[str] | None = None) -> None:
    """Run the fake X API on its own, to try the X recipe (docs/operations/x.md) on the demo without
    X: `python -m tests.support.x_server --port 9402`. It serves a few stand-in eligible posts, answers
    every other post lookup as X does for a post it does not have (Not Found), takes notes in test
    mode and lists them in notes_written with evaluator outcomes. Nothing leaves the machine."""
    import argparse

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--port", type=int, default=0, help="loopback port (default: any free one)")
    port = parser.parse_args(argv).port
    fake = FakeX(port=port)
    fake.eligible_pages = [
        [{"id": x_id, "text": text, "edit_history_tweet_ids": [x_id], "created_at": "2026-11-20T09:00:00Z", "lang": "en"}
         for x_id, text in STAND_IN_POSTS]
    ]  # fmt: skip
    print(f"Fake X API (stand-in, not X) at {fake.base_url}; set these in every shell of the demo:", flush=True)
    print(f"  export X_API_BASE_URL={fake.base_url} X_API_KEY={CONSUMER_KEY} X_API_KEY_SECRET={CONSUMER_SECRET} \\")
    print(
        f"    X_ACCESS_TOKEN={ACCESS_TOKEN} X_ACCESS_TOKEN_SECRET={ACCESS_TOKEN_SECRET} X_BEARER_TOKEN={BEARER_TOKEN}"
    )
    print("Ctrl-C stops it.", flush=True)
    try:
        fake.thread.join()
    except KeyboardInterrupt:
        fake.close()


if __name__ == "__main__":
    main()
