"""Panels: how a feature app adds a section to a lower app's page without being imported by it.

A page's template names a slot (`{% panels "note_detail" note=note %}`, tag in
crowdnotes_site/templatetags/panels.py); an upper app registers a provider for that slot in its
`AppConfig.ready` (`register("note_detail", provider)`). A provider gets the request and the
slot's keyword arguments and returns a `Panel` (a template and its context) or None. Slots:
`note_detail` (the contributor's note page), `post_detail` (the post page), `preflight` (a
pre-flight's result), `my_notes_item` (one note in My notes).

A panel that waits for background work says so (`pending=True`); a page whose slot supports it
(the pre-flight's result) keeps polling, and refreshing without JavaScript, while any panel is
pending (`{% collect_panels … as name %}`: `name.html`, `name.pending`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.http import HttpRequest


@dataclass(frozen=True)
class Panel:
    template: str
    context: dict[str, Any] = field(default_factory=dict)
    pending: bool = False  # waits for background work: the page keeps polling


Provider = Callable[..., Panel | None]
_providers: dict[str, list[Provider]] = {}


def register(slot: str, provider: Provider) -> None:
    if provider not in _providers.setdefault(slot, []):
        _providers[slot].append(provider)


def panels(slot: str, request: HttpRequest | None, **kwargs: Any) -> list[Panel]:
    out = []
    for provider in _providers.get(slot, []):
        panel = provider(request, **kwargs)
        if panel is not None:
            out.append(panel)
    return out
