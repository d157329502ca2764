"""The only code that talks to X: the X API v2 Community Notes endpoints and the post lookup.

requests + requests-oauthlib: OAuth 1.0a (HMAC-SHA1) user context for the Community Notes
endpoints, the app-only bearer token for `GET /2/tweets` when one is set (else user context).
Every call first takes a request from the shared budget (xnotes/budget.py) and refreshes it from
the answer's `x-rate-limit-*` headers. A 429 raises `RateLimited` (the caller re-queues its work
for the reset); 5xx answers and timeouts are retried X_API_MAX_RETRIES times with doubling
backoff, except `POST /2/notes`, which is sent once per call (a timeout there may still have
created the note: the proposal service reconciles through `notes_written` before sending again).

Secrets are read from the settings here and nowhere else; they are never logged or returned:
logs name the method, path and status only.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.conf import settings

from xnotes import budget
from xnotes.budget import RateLimited

if TYPE_CHECKING:
    import requests

log = logging.getLogger(__name__)

USER_SETTINGS = ("X_API_KEY", "X_API_KEY_SECRET", "X_ACCESS_TOKEN", "X_ACCESS_TOKEN_SECRET")
TWEET_FIELDS = "author_id,created_at,lang,note_tweet,referenced_tweets,attachments,suggested_source_links"
EXPANSIONS = "attachments.media_keys,referenced_tweets.id,referenced_tweets.id.attachments.media_keys"
MEDIA_FIELDS = "type,url,preview_image_url,alt_text"
LOOKUP_BATCH = 100  # ids per GET /2/tweets

__all__ = ["RateLimited", "XApiError", "XBadAnswer", "XClient", "XNotConfigured", "XTransientError", "missing_settings"]


class XNotConfigured(Exception):
    def __init__(self, missing: Sequence[str]) -> None:
        self.missing = list(missing)
        super().__init__(f"X API credentials are not set: {', '.join(self.missing)}")


class XApiError(Exception):
    """X answered with an error (4xx other than 429): status, title and detail from its body."""

    def __init__(self, status: int, title: str, detail: str = "", body: Any = None) -> None:
        self.status = status
        self.title = title
        self.detail = detail
        self.body = body
        super().__init__(f"X API {status}: {title}" + (f" ({detail})" if detail else ""))


class XTransientError(XApiError):
    """5xx or a timeout / connection error, still failing after the bounded retries."""


class XBadAnswer(XApiError):
    """X answered with success but a body that is not a JSON object (an HTML page, garbage, a bare
    number): the message names the content type and the body's start. After a write (POST /2/notes)
    whether X created the note is unknown: the proposal is left uncertain (checked before a resend)."""


def missing_settings() -> list[str]:
    """The user-context settings that are not set (empty: the X features are on)."""
    return [name for name in USER_SETTINGS if not getattr(settings, name, "")]


def is_configured() -> bool:
    return not missing_settings()


@dataclass
class Answer:
    status: int
    body: dict[str, Any]


def _error_of(status: int, body: Any) -> tuple[str, str]:
    if isinstance(body, dict):
        errors = body.get("errors")
        if isinstance(errors, list) and errors and isinstance(errors[0], dict):
            return str(errors[0].get("title") or errors[0].get("message") or ""), str(errors[0].get("detail") or "")
        return str(body.get("title") or f"HTTP {status}"), str(body.get("detail") or "")
    return f"HTTP {status}", ""


class XClient:
    """One client per unit of work; `requests` counts the HTTP requests it sent (retries included)."""

    def __init__(self, *, session: requests.Session | None = None, sleep: Callable[[float], None] = time.sleep) -> None:
        missing = missing_settings()
        if missing:
            raise XNotConfigured(missing)
        # Deferred: requests + requests-oauthlib cost ~0.2 s to import; only a process that talks to X pays it.
        import requests
        from requests_oauthlib import OAuth1

        self.base_url = settings.X_API_BASE_URL
        self.session = session or requests.Session()
        self.sleep = sleep
        self.requests = 0
        self._user_auth = OAuth1(
            settings.X_API_KEY,
            client_secret=settings.X_API_KEY_SECRET,
            resource_owner_key=settings.X_ACCESS_TOKEN,
            resource_owner_secret=settings.X_ACCESS_TOKEN_SECRET,
            signature_method="HMAC-SHA1",
            signature_type="AUTH_HEADER",
        )

    # --- transport ---------------------------------------------------------------------------
    def _auth(self, app_only: bool) -> Any:
        if app_only and settings.X_BEARER_TOKEN:
            return _Bearer(settings.X_BEARER_TOKEN)
        return self._user_auth

    def _send(
        self,
        method: str,
        path: str,
        *,
        bucket: str = "notes",
        params: dict[str, Any] | None = None,
        json_body: dict[str, Any] | None = None,
        app_only: bool = False,
        retry: bool = True,
    ) -> Answer:
        import requests  # deferred (see __init__); already loaded once a client exists

        attempts = 1 + (settings.X_API_MAX_RETRIES if retry else 0)
        delay = settings.X_API_BACKOFF_S
        for attempt in range(1, attempts + 1):
            # Raises RateLimited: never a request inside a closed window, nor beside a probe.
            probing = budget.acquire(bucket, probe_ttl_s=settings.X_API_TIMEOUT_S + 5)
            self.requests += 1
            try:
                response = self.session.request(
                    method,
                    self.base_url + path,
                    params=params,
                    json=json_body,
                    auth=self._auth(app_only),
                    timeout=settings.X_API_TIMEOUT_S,
                )
                budget.observe(bucket, response.status_code, response.headers, window_s=settings.X_API_WINDOW_S)
            except (requests.Timeout, requests.ConnectionError) as exc:
                log.warning("X API %s %s: %s (attempt %d of %d)", method, path, type(exc).__name__, attempt, attempts)
                if attempt == attempts:
                    raise XTransientError(0, type(exc).__name__, "no answer from X") from None
                self.sleep(delay)
                delay *= 2
                continue
            finally:
                if probing:
                    budget.end_probe(bucket)
            try:
                body = response.json()
            except ValueError:
                body = None
            log.info("X API %s %s -> %d", method, path, response.status_code)
            if 200 <= response.status_code < 300 and not isinstance(body, dict):
                sent = response.text[:120].replace("\n", " ")
                kind = response.headers.get("Content-Type", "no content type")
                what = "not JSON" if body is None else f"JSON {type(body).__name__}, not an object"
                raise XBadAnswer(response.status_code, f"X answered {kind} ({what})", repr(sent), body=sent)
            if body is None:
                body = {}
            if response.status_code == 429:
                state = budget.state(bucket)
                raise RateLimited(state.blocked_until or time.time() + settings.X_API_WINDOW_S, bucket)
            if response.status_code >= 500:
                if attempt == attempts:
                    raise XTransientError(response.status_code, *_error_of(response.status_code, body), body=body)
                self.sleep(delay)
                delay *= 2
                continue
            if response.status_code >= 400:
                raise XApiError(response.status_code, *_error_of(response.status_code, body), body=body)
            return Answer(response.status_code, body if isinstance(body, dict) else {})
        raise AssertionError("unreachable")

    # --- endpoints ---------------------------------------------------------------------------
    def eligible_posts(
        self, *, test_mode: bool, max_results: int, pagination_token: str | None = None
    ) -> dict[str, Any]:
        params: dict[str, Any] = {
            "test_mode": "true" if test_mode else "false",
            "max_results": max(1, min(100, max_results)),
            "tweet.fields": TWEET_FIELDS,
            "expansions": EXPANSIONS,
            "media.fields": MEDIA_FIELDS,
        }
        if pagination_token:
            params["pagination_token"] = pagination_token
        return self._send("GET", "/2/notes/search/posts_eligible_for_notes", params=params).body

    def posts_lookup(self, ids: Sequence[str]) -> dict[str, Any]:
        if not 1 <= len(ids) <= LOOKUP_BATCH:
            raise ValueError(f"1 to {LOOKUP_BATCH} ids per lookup, got {len(ids)}")
        params = {"ids": ",".join(ids), "tweet.fields": "author_id,created_at,lang,note_tweet"}
        return self._send("GET", "/2/tweets", bucket="tweets", params=params, app_only=True).body

    def evaluate_note(self, *, post_id: str, note_text: str) -> dict[str, Any]:
        return self._send("POST", "/2/evaluate_note", json_body={"note_text": note_text, "post_id": post_id}).body

    def create_note(
        self,
        *,
        test_mode: bool,
        post_id: str,
        text: str,
        classification: str,
        misleading_tags: Sequence[str],
        trustworthy_sources: bool,
    ) -> dict[str, Any]:
        info: dict[str, Any] = {
            "text": text,
            "classification": classification,
            "trustworthy_sources": trustworthy_sources,
        }
        if classification == "misinformed_or_potentially_misleading":
            info["misleading_tags"] = list(misleading_tags)
        body = {"test_mode": test_mode, "post_id": post_id, "info": info}
        return self._send("POST", "/2/notes", json_body=body, retry=False).body

    def notes_written(
        self, *, test_mode: bool, max_results: int = 100, pagination_token: str | None = None
    ) -> dict[str, Any]:
        params: dict[str, Any] = {
            "test_mode": "true" if test_mode else "false",
            "max_results": max(1, min(100, max_results)),
        }
        if pagination_token:
            params["pagination_token"] = pagination_token
        return self._send("GET", "/2/notes/search/notes_written", params=params).body


class _Bearer:
    """An app-only bearer token as a requests auth (any callable that signs the request will do)."""

    def __init__(self, token: str) -> None:
        self._token = token

    def __call__(self, request: requests.PreparedRequest) -> requests.PreparedRequest:
        request.headers["Authorization"] = f"Bearer {self._token}"
        return request

    def __repr__(self) -> str:  # never the token
        return "<bearer token>"
