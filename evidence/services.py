"""Evidence sources and passages: configuration of the fetcher and matcher, the shared cache of
fetched pages (by URL and content hash) and of passage embeddings (by text hash).

The pure work happens in evidence.pipeline (fetch → extract → match); the Snippet lifecycle that
drives it lives in evidence.snippets. This module decides what to reuse and stores the results.
"""

from __future__ import annotations

import threading
import time
from datetime import date, timedelta

import numpy as np
from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from crowdnotes_site.lib import categories
from crowdnotes_site.lib.hashing import sha256_hex
from crowdnotes_site.lib.llm.client import LLMError
from crowdnotes_site.lib.llm.steps.search import source_category_llm
from crowdnotes_site.llm import llm_client
from evidence import local_copies, pipeline
from evidence.errors import FetchError
from evidence.extract import Extracted
from evidence.fetch import FetchPolicy, FetchResult, parse_host_ports
from evidence.matching import MatchConfig, Matcher, model_label
from evidence.models import DomainCategory, EvidenceSource, Passage
from evidence.pipeline import PipelineResult, Stage, timed

TRANSIENT_CODES = {"timeout", "connection_error", "dns_error"}
TRANSIENT_STATUSES = {408, 425, 429, 500, 502, 503, 504}


def fetch_policy() -> FetchPolicy:
    return FetchPolicy(
        max_bytes=settings.EVIDENCE_MAX_BYTES,
        total_timeout=settings.EVIDENCE_FETCH_TIMEOUT,
        max_redirects=settings.EVIDENCE_MAX_REDIRECTS,
        allowed_ports=frozenset({80, 443, *settings.EVIDENCE_EXTRA_PORTS}),
        allowed_local=parse_host_ports(settings.EVIDENCE_ALLOWED_LOCAL),
        never_local_ports=frozenset(settings.EVIDENCE_NEVER_LOCAL_PORTS),
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


def configured_model_label() -> str:
    """The embedding key of the configured matcher, without loading the model (for web requests)."""
    return model_label(match_config())


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
    return sha256_hex(url.strip())


def is_transient(exc: FetchError) -> bool:
    """A network failure worth retrying later (the page may answer next time)."""
    return exc.error_code in TRANSIENT_CODES or (exc.error_code == "http_error" and exc.status in TRANSIENT_STATUSES)


def source_fresh(*, url: str, model_label: str) -> EvidenceSource | None:
    """A source of this URL with passages for this model, fetched within EVIDENCE_CACHE_HOURS or
    in the local evidence index (an indexed document is a snapshot the operator chose to keep)."""
    since = timezone.now() - timedelta(hours=settings.EVIDENCE_CACHE_HOURS)
    return (
        EvidenceSource.objects.filter(Q(fetched_at__gte=since) | Q(indexed_at__isnull=False))
        .filter(url_hash=url_hash(url), error_code="", passages__embedding_model=model_label)
        .distinct()
        .order_by("-fetched_at")
        .first()
    )


def source_embedded(*, url: str, model_label: str) -> EvidenceSource | None:
    """A fresh source of this URL whose every passage has its embedding stored (nothing left to
    compute but the post's vector)."""
    source = source_fresh(url=url, model_label=model_label)
    if source is None or source.passages.filter(embedding_model=model_label, embedding__isnull=True).exists():
        return None
    return source


def source_obtain(
    *, url: str, matcher: Matcher, run: PipelineResult, on_stage: Stage | None = None, owner: int | None = None
) -> EvidenceSource:
    """The URL's source with passages for the matcher's model: the cached one when fresh (fetched
    by anyone, or prefetched), otherwise fetched, extracted and stored now (`owner`: the user who
    added the URL, charged for the LLM call that may classify its domain). Raises FetchError or
    ExtractionError (the callers decide about retries)."""
    source = source_fresh(url=url, model_label=matcher.model_label())
    if source is not None:
        run.timings_ms["cache_hit"] = 1
        return source
    # A real address with a local copy (the demo's served pages) is read from the copy.
    copy = local_copies.copy_of(url)
    pipeline.retrieve(copy or url, run, policy=fetch_policy(), min_words=settings.EVIDENCE_MIN_WORDS, on_stage=on_stage)
    assert run.fetched is not None and run.extracted is not None
    return source_store(
        url=url, fetched=run.fetched, extracted=run.extracted, matcher=matcher, timings=run.timings_ms, owner=owner,
        copy_url=copy or "",
    )  # fmt: skip


def passages_embed(*, source: EvidenceSource, matcher: Matcher, timings: dict[str, int]) -> tuple[int, int]:
    """Embed and store one slice (`slice_embed`) of the source's passages that have no stored
    embedding yet (they do not depend on the post), in order. Returns (how many the model
    computed, how many are still missing)."""
    passages = passages_for(source=source, matcher=matcher)
    label = matcher.model_label()
    missing = [i for i, p in enumerate(passages) if matcher.cache.get((label, p.text_hash)) is None]
    with timed(timings, "embed_passages"):
        batch = slice_embed(
            matcher=matcher, texts=[p.text for p in passages], todo=missing, started=time.perf_counter()
        )
        passage_vectors_store(matcher=matcher, passages=passages, indices=list(range(len(passages))))
    return len(batch), len(missing) - len(batch)


def slice_embed(*, matcher: Matcher, texts: list[str], todo: list[int], started: float) -> list[int]:
    """One slice of long CPU work (the refine, the head start): embed the first passages of `todo`
    (indices into `texts`) into the matcher's cache, at most EVIDENCE_SLICE_PASSAGES of them, and
    with EVIDENCE_SLICE_SECONDS > 0 EVIDENCE_SLICE_STEP at a time until that many seconds have
    passed since `started` (at least one step, so every slice advances). Returns those embedded,
    in order."""
    todo = todo[: settings.EVIDENCE_SLICE_PASSAGES]
    budget_s, step = settings.EVIDENCE_SLICE_SECONDS, settings.EVIDENCE_SLICE_STEP
    if budget_s <= 0:
        if todo:
            matcher.embed([texts[i] for i in todo])
        return todo
    done: list[int] = []
    for first in range(0, len(todo), step):
        part = todo[first : first + step]
        matcher.embed([texts[i] for i in part])
        done.extend(part)
        if time.perf_counter() - started >= budget_s:
            break
    return done


def source_category(
    *, url: str, title: str = "", allow_llm: bool = False, owner: int | None = None
) -> tuple[str, str, str]:
    """(registered domain, category, method) of a source: the admin's mapping table (host, then
    domain) first, then the built-in rules; with allow_llm and SOURCE_CATEGORY_LLM, the LLM
    classifies what the rules leave as "other" and its answer is kept in the mapping table (so
    each domain is asked once, and an admin can correct it). The call counts against `owner`'s
    daily LLM budget (the user who added the source); past it the rules' answer stands."""
    decision = categories.category_by_rules(url)
    host = categories.host_of(url)
    mapped = list(DomainCategory.objects.filter(domain__in=[host, decision.domain])) if host else []
    if mapped:
        # The host is more specific than the registered domain: its row wins.
        best = max(mapped, key=lambda m: len(m.domain))
        return decision.domain, best.category, f"mapping:{best.domain} ({best.method})"
    if decision.category == categories.OTHER and allow_llm and settings.SOURCE_CATEGORY_LLM and decision.domain:
        client = llm_client(owner=owner)
        if client is not None:
            try:
                result = source_category_llm(
                    client, domain=decision.domain, title=title, labels=list(categories.CATEGORY_LABELS.items())
                )
            except LLMError:
                result = None
            if result is not None and result.value:
                row, _ = DomainCategory.objects.get_or_create(
                    domain=decision.domain, defaults={"category": result.value, "method": result.producer.label[:120]}
                )
                return decision.domain, row.category, f"mapping:{row.domain} ({row.method})"
    return decision.domain, decision.category, f"rule:{decision.rule}"


def source_store(
    *,
    url: str,
    fetched: FetchResult,
    extracted: Extracted,
    matcher: Matcher,
    timings: dict[str, int],
    owner: int | None = None,
    copy_url: str = "",
) -> EvidenceSource:
    """Save a fetched page as the URL's source, with its passages for the matcher's model.
    `copy_url`: the page was read from this local copy of `url`; the source keeps it and is
    categorised by `url`, the page's real address.

    An unchanged page (same content hash) keeps its passages and their stored embeddings."""
    label = matcher.model_label()
    text_hash = sha256_hex(extracted.text)
    domain, category, category_method = source_category(
        url=url if copy_url else (fetched.final_url or url), title=extracted.title or "", allow_llm=True, owner=owner
    )
    with timed(timings, "chunk"), transaction.atomic():
        source = (
            EvidenceSource.objects.select_for_update().filter(url_hash=url_hash(url)).order_by("-fetched_at").first()
        )
        if source is None:
            source = EvidenceSource(url=url, url_hash=url_hash(url))
        unchanged = source.pk is not None and source.content_hash == text_hash
        source.final_url = url if copy_url else fetched.final_url
        if copy_url:
            source.copy_url = copy_url
        source.content_type = fetched.content_type
        source.title = (extracted.title or "")[:500]
        source.published_at = _parse_date(extracted.published)
        source.cleaned_text = extracted.text
        source.content_hash = text_hash
        source.byte_size = len(fetched.body)
        source.fetched_at = timezone.now()
        source.error_code = ""
        source.error_message = ""
        source.domain, source.category, source.category_method = domain[:253], category, category_method[:120]
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
                    text_hash=sha256_hex(chunk.text),
                )
                for chunk in matcher.chunk(extracted.text)
            )
    return source


def _parse_date(value: str | None) -> date | None:
    try:
        return date.fromisoformat(value[:10]) if value else None
    except ValueError:
        return None


def passages_for(*, source: EvidenceSource, matcher: Matcher) -> list[Passage]:
    """The source's passages for the matcher's model, in order, with every stored embedding
    (of this URL or any other with an identical passage text) loaded into the matcher's cache."""
    passages = list(source.passages.filter(embedding_model=matcher.model_label()).order_by("chunk_index"))
    hashes = {p.text_hash for p in passages if p.text_hash}
    stored = Passage.objects.filter(
        embedding_model=matcher.model_label(), text_hash__in=hashes, embedding__isnull=False
    )
    for text_hash, blob in stored.values_list("text_hash", "embedding"):
        matcher.cache.put((matcher.model_label(), text_hash), np.frombuffer(bytes(blob or b""), dtype=np.float32))
    return passages


def passage_vectors_store(*, matcher: Matcher, passages: list[Passage], indices: list[int]) -> None:
    """Store the embeddings the matcher computed for these passages (so nobody computes them twice)."""
    changed = []
    for i in indices:
        passage = passages[i]
        if passage.embedding is None:
            vector = matcher.cache.get((matcher.model_label(), passage.text_hash))
            if vector is not None:
                passage.embedding = vector.astype(np.float32).tobytes()
                changed.append(passage)
    Passage.objects.bulk_update(changed, ["embedding"])
