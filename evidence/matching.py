"""Embedding match of a post against a source's passages (pure: no ORM).

Exhaustive matching embeds every 512-token passage with the configured model; with
all-mpnet-base-v2 on a 2-core CPU that is far over the 2 s budget for a long page
(bench/README.md, "Evidence: latency and agreement"). The "prefilter" strategy ranks passages cheaply first and embeds only the top-k with
the real model:
  - BM25 over the model's own word-piece tokens (sub-words catch "vaccines" ~ "vaccine"),
  - a static embedding per passage: the mean of per-token vectors distilled from the same
    model (each vocabulary token run through it once, cached on disk), which catches
    paraphrase that BM25 misses,
fused by reciprocal rank. bench/bench_evidence.py measures agreement with exhaustive.
"""

from __future__ import annotations

import json
import math
import os
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from crowdnotes_site.lib.hashing import sha256_hex
from crowdnotes_site.lib.lexical import idf_overlap
from evidence import sentences
from evidence.chunking import Chunk, chunk_text
from evidence.embedding import (
    MPNET,
    Building,
    StillBuilding,
    build_lock,
    build_once,
    build_timings,
    default_cache_dir,
    load_model,
    model_path,
    record_build_timing,
)
from evidence.prose import demotion, prose_score

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

STRATEGIES = ("exhaustive", "prefilter")


@dataclass(frozen=True)
class MatchConfig:
    model_name: str = MPNET
    window_tokens: int = 512
    overlap_tokens: int = 128
    strategy: str = "prefilter"
    prefilter_k: int = 2
    batch_size: int = 8
    cache_dir: Path | None = None
    # Rank passages by cosine x evidence.prose.demotion(prose score), so reference lists and
    # tables lose to the prose around them; False ranks by cosine alone (the benchmark's "before").
    prose_demotion: bool = True
    # Highlight a pair of adjacent sentences only when it beats the best single sentence by this.
    pair_margin: float = 0.03
    # Added to a sentence's cosine: this weight times the IDF-weighted share of the post's words
    # and numbers the sentence contains, the IDF taken over the passage's sentences. Cosine alone
    # favours the sentence that repeats the post's topic ("Type 2 diabetes ... can develop at any
    # age"); a word or number the post and one sentence share marks the sentence that answers it.
    # 0.5: chosen on the even half of the labelled set, checked on the odd half (bench/README.md).
    sentence_lexical_weight: float = 0.5


@dataclass
class MatchResult:
    best_index: int
    best_score: float
    # Cosine per passage; None where the pre-filter skipped the passage.
    scores: list[float | None]
    prerank_scores: list[float]
    embedded: list[int]
    model_name: str
    strategy: str
    timings_ms: dict[str, int] = field(default_factory=dict)
    # evidence.prose.prose_score of each passage (1.0 everywhere when demotion is off).
    prose: list[float] = field(default_factory=list)


@dataclass(frozen=True)
class SentenceMatch:
    start: int  # character offsets into the passage text
    end: int
    text: str
    score: float  # cosine of the sentence (or pair) and the post


class VectorCache:
    """Small in-process LRU of embeddings keyed by (model, text hash); the service adds the DB."""

    def __init__(self, max_items: int = 20_000) -> None:
        self.max_items = max_items
        self._items: OrderedDict[tuple[str, str], np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple[str, str]) -> np.ndarray | None:
        with self._lock:
            vector = self._items.get(key)
            if vector is not None:
                self._items.move_to_end(key)
            return vector

    def put(self, key: tuple[str, str], vector: np.ndarray) -> None:
        with self._lock:
            self._items[key] = vector
            self._items.move_to_end(key)
            while len(self._items) > self.max_items:
                self._items.popitem(last=False)


_static_lock = threading.Lock()
_static: dict[str, np.ndarray] = {}


TABLE_WHAT = "building the embedding table"
TABLE_BATCH = 1024  # vocabulary tokens per forward pass


def static_table_path(model_name: str, cache_dir: Path | None = None) -> Path:
    """Where the pre-filter table of a model lives (one .npy per model in the model folder)."""
    return (cache_dir or default_cache_dir()) / f"static-{Path(model_name).name}.npy"


def _partial(path: Path) -> tuple[Path, Path]:
    """The rows computed so far by the slices (.npy) and how far they got (.json)."""
    return path.with_name(f".{path.name}.partial.npy"), path.with_name(f".{path.name}.partial.json")


@dataclass(frozen=True)
class TableProgress:
    done: int  # vocabulary tokens computed
    total: int | None  # None until the first slice has seen the tokenizer
    since: float  # when the build was planned (epoch seconds)
    advanced: bool = False  # this call computed rows (False: finished, or another process held the lock)

    @property
    def finished(self) -> bool:
        return self.total is not None and self.done >= self.total


def table_progress(model_name: str, cache_dir: Path | None = None) -> TableProgress | None:
    """How far the table's build in slices got (None: planned by nobody, or already built)."""
    path = static_table_path(model_name, cache_dir)
    if path.exists():
        return None
    try:
        state = json.loads(_partial(path)[1].read_text())
        return TableProgress(int(state["done"]), state.get("total"), float(state["since"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def table_plan(model_name: str, cache_dir: Path | None = None) -> None:
    """Announce a build in slices before its first slice is queued: from now on a person's match
    ranks without the table (prerank) instead of building it beside the slices."""
    path = static_table_path(model_name, cache_dir)
    if path.exists() or table_progress(model_name, cache_dir) is not None:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    _write_json(_partial(path)[1], {"done": 0, "total": None, "since": time.time()})


def _write_json(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)


def _table_rows(
    model: SentenceTransformer, table: np.ndarray, start: int, stop: int, progress: Callable[[int, int], None] | None
) -> None:
    """Rows start..stop of the table: the model's pooled output for "[CLS] token [SEP]"."""
    import torch

    tokenizer = model.tokenizer
    transformer: Any = model[0].auto_model
    # The ids go where the model lives (EMBEDDING_DEVICE=cuda) and the vectors come back to the CPU
    # before numpy: a GPU worker is a setting, not a patch.
    device = next(transformer.parameters()).device
    with torch.inference_mode():
        for first in range(start, stop, TABLE_BATCH):
            ids = torch.arange(first, min(first + TABLE_BATCH, stop), device=device)
            batch = torch.stack(
                [torch.full_like(ids, tokenizer.cls_token_id), ids, torch.full_like(ids, tokenizer.sep_token_id)], 1
            )
            hidden = transformer(input_ids=batch, attention_mask=torch.ones_like(batch)).last_hidden_state
            table[first : first + len(ids)] = hidden.mean(1).float().cpu().numpy()
            if progress is not None:
                progress(first + len(ids), len(table))


def _started_table(model: SentenceTransformer, path: Path) -> tuple[np.ndarray, int, float]:
    """The table as far as the slices got (zeros past it), the rows done, and the planned time."""
    size = len(model.tokenizer)
    matrix, state_path = _partial(path)
    try:
        state = json.loads(state_path.read_text())
        done, since = int(state["done"]), float(state["since"])
    except (OSError, ValueError, KeyError, TypeError):
        done, since = 0, time.time()
    if done and matrix.exists():
        table = np.load(matrix)
        if table.shape[0] == size:
            return table, done, since
    transformer: Any = model[0].auto_model
    return np.zeros((size, int(transformer.config.hidden_size)), dtype=np.float32), 0, since


def _finish_table(path: Path, table: np.ndarray, tmp: Path) -> None:
    with tmp.open("wb") as out:
        np.save(out, table)
    for leftover in _partial(path):
        leftover.unlink(missing_ok=True)


def static_vectors(
    model: SentenceTransformer,
    model_name: str,
    cache_dir: Path | None = None,
    progress: Callable[[int, int], None] | None = None,
    *,
    wait: bool = True,
) -> np.ndarray:
    """One vector per vocabulary token: the model's pooled output for "[CLS] token [SEP]".

    Computed once per model and machine (every vocabulary token goes through the model) and kept as
    .npy in cache_dir, under evidence.embedding.build_once: a second process waits for the first
    (`wait=True`, going on from where slices got) or gets StillBuilding at once (`wait=False`, also
    while the warm-up builds it in slices: static_table_slice), never computing it beside it.
    `progress(done, total)` is called after each batch of tokens while the table is computed.
    """
    path = static_table_path(model_name, cache_dir)
    with _static_lock:
        if str(path) in _static:
            return _static[str(path)]
    if not wait and not path.exists() and (planned := table_progress(model_name, cache_dir)) is not None:
        last = build_timings(path.parent).get(path.name)
        raise StillBuilding(Building(what=TABLE_WHAT, since=planned.since, last_seconds=last))

    def compute(tmp: Path) -> None:
        table, done, _ = _started_table(model, path)
        _table_rows(model, table, done, len(table), progress)
        _finish_table(path, table, tmp)

    build_once(path, compute, what=TABLE_WHAT, wait=wait)
    with _static_lock:
        if str(path) not in _static:
            _static[str(path)] = np.load(path)
        return _static[str(path)]


def static_table_slice(
    model: SentenceTransformer, model_name: str, cache_dir: Path | None = None, *, batches: int = 1
) -> TableProgress:
    """The next `batches` batches of the table (one slice of the warm-up, queued behind people's
    work: evidence.tasks.prefilter_table_slice), kept on disk between slices; the last slice
    renames the table into place and records the build's duration since it was planned. Under the
    build lock: a slice that finds it held (another slice, or a whole build) computes nothing."""
    path = static_table_path(model_name, cache_dir)
    size = len(model.tokenizer)
    if path.exists():
        return TableProgress(size, size, time.time())
    with build_lock(path, TABLE_WHAT) as held:
        if not held or path.exists():
            return table_progress(model_name, cache_dir) or TableProgress(0, size, time.time())
        table, done, since = _started_table(model, path)
        stop = min(size, done + batches * TABLE_BATCH)
        _table_rows(model, table, done, stop, None)
        matrix, state = _partial(path)
        if stop >= size:
            tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp{path.suffix}")
            _finish_table(path, table, tmp)
            os.rename(tmp, path)
            record_build_timing(path, time.time() - since)
        else:
            tmp = matrix.with_name(f"{matrix.name}.{os.getpid()}.tmp.npy")
            with tmp.open("wb") as out:
                np.save(out, table)
            os.replace(tmp, matrix)
            _write_json(state, {"done": stop, "total": size, "since": since})
        return TableProgress(stop, size, since, advanced=True)


def _token_ids(tokenizer: Any, texts: list[str]) -> list[list[int]]:
    encoded = tokenizer(texts, add_special_tokens=False, verbose=False)["input_ids"]
    special = set(tokenizer.all_special_ids)
    return [[t for t in ids if t not in special] for ids in encoded]


def bm25(query: list[int], docs: list[list[int]], k1: float = 1.2, b: float = 0.75) -> np.ndarray:
    """Okapi BM25 of each doc for the query; IDF from the docs themselves (one source's passages)."""
    n = len(docs)
    counts = [Counter(doc) for doc in docs]
    lengths = np.array([len(doc) for doc in docs], dtype=np.float64)
    avg = lengths.mean() if n and lengths.mean() > 0 else 1.0
    scores = np.zeros(n)
    for term in set(query):
        df = sum(1 for c in counts if term in c)
        idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
        tf = np.array([c.get(term, 0) for c in counts], dtype=np.float64)
        scores += idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * lengths / avg))
    return scores


def _static_scores(table: np.ndarray, query: list[int], docs: list[list[int]]) -> np.ndarray:
    # Weight tokens by in-source IDF so boilerplate sub-words do not dominate the mean.
    n = len(docs)
    df = Counter(t for doc in docs for t in set(doc))

    def embed(ids: list[int]) -> np.ndarray:
        if not ids:
            return np.zeros(table.shape[1], dtype=np.float32)
        weights = np.array([math.log(1 + (n + 1) / (df.get(t, 0) + 0.5)) for t in ids], dtype=np.float32)
        vector = (table[ids] * weights[:, None]).sum(0)
        return vector / (np.linalg.norm(vector) + 1e-9)

    q = embed(query)
    return np.array([float(embed(doc) @ q) for doc in docs])


def _ranks(values: np.ndarray) -> np.ndarray:
    order = np.argsort(-values, kind="stable")
    ranks = np.empty(len(values))
    ranks[order] = np.arange(1, len(values) + 1)
    return ranks


def prerank(
    model: SentenceTransformer, model_name: str, post: str, passages: list[str], cache_dir: Path | None = None
) -> np.ndarray:
    """Cheap relevance of each passage to the post (higher is better): RRF of BM25 and static cosine."""
    ids = _token_ids(model.tokenizer, [post, *passages])
    query, docs = ids[0], ids[1:]
    lexical = bm25(query, docs)
    try:
        table = static_vectors(model, model_name, cache_dir, wait=False)
    except StillBuilding:
        # Another process (the warm-up) is building the table: rank by BM25 alone now rather than
        # hold the worker, and the people queued behind this request, until it is done.
        return 1 / (10 + _ranks(lexical))
    semantic = _static_scores(table, query, docs)
    return 1 / (10 + _ranks(lexical)) + 1 / (10 + _ranks(semantic))


def model_label(config: MatchConfig) -> str:
    """The key of a passage's embedding: chunk rows depend on window and overlap; a text's
    embedding on the model and window only. Known without loading the model."""
    return f"{config.model_name}@{config.window_tokens}/{config.overlap_tokens}"


class Matcher:
    """Holds a loaded model and its caches; thread-safe enough for one Celery worker process."""

    def __init__(self, config: MatchConfig | None = None, *, cache: VectorCache | None = None) -> None:
        self.config = config or MatchConfig()
        if self.config.strategy not in STRATEGIES:
            raise ValueError(f"strategy must be one of {STRATEGIES}")
        self.model = load_model(
            self.config.model_name, max_seq_length=self.config.window_tokens, cache_dir=self.config.cache_dir
        )
        self.cache = cache or VectorCache()
        self._key = model_label(self.config)
        self._encode_lock = threading.Lock()

    @property
    def tokenizer(self) -> Any:
        return self.model.tokenizer

    def model_label(self) -> str:
        return self._key

    def chunk(self, text: str) -> list[Chunk]:
        return chunk_text(
            text, self.tokenizer, window_tokens=self.config.window_tokens, overlap_tokens=self.config.overlap_tokens
        )

    def all_cached(self, texts: list[str]) -> bool:
        """Every text's embedding is already in the cache (a head start stored them)."""
        return all(self.cache.get((self._key, sha256_hex(text))) is not None for text in texts)

    def embed(self, texts: list[str]) -> np.ndarray:
        """Unit-normalized embeddings, reusing cached vectors by content hash."""
        keys = [(self._key, sha256_hex(text)) for text in texts]
        found: list[Any] = [self.cache.get(key) for key in keys]
        missing = [i for i, vector in enumerate(found) if vector is None]
        if missing:
            with self._encode_lock:  # torch already uses every core; parallel encodes only thrash
                fresh = self.model.encode(
                    [texts[i] for i in missing],
                    batch_size=self.config.batch_size,
                    normalize_embeddings=True,
                    convert_to_numpy=True,
                )
            for i, vector in zip(missing, fresh, strict=True):
                found[i] = vector.astype(np.float32)
                self.cache.put(keys[i], found[i])
        dim = self.model.get_embedding_dimension() or 0
        return np.vstack(found) if found else np.zeros((0, dim), dtype=np.float32)

    def match(
        self, post: str, passages: list[str], *, strategy: str | None = None, k: int | None = None
    ) -> MatchResult:
        """Best passage for the post by cosine similarity (exhaustive, or on the pre-filter's top-k).

        When every passage's embedding is cached (the URL had a head start) the match is
        exhaustive whatever the strategy: only the post is embedded, the rest is a dot product."""
        if not passages:
            raise ValueError("no passages to match")
        strategy = strategy or self.config.strategy
        k = k or self.config.prefilter_k
        timings: dict[str, int] = {}
        if strategy == "prefilter" and self.all_cached(passages):
            strategy = "exhaustive"
            timings["all_cached"] = 1
        started = time.perf_counter()
        prose = [prose_score(text) if self.config.prose_demotion else 1.0 for text in passages]
        factors = np.array([demotion(p) for p in prose])
        if strategy == "prefilter" and len(passages) > k:
            pre = prerank(self.model, self.config.model_name, post, passages, self.config.cache_dir)
            chosen = sorted(int(i) for i in np.argsort(-(pre * factors), kind="stable")[:k])
        else:
            pre = np.zeros(len(passages))
            chosen = list(range(len(passages)))
        timings["prerank"] = int((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        # The post gets its own encode call: batched with 512-token passages it would be padded
        # to 512 tokens and cost as much as a whole passage.
        post_vector = self.embed([post])[0]
        vectors = self.embed([passages[i] for i in chosen])
        timings["embed"] = int((time.perf_counter() - started) * 1000)
        sims = vectors @ post_vector
        scores: list[float | None] = [None] * len(passages)
        for i, sim in zip(chosen, sims, strict=True):
            scores[i] = float(sim)
        # Ranked by cosine x prose demotion; the score reported is the chosen passage's cosine.
        best_pos = int(np.argmax(sims * factors[chosen]))
        return MatchResult(
            best_index=chosen[best_pos],
            best_score=float(sims[best_pos]),
            scores=scores,
            prerank_scores=[float(x) for x in pre],
            embedded=chosen,
            model_name=self.config.model_name,
            strategy=strategy,
            timings_ms=timings,
            prose=prose,
        )

    def best_sentence(self, post: str, passage: str) -> SentenceMatch | None:
        """The sentence of `passage` (or two adjacent ones) closest to the post: the same model's
        cosine plus `sentence_lexical_weight` x the IDF-weighted share of the post's words it holds.

        A pair wins only when it beats the best single sentence by `pair_margin`: a longer span
        shares more words with anything, and the point is to show the one sentence to read."""
        spans = sentences.candidates(passage)
        if not spans:
            return None
        post_vector = self.embed([post])[0]
        texts = [span.text for span in spans]
        cosines = self.embed(texts) @ post_vector
        weight = self.config.sentence_lexical_weight
        sims = cosines + weight * np.array(idf_overlap(post, texts)) if weight else cosines
        pair = np.array([span.pair for span in spans])
        singles = np.where(~pair)[0]
        best = int(singles[np.argmax(sims[singles])]) if len(singles) else int(np.argmax(sims))
        if pair.any():
            best_pair = int(np.where(pair)[0][np.argmax(sims[pair])])
            if sims[best_pair] > sims[best] + self.config.pair_margin:
                best = best_pair
        span = spans[best]
        return SentenceMatch(span.start, span.end, span.text, float(cosines[best]))


def ensure_model_files(model_name: str, cache_dir: Path | None = None) -> Path:
    """Unpack/locate the model without loading it (for deploy scripts and checks)."""
    return model_path(model_name, cache_dir)
