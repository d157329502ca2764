from __future__ import annotations

from typing import Any

from django import forms
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.forms import UserCreationForm
from django.core.exceptions import ValidationError
from django.core.validators import URLValidator
from django.http import QueryDict
from django.urls import reverse_lazy

from crowdnotes_site.forms import VisibleTextField
from crowdnotes_site.lib.communitynotes.supernotes import comparison
from crowdnotes_site.lib.text_rules import NOTE_MAX_CHARS, POST_MAX_CHARS, TRAILING_PUNCTUATION, URL_RE, note_length
from evidence import local_copies
from notes.models import HELPFUL_TAGS, NOT_HELPFUL_TAGS, TAGS_FOR_LEVEL, Rating, RatingLevel
from notes.roles import CONTRIBUTOR, RATER

_url_validator = URLValidator(schemes=["http", "https"])


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


def parse_url_lines(raw: str, *, already: list[str] | None = None, required: bool = True) -> list[str]:
    """One URL per line: each must be http(s), none twice, at most MAX_EVIDENCE_URLS in all."""
    urls = [line.strip() for line in raw.splitlines() if line.strip()]
    if not urls and required:
        raise ValidationError("Paste at least one evidence URL, one per line.")
    errors: list[str] = []
    seen: set[str] = set(already or [])
    for url in urls:
        try:
            _url_validator(url)
        except ValidationError:
            errors.append(f"“{url[:200]}” is not a valid http(s) URL.")
            continue
        if url in seen:
            errors.append(f"“{url[:200]}” is listed twice.")
        seen.add(url)
    limit = settings.MAX_EVIDENCE_URLS
    if len(seen) > limit:
        errors.append(f"At most {limit} evidence URLs per note (you have {len(seen)}).")
    if errors:
        raise ValidationError(errors)
    return urls


# The head start (evidence.prefetch): a debounced htmx POST of the URL field starts reading the
# pages before submit; the answer replaces the #prefetch-status element the template places.
# The URL boxes: room for a few more lines than MAX_EVIDENCE_URLS allows (parse_url_lines says how
# many), each up to 2,000 characters; past it the form refuses before parsing.
URLS_MAX_CHARS = 20 * 2001

PREFETCH_ATTRS = {
    "hx-post": reverse_lazy("evidence_prefetch"),
    "hx-trigger": "input changed delay:1s",
    "hx-params": "urls",
    "hx-target": "#prefetch-status",
    "hx-swap": "outerHTML",
}


class ContributeForm(forms.Form):
    """Flag a post and paste its evidence in one step, so nothing typed is lost on an error."""

    text = VisibleTextField(
        label="Post text",
        widget=forms.Textarea(attrs={"rows": 4}),
        max_length=POST_MAX_CHARS,
        help_text=f"Paste the text of the post you want to add context to (at most {POST_MAX_CHARS} characters).",
        error_messages={
            "max_length": "The post you pasted is %(show_value)d characters long; at most %(limit_value)d are "
            "accepted. Shorten it to the part that makes the claim: nothing was cut for you."
        },
    )
    source_url = forms.URLField(
        label="Link to the post (optional)", required=False, max_length=2000, assume_scheme="https"
    )
    author_handle = forms.CharField(label="Author handle (optional)", required=False, max_length=100)
    posted_at = forms.DateTimeField(
        label="Posted at (optional)",
        required=False,
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}),
    )
    urls = forms.CharField(
        label="Evidence URLs",
        required=False,
        max_length=URLS_MAX_CHARS,
        widget=forms.Textarea(
            attrs={"rows": 3, "placeholder": "https://www.who.int/...\nhttps://www.cdc.gov/...", **PREFETCH_ATTRS}
        ),
        help_text="One per line. The server fetches each page and finds the passage that best matches the post. "
        "Or leave it empty and let CrowdNotes find evidence for you.",
    )

    def __init__(self, *args: object, finding: bool = False, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        # No maxlength in the browser: it cuts a long paste silently; the server says why instead.
        self.fields["text"].widget.attrs.pop("maxlength", None)
        # "Find evidence for me": the URLs become optional (the contributor may still add some).
        self.finding = finding

    def clean_text(self) -> str:
        text = self.cleaned_data["text"].strip()
        if not text:
            raise ValidationError("The post text is empty.")
        return text

    def clean_author_handle(self) -> str:
        return self.cleaned_data["author_handle"].strip().lstrip("@")

    def clean_urls(self) -> list[str]:
        return parse_url_lines(self.cleaned_data["urls"], required=not self.finding)


class AddEvidenceForm(forms.Form):
    urls = forms.CharField(
        label="More evidence URLs",
        max_length=URLS_MAX_CHARS,
        widget=forms.Textarea(attrs={"rows": 2, **PREFETCH_ATTRS}),
    )

    def __init__(self, *args: object, existing: list[str], **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.existing = existing

    def clean_urls(self) -> list[str]:
        raw = self.cleaned_data["urls"]
        # URLs that are all on the draft already repeat an earlier add (a double click, a retried
        # POST): answered as that add was, adding nothing. A new paste repeating one is refused.
        # The draft stores a local copy's page by its original address, so lines are compared so too.
        lines = {local_copies.real_address(line.strip()) for line in raw.splitlines() if line.strip()}
        if lines and lines <= set(self.existing):
            return []
        return parse_url_lines(raw, already=self.existing)


class NoteForm(forms.Form):
    """The note editor. The live counter (static/js/note-editor.js) reads the limit and the URL
    rule from the textarea's data attributes, so the browser counts as crowdnotes_site.lib.text_rules does."""

    max_chars = NOTE_MAX_CHARS
    text = VisibleTextField(
        label="Your note",
        widget=forms.Textarea(
            attrs={
                "rows": 4,
                "data-note-editor": "1",
                "data-limit": str(NOTE_MAX_CHARS),
                "data-url-pattern": URL_RE.pattern,
                "data-url-trailing": TRAILING_PUNCTUATION,
            }
        ),
        max_length=2000,
    )
    # The version of the saved text this page showed (notes.services.draft_text_token): a save or a
    # submit after another tab saved a different text is refused instead of replacing it unseen.
    seen = forms.CharField(required=False, widget=forms.HiddenInput(attrs={"id": "text-seen"}))

    def __init__(self, *args: object, urls: list[str], autosave_url: str = "", **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.urls = urls
        attrs = self.fields["text"].widget.attrs
        attrs["data-urls"] = str(len(urls))
        if autosave_url:
            # Saved as it is edited (htmx); the "Save my text" button does the same without JavaScript.
            # No browser form restore: going back shows the server's last saved text.
            attrs.update({
                "hx-post": autosave_url, "hx-trigger": "input changed delay:700ms, change",
                "hx-target": "#autosave-status", "hx-swap": "innerHTML", "autocomplete": "off",
            })  # fmt: skip

    def clean_text(self) -> str:
        text = " ".join(self.cleaned_data["text"].split())
        if not text:
            raise ValidationError("The note is empty.")
        length = note_length(text, self.urls)
        if length > NOTE_MAX_CHARS:
            over = length - NOTE_MAX_CHARS
            raise ValidationError(
                f"{over} character{'s' if over != 1 else ''} over the {NOTE_MAX_CHARS} limit: the note counts "
                f"{length} (each link counts as 1 character). Shorten it."
            )
        return text


class DraftTextForm(forms.Form):
    """The editor's text as saved while it is edited: kept as typed (the submit form cleans it)."""

    text = forms.CharField(required=False, strip=False, max_length=2000)
    seen = forms.CharField(required=False)


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

    # The version of the note the rater read: a rating or suggestion for a text that is no longer
    # current is refused, never attached to another text.
    version = forms.IntegerField(required=False, min_value=1, widget=forms.HiddenInput)
    # A suggested change sent with the rating (withdrawn when the rating changes).
    suggestion = forms.CharField(
        required=False, label="Suggest a change to this note (optional)",
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="What should the note say differently? Raters' suggestions may lead to a revised version.",
    )  # fmt: skip
    suggestion_source = forms.URLField(
        required=False, max_length=2000, assume_scheme="https", label="A source for your suggestion (optional)",
        help_text="Fetched safely; you then confirm the passage that supports your suggestion.",
    )  # fmt: skip

    # Each tag field: the tags it offers and how its error names them.
    TAG_GROUPS = {
        "helpful_tags": (HELPFUL_TAGS, "Helpful reasons"),
        "not_helpful_tags": (NOT_HELPFUL_TAGS, "Not-helpful reasons"),
    }

    def clean_suggestion(self) -> str:
        text = str(self.cleaned_data.get("suggestion") or "").strip()
        if len(text) > settings.SUGGESTION_MAX_CHARS:
            raise ValidationError(f"At most {settings.SUGGESTION_MAX_CHARS} characters ({len(text)} given).")
        return text

    def clean_suggestion_source(self) -> str:
        url = str(self.cleaned_data.get("suggestion_source") or "").strip()
        if url:
            try:
                _url_validator(url)
            except ValidationError as exc:
                raise ValidationError("Give an http(s) URL.") from exc
        return url

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if data.get("suggestion_source") and not data.get("suggestion"):
            self.add_error("suggestion", "Say what the source supports: a source comes with a suggestion.")
        level = data.get("level")
        if level in TAGS_FOR_LEVEL:
            for name, (_, words) in self.TAG_GROUPS.items():
                if not set(data.get(name) or ()) <= TAGS_FOR_LEVEL[level]:
                    self.add_error(name, f"{words} do not go with a {RatingLevel(level).label} rating.")
        return data

    def _offers(self, name: str) -> bool:
        level = self.chosen_level
        return not level or bool(TAGS_FOR_LEVEL[level] & set(self.TAG_GROUPS[name][0]))

    @property
    def offers_helpful_tags(self) -> bool:
        """The helpful tags go with the level picked so far (or no level is picked yet)."""
        return self._offers("helpful_tags")

    @property
    def offers_not_helpful_tags(self) -> bool:
        return self._offers("not_helpful_tags")

    @property
    def tags(self) -> list[str]:
        return [*self.cleaned_data.get("helpful_tags", []), *self.cleaned_data.get("not_helpful_tags", [])]

    @property
    def chosen_level(self) -> str:
        """The level picked so far (bound data or initial), "" if none."""
        value = self["level"].value()
        return value if value in TAGS_FOR_LEVEL else ""

    @classmethod
    def initial_for(cls, rating: Rating | None, choice: QueryDict | None = None) -> dict[str, Any]:
        """The rater's own rating, or a level being picked on the page (htmx GET with ?level=)."""
        if choice is not None and choice.get("level") in TAGS_FOR_LEVEL:
            return {
                "level": choice["level"],
                "helpful_tags": choice.getlist("helpful_tags"),
                "not_helpful_tags": choice.getlist("not_helpful_tags"),
                "suggestion": choice.get("suggestion", ""),
                "suggestion_source": choice.get("suggestion_source", ""),
            }
        if rating is None:
            return {}
        return {
            "level": rating.level,
            "helpful_tags": [t for t in rating.tags if t in HELPFUL_TAGS],
            "not_helpful_tags": [t for t in rating.tags if t in NOT_HELPFUL_TAGS],
        }


class ComparisonForm(forms.Form):
    """The blind comparison: which of Note A and Note B is more helpful, and each note on the five
    statements (1-5). Field names only say A or B, never which note is which."""

    preferred = forms.ChoiceField(
        choices=[("A", "Note A"), ("B", "Note B")], widget=forms.RadioSelect,
        label="Which note is more helpful?",
        error_messages={"required": "Choose the more helpful note (Note A or Note B)."},
    )  # fmt: skip

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for side in ("a", "b"):
            for key, text in comparison.STATEMENTS:
                self.fields[f"{side}_{key}"] = forms.TypedChoiceField(
                    choices=comparison.SCALE, coerce=int, widget=forms.RadioSelect, label=text,
                    error_messages={"required": f"Rate Note {side.upper()} on this statement."},
                )  # fmt: skip

    def side_fields(self, side: str) -> list[forms.BoundField]:
        return [self[f"{side}_{key}"] for key in comparison.STATEMENT_KEYS]

    @property
    def note_a_fields(self) -> list[forms.BoundField]:
        return self.side_fields("a")

    @property
    def note_b_fields(self) -> list[forms.BoundField]:
        return self.side_fields("b")

    def scores(self, side: str) -> dict[str, int]:
        return {key: int(self.cleaned_data[f"{side}_{key}"]) for key in comparison.STATEMENT_KEYS}
