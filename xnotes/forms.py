from __future__ import annotations

from django import forms

from xnotes import rules


class ProposeForm(forms.Form):
    classification = forms.ChoiceField(choices=list(rules.CLASSIFICATIONS.items()), widget=forms.RadioSelect)
    tags = forms.MultipleChoiceField(
        choices=list(rules.MISLEADING_TAGS.items()),
        required=False,
        widget=forms.CheckboxSelectMultiple,
        label="Why it is misleading (one or more, when misleading)",
    )

    def clean(self) -> dict[str, object]:
        data = super().clean() or {}
        if data.get("classification") == rules.MISLEADING and not data.get("tags"):
            self.add_error("tags", "Pick at least one reason when the post is misleading.")
        return data
