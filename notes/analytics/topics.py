"""Health topics of posts: the labels of crowdnotes_site.lib.llm.steps.topics mapped onto Post.topic, and the
service that classifies and stores them (LLM when configured, else the labelled offline
baseline). A post imported without its text is never classified (its placeholder is not
the post)."""

from __future__ import annotations

from collections.abc import Iterable

from crowdnotes_site.lib.llm.client import LLMBudgetExceeded
from crowdnotes_site.lib.llm.steps import topics as topic_step
from crowdnotes_site.lib.llm.steps.common import StepResult
from crowdnotes_site.llm import llm_client
from notes.models import Post, Topic

# The step's labels are the model's choices, lower-cased: map by label, checked at import.
TOPIC_BY_LABEL: dict[str, str] = {str(label).lower(): value for value, label in Topic.choices}
assert set(topic_step.TOPIC_LABELS) == set(TOPIC_BY_LABEL), "topic labels and Post.topic choices differ"


def topic_value(label: str | None) -> str | None:
    """The Post.topic value of a step label, or None (unparsable answer)."""
    return TOPIC_BY_LABEL.get(label.lower()) if label else None


def classify_text(text: str, *, owner: int | None = None) -> StepResult:
    """The topic of a text: the LLM when configured (its call charged to `owner`'s daily LLM
    budget when given), else the keyword baseline. An owner past the budget gets the keyword
    baseline too, labelled as such (the call is refused before anything is sent)."""
    client = llm_client(owner=owner)
    if client is not None:
        try:
            return topic_step.topic_label_llm(client, text=text)
        except LLMBudgetExceeded:
            pass
    # Keywords beat embedding similarity on the labelled set (bench/README.md "Topic
    # baselines"), so they stay the default offline baseline.
    return topic_step.topic_label_baseline(text=text)


def post_classify_topic(*, post: Post, owner: int | None = None) -> str | None:
    """Classify one post and store its topic and the producer ("llm:<model>" or
    "baseline:<name>"); None when the post has no text or the answer did not parse. `owner`:
    the user whose daily LLM budget the call counts against (the task passes the flagger;
    commands and the demo load classify for nobody in particular)."""
    if not post.text_available:
        return None
    result = classify_text(post.text, owner=owner)
    value = topic_value(result.value)
    if value is None:
        return None
    Post.objects.filter(pk=post.pk).update(topic=value, topic_method=result.producer.label[:100])
    return value


def posts_classify_topics(posts: Iterable[Post]) -> dict[str, int]:
    counts: dict[str, int] = {"classified": 0, "no text": 0, "unparsed": 0}
    for post in posts:
        if not post.text_available:
            counts["no text"] += 1
        elif post_classify_topic(post=post):
            counts["classified"] += 1
        else:
            counts["unparsed"] += 1
    return counts
