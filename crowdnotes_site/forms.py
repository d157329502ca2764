"""Form fields every app shares."""

from __future__ import annotations

from typing import Any

from django import forms

from crowdnotes_site.lib.text_rules import is_blank


class VisibleTextField(forms.CharField):
    """A CharField for text people write: text a reader cannot see (only whitespace, zero-width
    or bidi-control characters; `text_rules.is_blank`) counts as empty, so `required` refuses it."""

    def to_python(self, value: Any) -> str:
        text = super().to_python(value) or ""
        return "" if is_blank(text) else text
