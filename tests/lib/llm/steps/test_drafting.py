from __future__ import annotations

import re
from pathlib import Path

from crowdnotes_site.lib.llm.client import LLMClient
from crowdnotes_site.lib.llm.steps import drafting
from crowdnotes_site.lib.llm.steps.common import Evidence, Producer
from crowdnotes_site.lib.llm.steps.drafting import readable_sentences
from tests.lib.llm.steps.examples import POST, SNIPPETS
from tests.support.llm_server import Reply, ScriptedLLM


def test_it_drafts_extractively_within_budget_from_snippet_sentences() -> None:
    result = drafting.draft_note_baseline(post=POST, snippets=SNIPPETS, budget=120)
    assert result.producer == Producer("baseline", "extractive-lexical-v3")
    assert result.value and len(result.value) <= 120
    # the two sentences sharing most words with the post, in rank order; Paris never matches
    assert (
        result.value
        == "High-dose vitamin C has been studied in cancer patients. Trials have not shown that it cures cancer."
    )


def test_it_rejects_an_llm_draft_with_a_url_or_over_budget(llm_server: ScriptedLLM, llm_client: LLMClient) -> None:
    llm_server.script(
        Reply("Trials show no cure. https://cancer.gov"),
        Reply("x" * 200),
        Reply("Line one\nLine two"),
        Reply('"Trials have not shown that vitamin C cures cancer."'),
    )
    values = [drafting.draft_note_llm(llm_client, post=POST, snippets=SNIPPETS, budget=150).value for _ in range(4)]
    assert values == [
        None,
        None,
        None,
        "Trials have not shown that vitamin C cures cancer.",
    ]
    assert "at most 150 characters" in llm_server.requests[0]["messages"][-1]["content"]


def _page_text(shared_data: Path, name: str) -> str:
    from evidence.extract import extract

    return extract((shared_data / "webpages" / "health" / name).read_bytes(), "text/html").text


def _reads_as_sentences(text: str) -> None:
    for sentence in readable_sentences(text):
        assert sentence[0].isupper() or sentence[0].isdigit(), sentence
        assert sentence.endswith((".", "!", "?")), sentence
        assert not re.match(r"(Also|However|In addition|Furthermore|And|But|See|Learn|View|Read more)\b", sentence)
        assert not re.search(r"\bpii:|\d{4};\d|\bthis page\b", sentence, re.IGNORECASE), sentence
        assert " - " not in sentence, sentence  # bullets are split


def test_offline_drafts_read_as_sentences_on_the_cdc_sids_page(shared_data: Path) -> None:
    text = _page_text(shared_data, "cdc.gov__about-sids.html")
    kept = readable_sentences(text)
    _reads_as_sentences(text)
    # Glued headings come off ("Steps you can take", "What CDC is doing", "Key points", "Overview").
    assert any(s.startswith("In 1992, the American Academy of Pediatrics recommended") for s in kept)
    assert any(s.startswith("CDC and FDA are committed to monitoring the safety of vaccines.") for s in kept)
    assert any(s.startswith("Babies receive multiple vaccines") for s in kept)
    # A leading connective is dropped; the pointer and the reference list are not sentences of a note.
    assert any(s.startswith("Research has found the rate of SIDS declined dramatically") for s in kept)
    assert not any(s.startswith(("See the published article", "Also,", "Key points", "Overview")) for s in kept)
    assert not any(s in ("Pediatrics.", "Pediatr Infect Dis J.") for s in kept)
    draft = drafting.draft_note_baseline(
        post="Vaccines cause SIDS: babies die after their shots", snippets=[Evidence(text=text)], budget=280
    )
    assert draft.value and len(draft.value) <= 280
    assert "vaccines do not cause and are not linked to SIDS" in draft.value
    assert not re.search(r"\b(Also|See|Key points|Overview)\b", draft.value)
    assert draft.producer == Producer("baseline", "extractive-lexical-v3")


def test_offline_drafts_read_as_sentences_on_state_health_pages(shared_data: Path) -> None:
    nsw = _page_text(shared_data, "health.nsw.gov.au__Pages-20200501_00.html")
    _reads_as_sentences(nsw)
    assert any(s.startswith("As at 8pm Thursday 30 April 2020, an additional 9 cases") for s in readable_sentences(nsw))
    nichd = _page_text(shared_data, "safetosleep.nichd.nih.gov__home.html")
    _reads_as_sentences(nichd)
    assert not any(s.startswith(("Learn about", "Get free materials")) for s in readable_sentences(nichd))


# Passages of a real report on "feather duvet lung"
# (../shared/data/webpages/health/livescience.com__feather-duvet-lung.html): the first is not about feathers
# or lungs, the second is.
DUVET_OFF_POINT = (
    "The patient was given steroids, and switched his bedding to hypoallergenic synthetic materials. His symptoms "
    "improved rapidly within a month, and by six months he felt well again. After a year, his symptoms completely "
    "cleared and he is now fully recovered, Dempsey said. \"It doesn't affect me at all now and my life is pretty "
    'much as it was before," the patient wrote in the case study.'
)
DUVET_ON_POINT = (
    'Feather duvet lung is a type of "hypersensitive pneumonitis" in which the body\'s immune response to a '
    "particular outside trigger causes the lung's air sacs and airways to become inflamed. \"I'm sure it happens "
    'much more than we realize," Dempsey said.'
)
DUVET_POST = "Feather duvets cause lung disease, doctors warn."


def test_the_offline_draft_says_that_no_passage_addresses_the_claim() -> None:
    result = drafting.draft_note_baseline(post=DUVET_POST, snippets=[Evidence(DUVET_OFF_POINT)], budget=279)
    assert result.value is not None
    assert result.value.startswith("None of the confirmed passages addresses the post's claim")
    assert "steroids" not in result.value and len(result.value) <= 279
    assert result.extra["addresses_claim"] is False


def test_the_offline_draft_opens_with_the_sentence_on_the_claim() -> None:
    result = drafting.draft_note_baseline(
        post=DUVET_POST, snippets=[Evidence(DUVET_OFF_POINT), Evidence(DUVET_ON_POINT)], budget=279
    )
    assert result.value is not None and result.value.startswith("Feather duvet lung is a type of")
    assert "steroids" not in result.value
    assert result.extra["addresses_claim"] is True
