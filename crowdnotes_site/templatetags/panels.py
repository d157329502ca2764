from __future__ import annotations

from typing import Any

from django import template
from django.template.loader import render_to_string
from django.utils.safestring import SafeString, mark_safe

from crowdnotes_site.panels import panels as panels_for

register = template.Library()


@register.simple_tag(takes_context=True)
def panels(context: template.Context, slot: str, **kwargs: Any) -> SafeString:
    """Render every panel registered for `slot` (each template autoescapes its own context)."""
    request = context.get("request")
    html = [render_to_string(p.template, p.context, request=request) for p in panels_for(slot, request, **kwargs)]
    return mark_safe("".join(html))  # noqa: S308  (rendered templates, escaped by the template engine)
