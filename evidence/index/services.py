"""Writes of the local evidence index: put documents in it (`documents_index_folder`,
`documents_index_urls`), each as an EvidenceSource with its passages (the same rows and the same
chunking as any evidence URL, so a proposed source needs no second fetch or chunking)."""

from __future__ import annotations

from collections import Counter
from datetime import date
from pathlib import Path

from django.conf import settings
from django.utils import timezone

from crowdnotes_site.lib.categories import MANIFEST_CATEGORIES, OTHER
from crowdnotes_site.lib.hashing import sha256_hex
from evidence import pipeline, services
from evidence.errors import ExtractionError, FetchError
from evidence.extract import Extracted, extract
from evidence.fetch import FetchResult
from evidence.index import ingest, store
from evidence.matching import Matcher
from evidence.models import EvidenceSource

INDEXED, UNCHANGED = "indexed", "unchanged"


def _store(
    *,
    url: str,
    fetched: FetchResult,
    extracted: object,
    matcher: Matcher,
    row: ingest.ManifestRow,
    copy_url: str,
    embed: bool,
) -> str:
    assert isinstance(extracted, Extracted)
    previous = EvidenceSource.objects.filter(url_hash=services.url_hash(url)).order_by("-fetched_at").first()
    unchanged = (
        previous is not None
        and previous.indexed_at is not None
        and previous.content_hash == sha256_hex(extracted.text)
        and previous.passages.filter(embedding_model=matcher.model_label()).exists()
    )
    source = services.source_store(url=url, fetched=fetched, extracted=extracted, matcher=matcher, timings={})
    fields: dict[str, object] = {"indexed_at": timezone.now(), "copy_url": copy_url}
    if row.title:
        fields["title"] = row.title[:500]
    if row.language:
        fields["language"] = row.language[:16]
    elif fetched.content_type == "text/html":
        fields["language"] = ingest.html_language(fetched.body)[:16]
    # The manifest knows what kind of page it is; it decides where the domain rules do not.
    hinted = MANIFEST_CATEGORIES.get(row.category)
    if hinted and source.category == OTHER and source.category_method.startswith("rule:"):
        fields.update(category=hinted, category_method=f"manifest:{row.category}")
    EvidenceSource.objects.filter(pk=source.pk).update(**fields)
    if embed:
        passages = services.passages_for(source=source, matcher=matcher)
        missing = [i for i, p in enumerate(passages) if p.embedding is None]
        if missing:
            matcher.embed([passages[i].text for i in missing])
            services.passage_vectors_store(matcher=matcher, passages=passages, indices=missing)
    return UNCHANGED if unchanged else INDEXED


def documents_index_folder(
    *, folder: Path, manifest: Path | None = None, base_url: str = "", embed: bool = False
) -> Counter[str]:
    """Index every HTML/PDF/text file of a folder. A document's URL is its manifest URL, else
    base_url + its path (when given), else its file:// URL; copy_url is base_url + its path."""
    store.ensure_schema()
    rows = ingest.read_manifest(manifest) if manifest else {}
    matcher = services.get_matcher()
    outcomes: Counter[str] = Counter()
    for doc in ingest.folder_documents(folder, rows):
        copy_url = base_url.rstrip("/") + "/" + doc.relative if base_url else ""
        url = doc.row.url or copy_url or doc.path.resolve().as_uri()
        body = doc.path.read_bytes()
        fetched = FetchResult(
            url=url, final_url=url, status=200, content_type=doc.content_type,
            declared_content_type=doc.content_type, charset=None, body=body,
        )  # fmt: skip
        try:
            extracted = extract(body, doc.content_type, min_words=settings.EVIDENCE_MIN_WORDS)
        except ExtractionError as exc:
            outcomes[f"failed: {exc.error_code}"] += 1
            continue
        outcomes[_store(url=url, fetched=fetched, extracted=extracted, matcher=matcher, row=doc.row,
                        copy_url=copy_url, embed=embed)] += 1  # fmt: skip
    return outcomes


def local_copy_index(*, url: str, folder: Path, manifest: Path, base_url: str = "") -> EvidenceSource:
    """Index the local copy of one real page (its `url` in the corpus's manifest) and return its
    source: read from the folder, not fetched, stored under its real address like any indexed
    document (the demo's notes cite such pages). ValueError when the manifest has no copy of it;
    ExtractionError when its text cannot be extracted."""
    rows = ingest.read_manifest(manifest)
    relative = next((local for local, row in rows.items() if row.url == url), None)
    if relative is None:
        raise ValueError(f"{url}: no local copy in {manifest}")
    doc = ingest.LocalDocument(folder / relative, relative, ingest.SUFFIX_TYPES[Path(relative).suffix.lower()],
                               rows[relative])  # fmt: skip
    store.ensure_schema()
    body = doc.path.read_bytes()
    fetched = FetchResult(
        url=url, final_url=url, status=200, content_type=doc.content_type,
        declared_content_type=doc.content_type, charset=None, body=body,
    )  # fmt: skip
    extracted = extract(body, doc.content_type, min_words=settings.EVIDENCE_MIN_WORDS)
    copy_url = base_url.rstrip("/") + "/" + relative if base_url else ""
    _store(url=url, fetched=fetched, extracted=extracted, matcher=services.get_matcher(), row=doc.row,
           copy_url=copy_url, embed=False)  # fmt: skip
    return EvidenceSource.objects.filter(url_hash=services.url_hash(url)).order_by("-fetched_at").get()


def documents_index_urls(*, url_file: Path, embed: bool = False) -> Counter[str]:
    """Fetch each URL of a text file through the safe fetcher and index it (final URL kept)."""
    store.ensure_schema()
    matcher = services.get_matcher()
    outcomes: Counter[str] = Counter()
    for url in ingest.read_url_list(url_file):
        run = pipeline.PipelineResult()
        try:
            pipeline.retrieve(url, run, policy=services.fetch_policy(), min_words=settings.EVIDENCE_MIN_WORDS)
        except (FetchError, ExtractionError) as exc:
            outcomes[f"failed: {exc.error_code}"] += 1
            continue
        assert run.fetched is not None and run.extracted is not None
        outcomes[_store(url=url, fetched=run.fetched, extracted=run.extracted, matcher=matcher,
                        row=ingest.ManifestRow(), copy_url="", embed=embed)] += 1  # fmt: skip
    return outcomes


def index_size() -> tuple[int, date | None, date | None]:
    """How many documents the index holds, and the range of their publication dates."""
    from django.db.models import Max, Min

    indexed = EvidenceSource.objects.filter(indexed_at__isnull=False)
    span = indexed.aggregate(first=Min("published_at"), last=Max("published_at"))
    return indexed.count(), span["first"], span["last"]
