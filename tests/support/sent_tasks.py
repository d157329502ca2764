"""Record the tasks of one name that the outbox sends after commit, instead of sending them."""

from __future__ import annotations

from typing import Any

import pytest

from crowdnotes_site.queue import broker_app


def record_sent(monkeypatch: pytest.MonkeyPatch, task_name: str) -> list[Any]:
    """The first argument of every `task_name` message sent on commit; other tasks go to the broker."""
    sent: list[Any] = []
    app = broker_app()
    send_task = app.send_task

    def fake(name: str, args: Any = None, kwargs: Any = None, **options: Any) -> Any:
        if name == task_name:
            sent.append(args[0])
            return None
        return send_task(name, args=args, kwargs=kwargs, **options)

    monkeypatch.setattr(app, "send_task", fake)
    return sent
