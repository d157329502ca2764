"""Fixtures for the job-safety tests: a broker that is down (a closed loopback port)."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import pytest


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _point_broker(app: Any, url: str) -> None:
    app.conf.broker_url = url
    app._pool = None  # the connection pool and producers were built for the previous URL
    app.amqp._producer_pool = None


@pytest.fixture
def broker_down() -> Iterator[Any]:
    """The app's Celery broker pointed at a closed port; `.restore()` brings the real one back."""
    from crowdnotes_site.celery import app

    real = app.conf.broker_url

    class Switch:
        def restore(self) -> None:
            _point_broker(app, real)

    _point_broker(app, f"redis://127.0.0.1:{closed_port()}/0")
    switch = Switch()
    yield switch
    switch.restore()
