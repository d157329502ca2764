from __future__ import annotations

from django import forms

from crowdnotes_site.forms import VisibleTextField
from crowdnotes_site.lib.text_rules import is_blank
from judging.models import OVERRIDE_REASON_MAX_CHARS, JudgeDecision, JudgeKind, Stage
from judging.selectors import DecisionFilters


class DecisionFilterForm(forms.Form):
    stage = forms.ChoiceField(choices=[("", "any stage"), *Stage.choices], required=False)
    verdict = forms.ChoiceField(choices=[("", "any verdict"), *JudgeDecision.Verdict.choices], required=False)
    judge_kind = forms.ChoiceField(choices=[("", "any judge"), *JudgeKind.choices], required=False)
    judge_name = forms.CharField(required=False, label="Model / judge name", max_length=200)
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
    reason = VisibleTextField(
        widget=forms.Textarea(attrs={"rows": 3}), min_length=5, max_length=OVERRIDE_REASON_MAX_CHARS, strip=True
    )


# Pre-flight limits: the judges' prompts stay small and one request cannot queue hours of work.
PREFLIGHT_MAX_POST_CHARS = 2000
PREFLIGHT_MAX_NOTE_CHARS = 1000
PREFLIGHT_MAX_URLS = 10
PREFLIGHT_MAX_SNIPPETS = 10
PREFLIGHT_MAX_SNIPPET_CHARS = 3000
PREFLIGHT_MAX_SNIPPETS_CHARS = 15000


class PreflightForm(forms.Form):
    post_text = VisibleTextField(
        widget=forms.Textarea(attrs={"rows": 3}), label="Post", max_length=PREFLIGHT_MAX_POST_CHARS
    )
    note_text = VisibleTextField(
        widget=forms.Textarea(attrs={"rows": 4}), label="Draft note", max_length=PREFLIGHT_MAX_NOTE_CHARS
    )
    urls = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 2}),
        required=False,
        label=f"Evidence URLs (one per line, at most {PREFLIGHT_MAX_URLS})",
        max_length=PREFLIGHT_MAX_URLS * 2001,
    )
    snippets = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 6}),
        required=False,
        label=(
            f"Evidence snippets (separate snippets with a blank line; at most {PREFLIGHT_MAX_SNIPPETS}, "
            f"{PREFLIGHT_MAX_SNIPPET_CHARS} characters each)"
        ),
        max_length=PREFLIGHT_MAX_SNIPPETS_CHARS,
    )

    def clean_urls(self) -> str:
        value: str = self.cleaned_data["urls"]
        lines = [u.strip() for u in value.splitlines() if u.strip()]
        if len(lines) > PREFLIGHT_MAX_URLS:
            raise forms.ValidationError(f"At most {PREFLIGHT_MAX_URLS} URLs (you gave {len(lines)}).")
        if any(len(u) > 2000 for u in lines):
            raise forms.ValidationError("A URL is longer than 2000 characters.")
        return value

    def clean_snippets(self) -> str:
        value: str = self.cleaned_data["snippets"]
        blocks = [b.strip() for b in value.replace("\r\n", "\n").split("\n\n") if b.strip()]
        if len(blocks) > PREFLIGHT_MAX_SNIPPETS:
            raise forms.ValidationError(f"At most {PREFLIGHT_MAX_SNIPPETS} snippets (you gave {len(blocks)}).")
        long = [i + 1 for i, b in enumerate(blocks) if len(b) > PREFLIGHT_MAX_SNIPPET_CHARS]
        if long:
            raise forms.ValidationError(
                f"Snippet {long[0]} is longer than {PREFLIGHT_MAX_SNIPPET_CHARS} characters: quote the relevant part."
            )
        return value

    def url_list(self) -> list[str]:
        return [u.strip() for u in self.cleaned_data["urls"].splitlines() if u.strip()]

    def snippet_list(self) -> list[str]:
        blocks = self.cleaned_data["snippets"].replace("\r\n", "\n").split("\n\n")
        return [b.strip() for b in blocks if not is_blank(b)]
