"""RETRIEVE + MATCH for evidence snippets: state updates, caching, persistence.

The pure work happens in evidence.fetch / extract / chunking / matching; this module only
decides what to reuse, records each stage on the Snippet row and stores the results.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from datetime import date, timedelta

import numpy as np
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from evidence.extract import ExtractionError, extract
from evidence.fetch import FetchError, FetchPolicy, fetch
from evidence.matching import MatchConfig, Matcher, content_hash
from evidence.models import EvidenceSource, Passage, Snippet

log = logging.getLogger(__name__)

RUNNING = [Snippet.State.FETCHING, Snippet.State.EXTRACTING, Snippet.State.EMBEDDING]
TRANSIENT_CODES = {"timeout", "connection_error", "dns_error"}
TRANSIENT_STATUSES = {408, 425, 429, 500, 502, 503, 504}


class TransientEvidenceError(Exception):
    """A network failure worth retrying; the snippet was put back to queued."""


def fetch_policy() -> FetchPolicy:
    return FetchPolicy(
        max_bytes=settings.EVIDENCE_MAX_BYTES,
        total_timeout=settings.EVIDENCE_FETCH_TIMEOUT,
        max_redirects=settings.EVIDENCE_MAX_REDIRECTS,
        allowed_ports=frozenset({80, 443, *settings.EVIDENCE_EXTRA_PORTS}),
        allow_loopback_for_tests=settings.EVIDENCE_ALLOW_LOOPBACK,
        proxy_url=settings.EVIDENCE_PROXY_URL or None,
    )


def match_config(**overrides: object) -> MatchConfig:
    values: dict[str, object] = {
        "model_name": settings.EMBEDDING_MODEL,
        "window_tokens": settings.PASSAGE_TOKENS,
        "overlap_tokens": settings.PASSAGE_OVERLAP,
        "strategy": settings.EVIDENCE_MATCH_STRATEGY,
        "prefilter_k": settings.EVIDENCE_PREFILTER_K,
        "cache_dir": settings.MODEL_CACHE_DIR,
    }
    values.update(overrides)
    return MatchConfig(**values)  # type: ignore[arg-type]


_matchers: dict[MatchConfig, Matcher] = {}
_matchers_lock = threading.Lock()


def get_matcher(config: MatchConfig | None = None) -> Matcher:
    """One loaded model per worker process and configuration."""
    config = config or match_config()
    with _matchers_lock:
        if config not in _matchers:
            _matchers[config] = Matcher(config)
        return _matchers[config]


def url_hash(url: str) -> str:
    return hashlib.sha256(url.strip().encode()).hexdigest()


def _set_state(snippet_id: int, state: str, **fields: object) -> None:
    Snippet.objects.filter(pk=snippet_id).update(state=state, updated_at=timezone.now(), **fields)


def snippet_claim(*, snippet_id: int) -> bool:
    """Compare-and-set queued -> fetching, so each snippet is processed once even if delivered twice.

    A snippet stuck in a running state longer than the hard task time limit belonged to a lost
    worker and may be claimed again.
    """
    stale = timezone.now() - timedelta(seconds=settings.CELERY_TASK_TIME_LIMIT + 30)
    claimed = Snippet.objects.filter(pk=snippet_id, state=Snippet.State.QUEUED).update(
        state=Snippet.State.FETCHING, updated_at=timezone.now(), error_code="", error_message=""
    )
    if not claimed:
        claimed = Snippet.objects.filter(pk=snippet_id, state__in=RUNNING, updated_at__lt=stale).update(
            state=Snippet.State.FETCHING, updated_at=timezone.now()
        )
    return bool(claimed)


def _fresh_source(url: str, model_label: str) -> EvidenceSource | None:
    since = timezone.now() - timedelta(hours=settings.EVIDENCE_CACHE_HOURS)
    return (
        EvidenceSource.objects.filter(
            url_hash=url_hash(url), error_code="", fetched_at__gte=since, passages__embedding_model=model_label
        )
        .distinct()
        .order_by("-fetched_at")
        .first()
    )


def _is_transient(exc: FetchError) -> bool:
    return exc.error_code in TRANSIENT_CODES or (exc.error_code == "http_error" and exc.status in TRANSIENT_STATUSES)


def snippet_fail(*, snippet_id: int, error_code: str, message: str) -> None:
    """Mark a snippet failed from outside the pipeline (e.g. the task hit its soft time limit)."""
    _set_state(snippet_id, Snippet.State.FAILED, error_code=error_code, error_message=message[:2000])


def _fail(snippet_id: int, code: str, message: str, timings: dict[str, int]) -> None:
    _set_state(snippet_id, Snippet.State.FAILED, error_code=code, error_message=message[:2000], timings_ms=timings)


def _retrieve(
    snippet: Snippet, matcher: Matcher, timings: dict[str, int], *, final_attempt: bool
) -> EvidenceSource | None:
    """Fetch and extract the snippet's URL into an EvidenceSource with passage rows (no embeddings yet)."""
    label = matcher.model_label()
    started = time.perf_counter()
    try:
        fetched = fetch(snippet.url, fetch_policy())
    except FetchError as exc:
        timings["fetch"] = int((time.perf_counter() - started) * 1000)
        if _is_transient(exc) and not final_attempt:
            _set_state(
                snippet.pk,
                Snippet.State.QUEUED,
                error_code=exc.error_code,
                error_message=f"retrying: {exc.message}",
                timings_ms=timings,
            )
            raise TransientEvidenceError(exc.error_code) from exc
        _fail(snippet.pk, exc.error_code, exc.message, timings)
        return None
    timings["fetch"] = int((time.perf_counter() - started) * 1000)
    _set_state(snippet.pk, Snippet.State.EXTRACTING)
    started = time.perf_counter()
    try:
        extracted = extract(
            fetched.body, fetched.content_type, charset=fetched.charset, min_words=settings.EVIDENCE_MIN_WORDS
        )
    except ExtractionError as exc:
        timings["extract"] = int((time.perf_counter() - started) * 1000)
        _fail(snippet.pk, exc.error_code, exc.message, timings)
        return None
    timings["extract"] = int((time.perf_counter() - started) * 1000)
    text_hash = content_hash(extracted.text)
    started = time.perf_counter()
    with transaction.atomic():
        source = (
            EvidenceSource.objects.select_for_update()
            .filter(url_hash=url_hash(snippet.url))
            .order_by("-fetched_at")
            .first()
        )
        if source is None:
            source = EvidenceSource(url=snippet.url, url_hash=url_hash(snippet.url))
        unchanged = source.pk is not None and source.content_hash == text_hash
        source.final_url = fetched.final_url
        source.content_type = fetched.content_type
        source.title = (extracted.title or "")[:500]
        source.published_at = _parse_date(extracted.published)
        source.cleaned_text = extracted.text
        source.content_hash = text_hash
        source.byte_size = len(fetched.body)
        source.fetched_at = timezone.now()
        source.error_code = ""
        source.error_message = ""
        source.save()
        if not (unchanged and source.passages.filter(embedding_model=label).exists()):
            source.passages.filter(embedding_model=label).delete()
            Passage.objects.bulk_create(
                Passage(
                    source=source,
                    embedding_model=label,
                    chunk_index=chunk.index,
                    text=chunk.text,
                    char_start=chunk.start_char,
                    char_end=chunk.end_char,
                    n_tokens=chunk.n_tokens,
                    text_hash=content_hash(chunk.text),
                )
                for chunk in matcher.chunk(extracted.text)
            )
    timings["chunk"] = int((time.perf_counter() - started) * 1000)
    return source


def _parse_date(value: str | None) -> date | None:
    try:
        return date.fromisoformat(value[:10]) if value else None
    except ValueError:
        return None


def _load_cached_vectors(matcher: Matcher, passages: list[Passage]) -> None:
    # Embeddings already stored for identical passage texts (this URL or another) skip the model.
    hashes = {p.text_hash for p in passages if p.text_hash}
    stored = Passage.objects.filter(
        embedding_model=matcher.model_label(), text_hash__in=hashes, embedding__isnull=False
    )
    for text_hash, blob in stored.values_list("text_hash", "embedding"):
        matcher.cache.put((matcher.model_label(), text_hash), np.frombuffer(bytes(blob or b""), dtype=np.float32))


def _store_vectors(matcher: Matcher, passages: list[Passage], indices: list[int]) -> None:
    changed = []
    for i in indices:
        passage = passages[i]
        if passage.embedding is None:
            vector = matcher.cache.get((matcher.model_label(), passage.text_hash))
            if vector is not None:
                passage.embedding = vector.astype(np.float32).tobytes()
                changed.append(passage)
    Passage.objects.bulk_update(changed, ["embedding"])


def snippet_process(*, snippet_id: int, final_attempt: bool = True) -> None:
    """Fetch, extract, chunk, embed and match one snippet's URL, recording each stage.

    Failures end as state=failed with an error code; transient network errors raise
    TransientEvidenceError (snippet back to queued) unless this is the final attempt.
    """
    if not snippet_claim(snippet_id=snippet_id):
        log.info("snippet %s already claimed or done", snippet_id)
        return
    snippet = Snippet.objects.select_related("post").filter(pk=snippet_id).first()
    if snippet is None:  # removed by the contributor meanwhile
        return
    matcher = get_matcher()
    timings: dict[str, int] = {}
    total = time.perf_counter()
    source = _fresh_source(snippet.url, matcher.model_label())
    if source is not None:
        timings["cache_hit"] = 1
    else:
        source = _retrieve(snippet, matcher, timings, final_attempt=final_attempt)
        if source is None:
            return
    _set_state(snippet_id, Snippet.State.EMBEDDING, source=source)
    passages = list(source.passages.filter(embedding_model=matcher.model_label()).order_by("chunk_index"))
    if not passages:
        _fail(snippet_id, "empty_text", "no passages", timings)
        return
    _load_cached_vectors(matcher, passages)
    started = time.perf_counter()
    result = matcher.match(snippet.post.text, [p.text for p in passages])
    timings["match"] = int((time.perf_counter() - started) * 1000)
    timings.update({f"match_{k}": v for k, v in result.timings_ms.items()})
    _store_vectors(matcher, passages, result.embedded)
    timings["total"] = int((time.perf_counter() - total) * 1000)
    _set_state(
        snippet_id,
        Snippet.State.READY,
        source=source,
        passage=passages[result.best_index],
        similarity=result.best_score,
        scores=result.scores,
        timings_ms=timings,
        error_code="",
        error_message="",
    )
    if settings.EVIDENCE_REFINE and any(score is None for score in result.scores):
        from evidence.tasks import snippet_refine

        transaction.on_commit(lambda: snippet_refine.delay(snippet_id))


def snippet_refine(*, snippet_id: int) -> None:
    """Embed the passages the pre-filter skipped, so every score is stored and the best passage is
    the exhaustive one. A passage the contributor already reviewed is kept; only scores change."""
    snippet = Snippet.objects.select_related("post", "source").filter(pk=snippet_id, state=Snippet.State.READY).first()
    if snippet is None or snippet.source is None:
        return
    matcher = get_matcher()
    passages = list(snippet.source.passages.filter(embedding_model=matcher.model_label()).order_by("chunk_index"))
    if not passages:
        return
    _load_cached_vectors(matcher, passages)
    started = time.perf_counter()
    result = matcher.match(snippet.post.text, [p.text for p in passages], strategy="exhaustive")
    _store_vectors(matcher, passages, result.embedded)
    timings = {**snippet.timings_ms, "refine": int((time.perf_counter() - started) * 1000)}
    fields: dict[str, object] = {"scores": result.scores, "timings_ms": timings, "updated_at": timezone.now()}
    pending = Snippet.objects.filter(
        pk=snippet_id, state=Snippet.State.READY, confirmation=Snippet.Confirmation.PENDING
    )
    if not pending.update(passage=passages[result.best_index], similarity=result.best_score, **fields):
        Snippet.objects.filter(pk=snippet_id, state=Snippet.State.READY).update(**fields)
