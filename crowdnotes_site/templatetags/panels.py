from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django import template
from django.template.loader import render_to_string
from django.utils.safestring import SafeString, mark_safe

from crowdnotes_site.panels import panels as panels_for

register = template.Library()


@dataclass(frozen=True)
class RenderedPanels:
    html: SafeString
    pending: bool  # some panel waits for background work (the page keeps polling)

    def __str__(self) -> str:
        return self.html


def _render(context: template.Context, slot: str, **kwargs: Any) -> RenderedPanels:
    request = context.get("request")
    found = panels_for(slot, request, **kwargs)
    html = [render_to_string(p.template, p.context, request=request) for p in found]
    # rendered templates, escaped by the template engine
    return RenderedPanels(mark_safe("".join(html)), any(p.pending for p in found))  # noqa: S308


@register.simple_tag(takes_context=True)
def panels(context: template.Context, slot: str, **kwargs: Any) -> SafeString:
    """Render every panel registered for `slot` (each template autoescapes its own context)."""
    return _render(context, slot, **kwargs).html


@register.simple_tag(takes_context=True)
def collect_panels(context: template.Context, slot: str, **kwargs: Any) -> RenderedPanels:
    """`{% collect_panels slot … as name %}`: the panels rendered once (`{{ name.html }}`) and
    whether any waits for background work (`name.pending`), for a page that polls meanwhile."""
    return _render(context, slot, **kwargs)
