from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest

from evidence.chunking import chunk_text, special_token_count
from evidence.matching import Matcher, VectorCache, bm25, prerank

TOPICS = {
    "measles": "Measles is a contagious viral disease. The MMR vaccine gives two doses that protect children from measles infection and its complications such as pneumonia.",
    "volcano": "Volcanic eruptions throw ash high into the atmosphere. Lava flows from the crater and cools into basalt rock on the slopes of the mountain.",
    "football": "The football team won the championship after a penalty shootout. The goalkeeper saved two shots and the striker scored the winning goal.",
    "baking": "To bake sourdough bread, feed the starter, mix flour and water, let the dough rise overnight and bake it in a hot Dutch oven.",
}


def _document(order: list[str], repeat: int = 6) -> str:
    return "\n\n".join(" ".join([TOPICS[name]] * repeat) for name in order)


def test_it_chunks_with_overlap_and_character_offsets(minilm_matcher: Matcher) -> None:
    tokenizer = minilm_matcher.tokenizer
    text = _document(["measles", "volcano", "football", "baking"])
    chunks = chunk_text(text, tokenizer, window_tokens=128, overlap_tokens=32)
    content = 128 - special_token_count(tokenizer)
    assert len(chunks) > 4
    assert all(c.n_tokens <= content for c in chunks)
    assert all(text[c.start_char : c.end_char] == c.text for c in chunks)
    for left, right in itertools.pairwise(chunks):
        assert right.start_char < left.end_char  # consecutive windows overlap
        overlap = len(tokenizer(text[right.start_char : left.end_char], add_special_tokens=False)["input_ids"])
        assert abs(overlap - 32) <= 2
    assert chunks[-1].end_char == len(text.rstrip())
    assert [c.index for c in chunks] == list(range(len(chunks)))


def test_it_rejects_windows_smaller_than_the_overlap(minilm_matcher: Matcher) -> None:
    with pytest.raises(ValueError):
        chunk_text("some text", minilm_matcher.tokenizer, window_tokens=64, overlap_tokens=64)


def test_it_picks_the_passage_about_the_post(minilm_matcher: Matcher) -> None:
    passages = [TOPICS["volcano"], TOPICS["football"], TOPICS["measles"], TOPICS["baking"]]
    result = minilm_matcher.match("Vaccines against measles don't work for kids", passages, strategy="exhaustive")
    assert result.best_index == 2
    assert all(score is not None for score in result.scores)
    assert result.best_score == max(s for s in result.scores if s is not None)
    assert result.best_score > 0.3


def test_it_prefilters_but_still_finds_the_relevant_passage(
    minilm_matcher: Matcher, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(minilm_matcher, "cache", VectorCache())  # no passage embedded before
    passages = [TOPICS[name] for name in ["volcano", "football", "baking", "measles", "volcano", "football"]]
    result = minilm_matcher.match("Is the MMR jab useless against measles?", passages, strategy="prefilter", k=2)
    assert result.best_index == 3
    assert len(result.embedded) == 2
    assert sum(score is None for score in result.scores) == 4


def test_with_every_passage_cached_the_prefilter_gives_way_to_the_exhaustive_pick(
    minilm_matcher: Matcher, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(minilm_matcher, "cache", VectorCache())
    passages = [TOPICS[name] for name in ["volcano", "football", "baking", "measles", "volcano", "baking"]]
    post = "Sourdough needs a starter and an overnight rise."
    minilm_matcher.embed(passages)  # the head start: passages embedded before the post exists
    encoded: list[int] = []
    encode = minilm_matcher.model.encode

    def counting(texts: list[str], **kwargs: Any) -> Any:
        encoded.append(len(texts))
        return encode(texts, **kwargs)

    monkeypatch.setattr(minilm_matcher.model, "encode", counting)
    result = minilm_matcher.match(post, passages, strategy="prefilter", k=1)
    assert encoded == [1]  # only the post went through the model
    assert result.strategy == "exhaustive" and result.timings_ms["all_cached"] == 1
    assert all(score is not None for score in result.scores)
    exhaustive = minilm_matcher.match(post, passages, strategy="exhaustive")
    assert (result.best_index, result.scores) == (exhaustive.best_index, exhaustive.scores)
    assert result.best_index in (2, 5)


def test_it_reuses_cached_embeddings_by_content_hash(minilm_matcher: Matcher, monkeypatch: pytest.MonkeyPatch) -> None:
    passages = [TOPICS["volcano"] + " unique-cache-test", TOPICS["baking"] + " unique-cache-test"]
    first = minilm_matcher.embed(passages)
    calls: list[int] = []
    original = minilm_matcher.model.encode

    def counting_encode(texts: list[str], **kw: Any) -> Any:
        calls.append(len(texts))
        return original(texts, **kw)

    monkeypatch.setattr(minilm_matcher.model, "encode", counting_encode)
    second = minilm_matcher.embed(passages)
    assert calls == []
    np.testing.assert_allclose(first, second)


def test_it_scores_bm25_by_term_overlap() -> None:
    docs = [[1, 2, 3, 3], [4, 5, 6], [1, 7, 8]]
    scores = bm25([3, 1], docs)
    assert scores.argmax() == 0
    assert scores[1] == 0


def test_it_preranks_related_passages_first(minilm_matcher: Matcher) -> None:
    passages = [TOPICS["football"], TOPICS["baking"], TOPICS["measles"], TOPICS["volcano"]]
    scores = prerank(minilm_matcher.model, "all-MiniLM-L6-v2", "lava and ash from the eruption", passages)
    assert int(np.argmax(scores)) == 3


def test_it_matches_with_mpnet_the_study_model() -> None:
    from evidence.matching import MatchConfig

    matcher = Matcher(MatchConfig(strategy="exhaustive"))
    passages = [TOPICS["football"], TOPICS["measles"], TOPICS["baking"]]
    result = matcher.match("measles shots are dangerous for children", passages)
    assert result.best_index == 1
    assert matcher.model.get_embedding_dimension() == 768
