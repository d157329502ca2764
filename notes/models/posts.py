"""Posts and their topic; the post-text filter the lists share."""

from __future__ import annotations

from typing import TypeVar

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone


class Topic(models.TextChoices):
    DISEASES = "diseases", "Diseases or conditions"
    TREATMENTS = "treatments", "Drugs, vaccines, treatments and tests"
    GUIDANCE = "guidance", "Public-health guidance or policy"
    WELLNESS = "wellness", "Wellness products, diets and supplements"
    PROFESSIONALS = "professionals", "Healthcare professionals or systems"
    CONCEPTS = "concepts", "Biological or epidemiological concepts"
    CONSPIRACIES = "conspiracies", "Health conspiracies or hoaxes"
    NOT_HEALTH = "not_health", "Not health"


_M = TypeVar("_M", bound=models.Model)


def has_text_q(prefix: str = "") -> Q:
    """The one definition of "the post has text": `prefix` reaches the post from another model
    ("post__" from a note). Imported posts without text hold only a placeholder."""
    return Q(**{f"{prefix}text_available": True})


# The "post text" filter of the home page, the rating queue and Stuck posts. By default only posts
# a person can read: imported posts without text hold a placeholder nobody can rate or merge.
TEXT_WITH, TEXT_ALL, TEXT_WITHOUT = "", "all", "without"
TEXT_FILTER_CHOICES = [
    (TEXT_WITH, "Posts with text"),
    (TEXT_ALL, "All posts, also imported ones without text"),
    (TEXT_WITHOUT, "Only imported posts without text"),
]


def text_filter(value: str | None) -> str:
    """The filter's value from a query string (anything unknown is the default)."""
    return value if value is not None and value in (TEXT_ALL, TEXT_WITHOUT) else TEXT_WITH


def filter_by_text(queryset: models.QuerySet[_M], choice: str, *, prefix: str = "") -> models.QuerySet[_M]:
    """`queryset` under the text filter; `prefix` reaches the post ("post__" from notes)."""
    if choice == TEXT_WITH:
        return queryset.filter(has_text_q(prefix))
    if choice == TEXT_WITHOUT:
        return queryset.exclude(has_text_q(prefix))
    return queryset


# The pages count what the text filter hides up to this many and then say "more than": an exact
# count reads every imported post or note (1.3 M posts, 2.5 M notes at the full download, and the
# rating queue looks up the rater's rating of each): seconds per page view; this many: milliseconds.
HIDDEN_COUNT_CAP = 1000


def count_hidden(queryset: models.QuerySet[_M]) -> int:
    """The rows of `queryset` counted up to HIDDEN_COUNT_CAP + 1 (more than the cap: "more than")."""
    return queryset.order_by()[: HIDDEN_COUNT_CAP + 1].count()


def hidden_over(count: int) -> int:
    """The cap when `count` (from `count_hidden`) passed it, else 0: the page then says "More than" it."""
    return HIDDEN_COUNT_CAP if count > HIDDEN_COUNT_CAP else 0


class PostQuerySet(models.QuerySet["Post"]):
    def with_text(self) -> PostQuerySet:
        return self.filter(has_text_q())

    def without_text(self) -> PostQuerySet:
        return self.exclude(has_text_q())


class Post(models.Model):
    """A flagged social-media post (pasted by a contributor or imported)."""

    text = models.TextField()
    # sha256 of the normalised text: duplicate flags link to the existing post.
    text_hash = models.CharField(max_length=64, db_index=True)
    source_url = models.URLField(max_length=2000, blank=True)
    external_id = models.CharField(max_length=64, blank=True, db_index=True)
    author_handle = models.CharField(max_length=100, blank=True)
    posted_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    flagged_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    topic = models.CharField(max_length=20, choices=Topic.choices, blank=True)
    topic_method = models.CharField(max_length=100, blank=True)
    is_demo = models.BooleanField(default=False)
    # False for a post imported from public data without its text: `text` is then a
    # placeholder, shown as such and never sent to a judge or classifier as the post.
    text_available = models.BooleanField(default=True)

    objects = PostQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            # The home page's default list (posts with text, newest first). With the whole public
            # download imported (2 M posts without text, all newer than the few with text) the
            # created_at index alone walks every imported post before the first row it may show.
            models.Index(fields=["-created_at", "-id"], condition=Q(text_available=True), name="post_with_text_newest"),
        ]

    def __str__(self) -> str:
        return self.text[:60]

    def text_missing_reason(self) -> str | None:
        """Why this post's text must not be given to a drafter, judge or search, or None: the one
        rule for imported posts whose `text` is only a placeholder."""
        if not self.text_available and self.flagged_by_id is not None:
            return "the post was requested by its link on X and its text is not known here yet"
        if not self.text_available:
            return "the post was imported from public Community Notes data without its text"
        return None
