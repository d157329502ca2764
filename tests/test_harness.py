"""The shared test harness itself: real worker process, scripted LLM endpoint, loopback web server."""

from __future__ import annotations

import json
import urllib.request
from typing import Any

import pytest

from tests.support.llm_server import Reply


@pytest.mark.worker
def test_it_starts_a_real_celery_worker_on_redis(celery_worker: Any) -> None:
    from crowdnotes_site.celery import app

    replies = app.control.ping(timeout=5)
    names = [name for reply in replies for name in reply]
    assert any(name.startswith("shared@") for name in names), replies
    assert celery_worker.proc.poll() is None


def test_it_serves_scripted_chat_completions(llm_server: Any) -> None:
    llm_server.script(Reply(status=429, content="slow down"), "Final decision: yes")
    request = urllib.request.Request(
        llm_server.base_url + "/chat/completions",
        data=json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with pytest.raises(urllib.error.HTTPError) as first:
        urllib.request.urlopen(request, timeout=5)
    assert first.value.code == 429
    with urllib.request.urlopen(request, timeout=5) as response:
        body = json.load(response)
    assert body["choices"][0]["message"]["content"] == "Final decision: yes"
    assert len(llm_server.requests) == 2


def test_it_serves_registered_pages_and_404s(web_server: Any) -> None:
    url = web_server.add("/harness/page", "<p>hello</p>")
    with urllib.request.urlopen(url, timeout=5) as response:
        assert response.read() == b"<p>hello</p>"
    with pytest.raises(urllib.error.HTTPError) as missing:
        urllib.request.urlopen(web_server.url("/harness/missing"), timeout=5)
    assert missing.value.code == 404


def test_it_blocks_outbound_network_except_loopback() -> None:
    import socket

    with socket.socket() as sock, pytest.raises(ConnectionRefusedError, match="loopback"):
        sock.connect(("192.0.2.1", 80))
