from __future__ import annotations

import dataclasses
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


# A page whose reference list repeats the post's words: the list must not win over the prose.
SIDS_PROSE = (
    "In 1992, the American Academy of Pediatrics recommended that healthy babies be placed on their backs to sleep. "
    "Research has found the rate of SIDS declined dramatically following the 1994 Back-to-Sleep campaign, and then "
    "stabilized in the 2000s at a time when the number of infant immunizations was increasing. The findings provide "
    "strong evidence that immunization is not linked to SIDS."
)
SIDS_REFERENCES = "\n".join(
    [
        "- Moro PL, Arana J, Cano M, Lewis P, Shimabukuro TT. Deaths Reported to the Vaccine Adverse Event Reporting "
        "System, United States, 1997-2013. Clin Infect Dis. 2015;61(6):980-7.",
        "- Institute of Medicine (US) Immunization Safety Review Committee. Immunization Safety Review: Vaccinations "
        "and Sudden Unexpected Death in Infancy. Washington, DC: National Academies Press, 2003.",
        "- Griffin MR, Ray WA, Livengood JR, et al. Risk of sudden infant death syndrome after immunization with "
        "diphtheria-tetanus-pertussis vaccine. N Engl J Med. 1988;319(10):618-23.",
        "- Silvers et al. The epidemiology of fatalities reported to the vaccine adverse event reporting system "
        "1990-1997. Pharmacoepidemiol Drug Saf. 2001;10(4):279-85.",
    ]
)
SIDS_POST = "Infant vaccines cause sudden infant death syndrome, babies die right after their immunization."


def test_a_reference_list_does_not_win_over_its_prose(minilm_matcher: Matcher, monkeypatch: pytest.MonkeyPatch) -> None:
    passages = [SIDS_REFERENCES, SIDS_PROSE]
    raw = minilm_matcher.match(SIDS_POST, passages, strategy="exhaustive")
    monkeypatch.setattr(minilm_matcher, "config", dataclasses.replace(minilm_matcher.config, prose_demotion=False))
    by_cosine = minilm_matcher.match(SIDS_POST, passages, strategy="exhaustive")
    scores = by_cosine.scores
    assert scores[0] is not None and scores[1] is not None
    assert by_cosine.best_index == 0 and scores[0] > scores[1]  # by cosine alone the list wins ...
    assert raw.best_index == 1  # ... demoted by its prose score, the prose wins
    assert raw.scores == scores  # the stored cosines are unchanged: demotion only reorders
    assert raw.best_score == scores[1]
    assert raw.prose[0] < 0.2 < 0.8 < raw.prose[1]


def test_the_prefilter_also_ranks_a_reference_list_below_its_prose(
    minilm_matcher: Matcher, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(minilm_matcher, "cache", VectorCache())
    passages = [TOPICS["volcano"], SIDS_REFERENCES, TOPICS["football"], SIDS_PROSE, TOPICS["baking"]]
    result = minilm_matcher.match(SIDS_POST, passages, strategy="prefilter", k=1)
    assert result.embedded == [3]


def test_it_finds_the_sentence_that_matches_the_post(minilm_matcher: Matcher) -> None:
    passage = "\n".join([TOPICS["volcano"], TOPICS["measles"], TOPICS["football"]])
    found = minilm_matcher.best_sentence("Two MMR doses don't protect kids from measles", passage)
    assert found is not None
    assert (
        found.text
        == "The MMR vaccine gives two doses that protect children from measles infection and its complications such as pneumonia."
    )
    assert passage[found.start : found.end] == found.text
    assert found.score > 0.5


def test_a_pair_of_sentences_is_shown_only_when_it_matches_clearly_better(minilm_matcher: Matcher) -> None:
    passage = TOPICS["measles"]
    single = minilm_matcher.best_sentence("Measles is a contagious viral disease", passage)
    assert single is not None and single.text == "Measles is a contagious viral disease."


def test_the_highlighted_sentence_has_no_heading_glued_to_it(minilm_matcher: Matcher) -> None:
    # Extracted HTML: headings and whole paragraphs on their own lines. The heading has five words
    # and ends in a lower-case word, which in a PDF's column would be a wrapped sentence.
    answer = (
        "In rare cases, green tea extract may cause liver problems, so talk to your doctor before taking it "
        "and stop if you have abdominal pain or dark urine."
    )
    passage = (
        "Green tea vs. black tea\n"
        "Green and black tea come from the same plant, but green tea is not fermented and keeps more of the "
        "catechins that give it its colour and taste.\n"
        "Side effects of green tea extract\n" + answer
    )
    found = minilm_matcher.best_sentence("Green tea extract pills are perfectly safe for your liver", passage)
    assert found is not None
    assert found.text == answer
    assert passage[found.start : found.end] == found.text


def test_the_sentence_with_the_posts_specific_words_wins_a_near_tie(
    minilm_matcher: Matcher, monkeypatch: pytest.MonkeyPatch
) -> None:
    post = "Kings County public health will test anyone who walks into their office, no referral needed."
    topic = "Click here for a list of providers testing for COVID-19 in Kings County."
    answer = "The Kings County public health office no longer tests walk-ins: you need a referral."
    passage = f"{topic}\n{answer}"
    # The model scores the sentence that repeats the post's topic a little higher (0.60 vs 0.55).
    cosine = {post: np.array([1.0, 0.0]), topic: np.array([0.60, 0.80]), answer: np.array([0.55, 0.835])}
    unrelated = np.array([0.0, 1.0])  # the pair of both sentences, not scored here
    monkeypatch.setattr(minilm_matcher, "embed", lambda texts: np.vstack([cosine.get(t, unrelated) for t in texts]))
    monkeypatch.setattr(minilm_matcher, "config", dataclasses.replace(minilm_matcher.config, sentence_lexical_weight=0))
    assert minilm_matcher.best_sentence(post, passage).text == topic  # type: ignore[union-attr]
    monkeypatch.setattr(
        minilm_matcher, "config", dataclasses.replace(minilm_matcher.config, sentence_lexical_weight=0.5)
    )
    found = minilm_matcher.best_sentence(post, passage)
    # "public", "health", "office", "referral" are in the answer only: it wins, and its score is its cosine.
    assert found is not None and found.text == answer and found.score == pytest.approx(0.55)


class _FakeHidden:
    """What the fake transformer returns: records that it was brought back with .cpu()."""

    def __init__(self, shape: tuple[int, ...], calls: list[str]) -> None:
        self.shape, self.calls = shape, calls

    def mean(self, dim: int) -> _FakeHidden:
        return _FakeHidden((self.shape[0], self.shape[2]), self.calls)

    def float(self) -> _FakeHidden:
        return self

    def cpu(self) -> Any:
        import torch

        self.calls.append("cpu")
        return torch.ones(self.shape)


def test_the_prefilter_table_feeds_the_model_on_its_device_and_reads_back_on_the_cpu(
    minilm_matcher: Matcher, tmp_path: Any
) -> None:
    """EMBEDDING_DEVICE=cuda cannot run here; a model whose weights live on torch's "meta" device
    stands in: every input must be created there, and results must come back with .cpu()."""
    import torch

    from evidence.matching import static_vectors

    calls: list[str] = []

    class FakeTransformer(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.weight = torch.nn.Parameter(torch.empty(4, 8, device="meta"))
            self.config = type("Config", (), {"hidden_size": 8})()

        def forward(self, input_ids: Any, attention_mask: Any) -> Any:
            assert input_ids.device.type == "meta" and attention_mask.device.type == "meta"
            return type("Out", (), {"last_hidden_state": _FakeHidden((input_ids.shape[0], 3, 8), calls)})()

    class FakeModel:
        tokenizer = minilm_matcher.tokenizer

        def __getitem__(self, index: int) -> Any:
            return type("Module", (), {"auto_model": FakeTransformer()})()

    table = static_vectors(FakeModel(), "fake-on-meta", cache_dir=tmp_path)  # type: ignore[arg-type]
    assert table.shape == (len(minilm_matcher.tokenizer), 8)
    assert calls and set(calls) == {"cpu"}
    assert float(table.sum()) == table.size  # the .cpu() results, not zeros
