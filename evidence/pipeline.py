"""RETRIEVE + MATCH for one URL: the stages, their order, timings and failures (pure: no ORM).

One flow, two callers: `manage.py evidence_probe` runs `retrieve_and_match` (nothing stored);
the snippet service (`evidence.snippets.snippet_process`) runs `retrieve` and `match` itself and
stores the source and its passages in between, so a URL already fetched (by anyone) skips
`retrieve` and stored embeddings skip the model. Failures are FetchError / ExtractionError
with a stable error code (evidence.errors); `retrieve_and_match` turns them into a result.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from evidence.chunking import Chunk
from evidence.errors import ExtractionError, FetchError
from evidence.extract import Extracted, extract
from evidence.fetch import FetchPolicy, FetchResult, fetch
from evidence.matching import Matcher, MatchResult, SentenceMatch

# Called with the stage about to start: "fetching", "extracting", "embedding" (the snippet states).
Stage = Callable[[str], None]
FETCHING, EXTRACTING, EMBEDDING = "fetching", "extracting", "embedding"


@dataclass
class PipelineResult:
    ok: bool = False
    error_code: str | None = None
    error_message: str = ""
    fetched: FetchResult | None = None
    extracted: Extracted | None = None
    chunks: list[Chunk] = field(default_factory=list)
    match: MatchResult | None = None
    # The best passage's sentence closest to the post (what the snippet page highlights).
    sentence: SentenceMatch | None = None
    timings_ms: dict[str, int] = field(default_factory=dict)

    def summary(self) -> dict[str, object]:
        """The JSON shape printed by `manage.py evidence_probe`."""
        best = None
        if self.match is not None:
            chunk = self.chunks[self.match.best_index]
            best = {
                "text": chunk.text,
                "score": round(self.match.best_score, 4),
                "chunk_index": chunk.index,
                "start_char": chunk.start_char,
                "end_char": chunk.end_char,
                # The exact text highlighted in the passage, and its cosine with the post.
                "sentence": self.sentence.text if self.sentence else None,
                "sentence_score": round(self.sentence.score, 4) if self.sentence else None,
            }
        return {
            "ok": self.ok,
            "error_code": self.error_code,
            "error_message": self.error_message,
            "final_url": self.fetched.final_url if self.fetched else None,
            "content_type": self.fetched.content_type if self.fetched else None,
            "title": self.extracted.title if self.extracted else None,
            "published": self.extracted.published if self.extracted else None,
            "n_words": self.extracted.n_words if self.extracted else None,
            "n_passages": len(self.chunks),
            "best_passage": best,
            "strategy": self.match.strategy if self.match else None,
            "timings_ms": self.timings_ms,
        }


@contextmanager
def timed(timings: dict[str, int], name: str) -> Iterator[None]:
    """Record the block's wall time in milliseconds under `name`, also when it raises."""
    started = time.perf_counter()
    try:
        yield
    finally:
        timings[name] = int((time.perf_counter() - started) * 1000)


def retrieve(
    url: str, result: PipelineResult, *, policy: FetchPolicy | None, min_words: int, on_stage: Stage | None = None
) -> None:
    """Fetch and extract `url` into `result` (fetched, extracted, timings); raises FetchError or
    ExtractionError. Chunking is left to the caller: the service skips it for unchanged pages."""
    if on_stage is not None:
        on_stage(FETCHING)
    with timed(result.timings_ms, "fetch"):
        result.fetched = fetch(url, policy)
    if on_stage is not None:
        on_stage(EXTRACTING)
    fetched = result.fetched
    with timed(result.timings_ms, "extract"):
        result.extracted = extract(fetched.body, fetched.content_type, charset=fetched.charset, min_words=min_words)


def match(
    post: str,
    passages: list[str],
    result: PipelineResult,
    *,
    matcher: Matcher,
    strategy: str | None = None,
    on_stage: Stage | None = None,
) -> MatchResult:
    """The passage closest to the post (into `result.match`); ExtractionError when there is none."""
    if not passages:
        raise ExtractionError("empty_text", "no passages")
    if on_stage is not None:
        on_stage(EMBEDDING)
    with timed(result.timings_ms, "match"):
        result.match = matcher.match(post, passages, strategy=strategy)
    result.timings_ms.update({f"match_{key}": value for key, value in result.match.timings_ms.items()})
    return result.match


def retrieve_and_match(
    url: str,
    post: str,
    *,
    matcher: Matcher,
    policy: FetchPolicy | None = None,
    min_words: int = 25,
    on_stage: Stage | None = None,
) -> PipelineResult:
    """Fetch, extract, chunk and match one URL; failures come back as error codes, never raised."""
    result = PipelineResult()
    try:
        retrieve(url, result, policy=policy, min_words=min_words, on_stage=on_stage)
        assert result.extracted is not None
        with timed(result.timings_ms, "chunk"):
            result.chunks = matcher.chunk(result.extracted.text)
        found = match(post, [chunk.text for chunk in result.chunks], result, matcher=matcher, on_stage=on_stage)
        with timed(result.timings_ms, "sentence"):
            result.sentence = matcher.best_sentence(post, result.chunks[found.best_index].text)
    except (FetchError, ExtractionError) as exc:
        result.error_code, result.error_message = exc.error_code, exc.message
        return result
    result.ok = True
    return result
