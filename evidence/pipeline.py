"""RETRIEVE + MATCH for one URL, with per-stage timings (pure: no ORM; the service persists it)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from evidence.chunking import Chunk
from evidence.extract import Extracted, ExtractionError, extract
from evidence.fetch import FetchError, FetchPolicy, FetchResult, fetch
from evidence.matching import Matcher, MatchResult

Stage = Callable[[str], None]


@dataclass
class PipelineResult:
    ok: bool
    error_code: str | None = None
    error_message: str = ""
    fetched: FetchResult | None = None
    extracted: Extracted | None = None
    chunks: list[Chunk] = field(default_factory=list)
    match: MatchResult | None = None
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
    result = PipelineResult(ok=False)

    def stage(name: str) -> float:
        if on_stage is not None:
            on_stage(name)
        return time.perf_counter()

    def done(name: str, started: float) -> None:
        result.timings_ms[name] = int((time.perf_counter() - started) * 1000)

    started = stage("fetching")
    try:
        result.fetched = fetch(url, policy)
    except FetchError as exc:
        result.error_code, result.error_message = exc.error_code, exc.message
        return result
    finally:
        done("fetch", started)
    started = stage("extracting")
    try:
        result.extracted = extract(
            result.fetched.body, result.fetched.content_type, charset=result.fetched.charset, min_words=min_words
        )
        result.chunks = matcher.chunk(result.extracted.text)
    except ExtractionError as exc:
        result.error_code, result.error_message = exc.error_code, exc.message
        return result
    finally:
        done("extract", started)
    if not result.chunks:
        result.error_code, result.error_message = "empty_text", "no passages"
        return result
    started = stage("embedding")
    result.match = matcher.match(post, [chunk.text for chunk in result.chunks])
    done("match", started)
    result.timings_ms.update({f"match_{key}": value for key, value in result.match.timings_ms.items()})
    result.ok = True
    return result
