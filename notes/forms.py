from __future__ import annotations

from django import forms
from django.contrib.auth import get_user_model
from django.contrib.auth.forms import UserCreationForm

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
