"""The pre-flight also asks X's evaluator: when a pre-flight on a post with an X id is created
(judging.services.preflight_request) and X is connected, xnotes queues `x_evaluate` for the same
text in the same transaction (the answer is cached per post and text hash)."""

from __future__ import annotations

from typing import Any

from django.db.models.signals import post_save
from django.dispatch import receiver

from crowdnotes_site.queue import enqueue_on_commit
from judging.models import PreflightCheck
from xnotes import services
from xnotes.client import is_configured


@receiver(post_save, sender=PreflightCheck, dispatch_uid="xnotes.preflight_evaluate")
def preflight_evaluate(sender: Any, instance: PreflightCheck, created: bool, **_: Any) -> None:
    if not created or instance.draft_job_id is None or not is_configured():
        return
    post = instance.draft_job.post if instance.draft_job else None
    if post is None or not services.x_post_id(post):
        return
    cached = services.evaluation_cached(post=post, text=instance.note_text)
    if cached is not None and cached.claim_opinion_score is not None:
        return
    enqueue_on_commit("xnotes.tasks.x_evaluate", post.pk, instance.note_text)
