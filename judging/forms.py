from __future__ import annotations

from django import forms

from judging.models import JudgeDecision, JudgeKind, Stage
from judging.selectors import DecisionFilters
from notes.forms import VisibleTextField
from notes.text_rules import is_blank


class DecisionFilterForm(forms.Form):
    stage = forms.ChoiceField(choices=[("", "any stage"), *Stage.choices], required=False)
    verdict = forms.ChoiceField(choices=[("", "any verdict"), *JudgeDecision.Verdict.choices], required=False)
    judge_kind = forms.ChoiceField(choices=[("", "any judge"), *JudgeKind.choices], required=False)
    judge_name = forms.CharField(required=False, label="Model / judge name")
    date_from = forms.DateField(required=False, widget=forms.DateInput(attrs={"type": "date"}))
    date_to = forms.DateField(required=False, widget=forms.DateInput(attrs={"type": "date"}))

    def filters(self) -> DecisionFilters:
        data = self.cleaned_data if self.is_valid() else {}
        return DecisionFilters(
            stage=data.get("stage", ""),
            verdict=data.get("verdict", ""),
            judge_kind=data.get("judge_kind", ""),
            judge_name=data.get("judge_name", ""),
            date_from=data.get("date_from"),
            date_to=data.get("date_to"),
        )


class OverrideForm(forms.Form):
    verdict = forms.ChoiceField(choices=JudgeDecision.Verdict.choices[:2])
    reason = VisibleTextField(widget=forms.Textarea(attrs={"rows": 3}), min_length=5, strip=True)


class PreflightForm(forms.Form):
    post_text = VisibleTextField(widget=forms.Textarea(attrs={"rows": 3}), label="Post")
    note_text = VisibleTextField(widget=forms.Textarea(attrs={"rows": 4}), label="Draft note")
    urls = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 2}), required=False, label="Evidence URLs (one per line)"
    )
    snippets = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 6}),
        required=False,
        label="Evidence snippets (separate snippets with a blank line)",
    )

    def url_list(self) -> list[str]:
        return [u.strip() for u in self.cleaned_data["urls"].splitlines() if u.strip()]

    def snippet_list(self) -> list[str]:
        blocks = self.cleaned_data["snippets"].replace("\r\n", "\n").split("\n\n")
        return [b.strip() for b in blocks if not is_blank(b)]
