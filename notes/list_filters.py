"""The list pages' filters (health topic, page number, post text) as their query strings give them,
and what the templates show of what the text filter hides."""

from __future__ import annotations

from django.http import HttpRequest

from notes import selectors
from notes.models import Topic, hidden_over


def list_filters(request: HttpRequest) -> tuple[str, int, str]:
    """The health topic, page number and post-text filter of a list page's query string."""
    topic = request.GET.get("topic", "")
    page = request.GET.get("page", "1")
    page_number = int(page) if page.isdigit() and 0 < int(page) <= 10_000 else 1
    return (topic if topic in Topic.values else ""), page_number, selectors.text_filter(request.GET.get("text"))


def hidden_context(count: int) -> dict[str, int]:
    """What notes/_text_hidden.html shows: the hidden count, and the cap when it was passed."""
    return {"hidden": count, "hidden_over": hidden_over(count)}


def text_context(request: HttpRequest, text: str) -> dict[str, object]:
    """The "post text" filter's choices and the query string that shows the hidden posts too."""
    query = request.GET.copy()
    query["text"] = selectors.TEXT_ALL
    query.pop("page", None)
    return {"text": text, "text_choices": selectors.TEXT_FILTER_CHOICES, "show_query": query.urlencode()}
