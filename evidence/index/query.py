"""The local evidence index as a search backend: full-text candidates from the database's search
engine (evidence.index.store), reranked by the passage embeddings the evidence pipeline stored
for those documents (Passage.embedding, the matcher's model)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import date

import numpy as np

from evidence.index import store
from evidence.matching import Matcher
from evidence.models import Passage
from evidence.search.backends import SearchHit

RRF_K = 60


def rerank(query: str, hits: list[store.IndexHit], matcher: Matcher) -> list[store.IndexHit]:
    """Reciprocal-rank fusion of the lexical order and the best passage cosine to the query.
    A document without stored embeddings keeps its lexical rank in both lists (neither pushed up
    nor down); when none has any, the model is not even loaded."""
    ids = [h.source_id for h in hits]
    rows = Passage.objects.filter(
        source_id__in=ids, embedding_model=matcher.model_label(), embedding__isnull=False
    ).values_list("source_id", "embedding")
    vectors: dict[int, list[np.ndarray]] = {}
    for source_id, blob in rows:
        vectors.setdefault(source_id, []).append(np.frombuffer(bytes(blob or b""), dtype=np.float32))
    if not vectors:
        return hits
    q = matcher.embed([query])[0]
    best = {sid: float(np.max(np.vstack(vs) @ q)) for sid, vs in vectors.items()}
    by_embedding = sorted(best, key=lambda sid: -best[sid])
    embed_rank = {sid: i + 1 for i, sid in enumerate(by_embedding)}
    fused = {}
    for lexical_rank, hit in enumerate(hits, start=1):
        semantic_rank = embed_rank.get(hit.source_id, lexical_rank)
        fused[hit.source_id] = 1 / (RRF_K + lexical_rank) + 1 / (RRF_K + semantic_rank)
    return sorted(hits, key=lambda h: -fused[h.source_id])


def relaxed(query: str) -> str:
    """The query without its phrase quotes: the same words, each required, in any place."""
    return " ".join(query.replace('"', " ").split())


@dataclass
class LocalIndexBackend:
    undated: str = "exclude"
    matcher: Callable[[], Matcher] | None = None  # None: no rerank
    name: str = "local"

    def search(self, query: str, *, k: int, cutoff: date | None) -> list[SearchHit]:
        """The documents with every term of the query, best first. When a query with quoted
        phrases finds fewer than k, the documents that have every word of those phrases
        elsewhere than side by side follow them (still every word: never one word alone)."""
        hits = self._ranked(query, k=k, cutoff=cutoff)
        loose = relaxed(query)
        if len(hits) < k and loose != query:
            seen = {h.source_id for h in hits}
            hits += [h for h in self._ranked(loose, k=k, cutoff=cutoff) if h.source_id not in seen]
            query_for_snippets = loose
        else:
            query_for_snippets = query
        hits = store.with_snippets(query_for_snippets, hits[:k])
        return [
            SearchHit(
                url=h.url,
                title=h.title,
                snippet=h.snippet,
                published=h.published,
                backend=self.name,
                rank=i,
                query=query,
                final_url=h.final_url,
                content_hash=h.content_hash,
                source_id=h.source_id,
                category=h.category,
                copy_url=h.copy_url,
            )
            for i, h in enumerate(hits, start=1)
        ]

    def _ranked(self, query: str, *, k: int, cutoff: date | None) -> list[store.IndexHit]:
        hits = store.search(query, k=k * 3 if self.matcher else k, cutoff=cutoff, undated=self.undated, snippets=False)
        if self.matcher is not None and hits:
            hits = rerank(query, hits, self.matcher())
        return hits[:k]
