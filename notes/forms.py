from __future__ import annotations

from typing import Any

from django import forms
from django.contrib.auth import get_user_model
from django.contrib.auth.forms import UserCreationForm

from notes.models import HELPFUL_TAGS, NOT_HELPFUL_TAGS, Rating, RatingLevel
from notes.roles import CONTRIBUTOR, RATER


class SignupForm(UserCreationForm):
    email = forms.EmailField(required=False)
    roles = forms.MultipleChoiceField(
        choices=[(CONTRIBUTOR, "Write notes (Contributor)"), (RATER, "Rate notes (Rater)")],
        widget=forms.CheckboxSelectMultiple,
        initial=[CONTRIBUTOR, RATER],
        help_text="Pick at least one.",
    )

    class Meta(UserCreationForm.Meta):
        model = get_user_model()
        fields = ("username", "email")


class RatingForm(forms.Form):
    """Helpful / Somewhat helpful / Not helpful, with the Community Notes tags for that level."""

    level = forms.ChoiceField(choices=RatingLevel.choices, widget=forms.RadioSelect)
    helpful_tags = forms.MultipleChoiceField(
        choices=list(HELPFUL_TAGS.items()), required=False, widget=forms.CheckboxSelectMultiple,
        label="What was helpful about it?",
    )  # fmt: skip
    not_helpful_tags = forms.MultipleChoiceField(
        choices=list(NOT_HELPFUL_TAGS.items()), required=False, widget=forms.CheckboxSelectMultiple,
        label="What was not helpful about it?",
    )  # fmt: skip

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        level = data.get("level")
        if level == RatingLevel.HELPFUL and data.get("not_helpful_tags"):
            self.add_error("not_helpful_tags", "Not-helpful reasons do not go with a Helpful rating.")
        if level == RatingLevel.NOT_HELPFUL and data.get("helpful_tags"):
            self.add_error("helpful_tags", "Helpful reasons do not go with a Not helpful rating.")
        return data

    @property
    def tags(self) -> list[str]:
        return [*self.cleaned_data.get("helpful_tags", []), *self.cleaned_data.get("not_helpful_tags", [])]

    @classmethod
    def initial_for(cls, rating: Rating | None) -> dict[str, Any]:
        if rating is None:
            return {}
        return {
            "level": rating.level,
            "helpful_tags": [t for t in rating.tags if t in HELPFUL_TAGS],
            "not_helpful_tags": [t for t in rating.tags if t in NOT_HELPFUL_TAGS],
        }
