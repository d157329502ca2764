"""X's evaluator: the ClaimOpinion score of a note's text on a post, asked once per (post, text)."""

from __future__ import annotations

from django.utils import timezone

from crowdnotes_site.lib import xids
from crowdnotes_site.lib.hashing import sha256_hex
from judging.models import PreflightCheck
from notes.models import Post
from xnotes.client import XApiError, XClient, XTransientError
from xnotes.models import XEvaluation, XPost
from xnotes.services import XFlowError


def x_post_id(post: Post) -> str:
    """The post's X id ("" when it has none)."""
    xpost = XPost.objects.filter(post=post).first()
    if xpost is not None:
        return xpost.x_id
    return post.external_id if xids.X_ID.match(post.external_id or "") else ""


def evaluation_cached(*, post: Post, text: str) -> XEvaluation | None:
    return XEvaluation.objects.filter(post=post, text_hash=sha256_hex(text)).first()


def preflight_evaluation_needed(check_id: int) -> tuple[Post, str] | None:
    """The post and text X's evaluator should see for this pre-flight (judging queues
    `x_preflight_evaluate` for every pre-flight of a draft), or None: no draft, the post is not
    on X, or X already answered this text."""
    check = PreflightCheck.objects.select_related("draft_job__post").filter(pk=check_id).first()
    post = check.draft_job.post if check is not None and check.draft_job is not None else None
    if check is None or post is None or not x_post_id(post):
        return None
    cached = evaluation_cached(post=post, text=check.note_text)
    if cached is not None and cached.claim_opinion_score is not None:
        return None
    return post, check.note_text


def evaluate(*, post: Post, text: str, client: XClient) -> XEvaluation:
    """X's ClaimOpinion score of `text` on the post, cached per (post, text hash). RateLimited
    and XTransientError propagate (the task retries); a refusal is stored as the answer."""
    cached = evaluation_cached(post=post, text=text)
    if cached is not None and cached.claim_opinion_score is not None:
        return cached
    x_id = x_post_id(post)
    if not x_id:
        raise XFlowError("This post has no X id, so X's evaluator cannot be asked.")
    score: float | None = None
    error = ""
    try:
        answer = client.evaluate_note(post_id=x_id, note_text=text)
        raw = (answer.get("data") or {}).get("claim_opinion_score")
        score = float(raw) if raw is not None else None
        if score is None:
            error = "X's answer had no claim_opinion_score"
    except XTransientError:
        raise
    except XApiError as exc:
        error = str(exc)[:300]
    evaluation, _ = XEvaluation.objects.update_or_create(
        post=post, text_hash=sha256_hex(text),
        defaults={"note_text": text, "claim_opinion_score": score, "error": error, "created_at": timezone.now()},
    )  # fmt: skip
    return evaluation
