"""Split cleaned text into overlapping token windows, measured with the embedding model's tokenizer."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol


class Tokenizer(Protocol):
    def __call__(self, text: str, **kwargs: Any) -> Any: ...


@dataclass(frozen=True)
class Chunk:
    index: int
    text: str
    start_char: int  # offsets into the cleaned text, so the UI can show the passage in context
    end_char: int
    n_tokens: int


def special_token_count(tokenizer: Tokenizer) -> int:
    """Tokens the model adds around every input ([CLS]/[SEP], <s>/</s>)."""
    try:
        return int(tokenizer.num_special_tokens_to_add(pair=False))  # type: ignore[attr-defined]
    except AttributeError:
        return 0


def chunk_text(text: str, tokenizer: Tokenizer, *, window_tokens: int = 512, overlap_tokens: int = 128) -> list[Chunk]:
    """Windows of window_tokens tokens (special tokens included, so a window is exactly what the
    model sees) overlapping by overlap_tokens; each chunk keeps its character span in text."""
    content = window_tokens - special_token_count(tokenizer)
    if content <= overlap_tokens or overlap_tokens < 0:
        raise ValueError("window must be larger than the overlap plus the special tokens")
    encoded = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True, verbose=False)
    offsets: list[tuple[int, int]] = [tuple(pair) for pair in encoded["offset_mapping"]]
    if not offsets:
        return []
    stride = content - overlap_tokens
    chunks: list[Chunk] = []
    start = 0
    while True:
        end = min(start + content, len(offsets))
        first, last = offsets[start][0], offsets[end - 1][1]
        chunks.append(Chunk(len(chunks), text[first:last], first, last, end - start))
        if end >= len(offsets):
            break
        start += stride
    return chunks
