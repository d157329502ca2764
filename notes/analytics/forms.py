from __future__ import annotations

from django import forms

from crowdnotes_site.lib.communitynotes.research import spikes
from notes.analytics.selectors import AnalyticsFilters
from notes.models import Note, Topic


class AnalyticsFilterForm(forms.Form):
    topic = forms.ChoiceField(choices=[("", "any topic"), *Topic.choices], required=False)
    origin = forms.ChoiceField(choices=[("", "any note origin"), *Note.Origin.choices], required=False)
    demo = forms.ChoiceField(
        choices=[("", "real and demo"), ("real", "without demo content"), ("demo", "demo content only")],
        required=False,
    )
    date_from = forms.DateField(required=False, widget=forms.DateInput(attrs={"type": "date"}), label="notes from")
    date_to = forms.DateField(required=False, widget=forms.DateInput(attrs={"type": "date"}), label="to")

    def filters(self) -> AnalyticsFilters:
        data = self.cleaned_data if self.is_valid() else {}
        return AnalyticsFilters(
            topic=data.get("topic", ""),
            origin=data.get("origin", ""),
            date_from=data.get("date_from"),
            date_to=data.get("date_to"),
            demo=data.get("demo", ""),
        )


class SpikeForm(AnalyticsFilterForm):
    unit = forms.ChoiceField(choices=[("notes", "notes per day"), ("posts", "flagged posts per day")], required=False)
    window = forms.IntegerField(
        min_value=7, max_value=120, required=False, initial=spikes.WINDOW_DAYS, label="window (days)"
    )
    k = forms.FloatField(
        min_value=0.5, max_value=10, required=False, initial=spikes.K_SIGMA, label="k (standard deviations)"
    )

    def options(self) -> tuple[str, int, float]:
        data = self.cleaned_data if self.is_valid() else {}
        return (
            data.get("unit") or "notes",
            data.get("window") or spikes.WINDOW_DAYS,
            data.get("k") or spikes.K_SIGMA,
        )
