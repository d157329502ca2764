"""Structured (JSON) logs carrying the request id or Celery task id of the work in progress."""

from __future__ import annotations

import contextvars
import json
import logging
import time
import uuid
from collections.abc import Callable

from django.http import HttpRequest, HttpResponse

request_id_var: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="")
task_id_var: contextvars.ContextVar[str] = contextvars.ContextVar("task_id", default="")


class ContextFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = request_id_var.get()
        record.task_id = task_id_var.get()
        return True


class ClientErrorFilter(logging.Filter):
    """A refused request (403, 404: the client's error) is logged as one line, without the
    traceback Django attaches to PermissionDenied: the traceback says nothing about the server."""

    def filter(self, record: logging.LogRecord) -> bool:
        status = getattr(record, "status_code", None)
        if record.name.startswith("django.request") and isinstance(status, int) and status < 500:
            record.exc_info, record.exc_text = None, None
        return True


class JsonFormatter(logging.Formatter):
    _skip = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}

    def format(self, record: logging.LogRecord) -> str:
        payload: dict[str, object] = {
            "ts": self.formatTime(record, "%Y-%m-%dT%H:%M:%S"),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        # Extra fields (e.g. timings_ms=...) passed with `extra=` become top-level keys.
        for key, value in vars(record).items():
            if key not in self._skip and value not in ("", None):
                payload[key] = value
        if record.exc_info:
            payload["exc"] = self.formatException(record.exc_info)
        return json.dumps(payload, default=str)


class RequestIdMiddleware:
    """Tags every log line of a request with an id (taken from X-Request-ID when a proxy sets one)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response
        self.log = logging.getLogger("crowdnotes.request")

    def __call__(self, request: HttpRequest) -> HttpResponse:
        rid = request.headers.get("X-Request-ID", "")[:64] or uuid.uuid4().hex
        token = request_id_var.set(rid)
        started = time.perf_counter()
        try:
            response = self.get_response(request)
            response["X-Request-ID"] = rid
            self.log.info(
                "request",
                extra={
                    "method": request.method,
                    "path": request.path,
                    "status": response.status_code,
                    "duration_ms": round((time.perf_counter() - started) * 1000, 1),
                },
            )
            return response
        finally:
            request_id_var.reset(token)
