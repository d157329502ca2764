from __future__ import annotations

import csv
import html
from collections.abc import Sequence
from pathlib import Path

from crowdnotes_site.lib.llm.classifier import JudgedNote
from crowdnotes_site.lib.llm.steps import judges
from crowdnotes_site.lib.llm.steps.common import Producer
from tests.lib.llm.steps.examples import POST, SNIPPETS


def test_it_labels_relevance_by_embedding_when_given_a_similarity() -> None:
    sims = {SNIPPETS[0].text: 0.61, SNIPPETS[1].text: 0.02}
    result = judges.relevance_baseline(post=POST, snippets=SNIPPETS, similarity=lambda a, b: sims[b])
    assert result.value is True
    assert result.producer == Producer("baseline", "embedding-cosine-v1(t=0.30)+claim-terms-v1")
    assert "Snippet 2: cosine similarity 0.020 < 0.30" in result.reasoning
    assert judges.relevance_baseline(post=POST, snippets=SNIPPETS[1:], similarity=lambda a, b: 0.1).value is False


def test_it_finds_no_lexical_relevance_for_an_unrelated_snippet() -> None:
    assert judges.relevance_baseline(post=POST, snippets=SNIPPETS[1:]).value is False
    assert judges.relevance_baseline(post=POST, snippets=SNIPPETS[:1]).value is True


def test_it_flags_unsupported_numbers_and_absolutes_in_correctness() -> None:
    good = judges.correctness_baseline(
        post=POST,
        note="Trials have not shown that high-dose vitamin C cures cancer.",
        snippets=SNIPPETS,
    )
    assert good.value is True, good.reasoning
    bad = judges.correctness_baseline(
        post=POST,
        note="Vitamin C never helps: 95% of cancer trials proved it useless.",
        snippets=SNIPPETS,
    )
    assert bad.value is False
    assert "95%" in bad.reasoning and "never" in bad.reasoning
    assert bad.producer.kind == "baseline"


def test_it_checks_visible_helpfulness_criteria() -> None:
    ok = judges.helpfulness_baseline(
        post=POST,
        note="Clinical trials have not shown that high-dose vitamin C cures cancer.",
        urls=["https://cancer.gov/vitc"],
    )
    assert ok.value is True
    no_source = judges.helpfulness_baseline(
        post=POST,
        note="Clinical trials have not shown that high-dose vitamin C cures cancer.",
        urls=[],
    )
    assert no_source.value is False and "no source" in no_source.reasoning
    opinion = judges.helpfulness_baseline(
        post=POST,
        note="I think these people are idiots and vitamin C does nothing.",
        urls=["https://x.org"],
    )
    assert opinion.value is False and "opinion" in opinion.reasoning and "hostile" in opinion.reasoning


def _real_notes(cn_data: Path, ids: set[str]) -> dict[str, str]:
    csv.field_size_limit(1 << 27)
    with (cn_data / "colin-fraser/notes-00000.tsv").open(newline="", encoding="utf-8") as fh:
        rows = csv.DictReader(fh, delimiter="\t", quoting=csv.QUOTE_NONE)
        found = {r["noteId"]: html.unescape(r["summary"]) for r in rows if r["noteId"] in ids}
    assert set(found) == ids
    return found


# Real 2021 notes: calm, sourced notes full of acronyms (VAERS, SARS, PCR, ASRM/ACOG/SMFM,
# ERCOT, FEMA), and two written in capitals.
CALM_ACRONYM_NOTES = {
    "1362902188595511296",  # VAERS ... VAERS
    "1366511713810599940",  # VAERS data ... https://vaers.hhs.gov
    "1367593090031226881",  # RT-qPCR ... SARS-CoV2 ... PCR primers ... RNA
    "1365671548393295876",  # the ASRM, ACOG and SMFM released a joint statement
    "1362018642267942915",  # ERCOT ... ERCOT
    "1369766561670651906",  # FEMA ... FEMA ... FEMA
}
SHOUTING_NOTES = {
    "1363319441337933824",  # IT IS NOT SAFE TO POST YOUR PASSWORD ON TWITTER.
    "1357694080491409408",  # VACCINES DO NOT MICROCHIP PEOPLE PLEASE DONT SUSPEND ME
}


def test_acronyms_in_real_notes_are_not_shouting(cn_data: Path) -> None:
    notes = _real_notes(cn_data, CALM_ACRONYM_NOTES | SHOUTING_NOTES)
    for note_id in CALM_ACRONYM_NOTES:
        result = judges.helpfulness_baseline(post=POST, note=notes[note_id], urls=["https://www.cdc.gov/x"])
        assert "Problems" not in result.reasoning or "shouting" not in result.reasoning, (note_id, result.reasoning)
    for note_id in SHOUTING_NOTES:
        result = judges.helpfulness_baseline(post=POST, note=notes[note_id], urls=["https://www.cdc.gov/x"])
        assert result.value is False and "shouting" in result.reasoning, note_id


def test_a_calm_sourced_note_about_sids_is_helpful_by_the_baseline() -> None:
    note = (
        "The CDC and the WHO say safe sleep on the back lowers the risk of SIDS; no study links SIDS to COVID vaccines."
    )
    result = judges.helpfulness_baseline(post=POST, note=note, urls=["https://www.cdc.gov/sids"])
    assert result.value is True, result.reasoning
    assert judges.shouting_run("THE CDC IS LYING about SIDS") == "THE CDC IS LYING"
    assert judges.shouting_run("The CDC, WHO, NIH and FDA agree") is None


def test_the_classifier_judge_counts_the_cited_urls() -> None:
    seen: list[JudgedNote] = []

    class Model:
        version = "clf-test"
        threshold = 0.5

        def predict_proba(self, notes: Sequence[JudgedNote]) -> list[float]:
            seen.extend(notes)
            return [0.9 if n.urls else 0.1 for n in notes]

    cited = judges.helpfulness_classifier(Model(), post=POST, note="Trials show no effect.", urls=["https://a.org"])
    uncited = judges.helpfulness_classifier(Model(), post=POST, note="Trials show no effect.", urls=[])
    assert cited.value is True and uncited.value is False
    assert seen[0] == JudgedNote("Trials show no effect.", ("https://a.org",), POST)
    assert "1 cited URL" in cited.reasoning


LABELLED = Path(__file__).resolve().parents[4] / "bench" / "data" / "judges_relevance_labelled.jsonl"


def _labelled() -> list[dict[str, object]]:
    import json

    return [json.loads(line) for line in LABELLED.read_text().splitlines() if line.strip()]


def test_a_note_on_another_claim_fails_relevance_even_with_snippets_on_the_post() -> None:
    from crowdnotes_site.lib.llm.steps.common import Evidence

    post = "Vaccines cause autism, new report shows."
    snippet = [Evidence(text="Large studies found vaccines do not cause autism; vaccines are safe for children.")]
    off = judges.relevance_baseline(
        post=post, snippets=snippet, note="Studies found no link between vaccines and sudden infant death syndrome."
    )
    assert off.value is False
    assert "The post is about autism, which the note never names" in off.reasoning
    assert off.producer.name == "lexical-overlap-v1+claim-terms-v1+note-on-claim-v1"
    on = judges.relevance_baseline(
        post=post, snippets=snippet, note="Large studies found no link between vaccines and autism."
    )
    assert on.value is True
    # Without a note (the search's and the pre-flight's own checks), only the snippets decide.
    assert judges.relevance_baseline(post=post, snippets=snippet).value is True


def test_every_off_claim_case_of_the_labelled_set_fails_the_note_check() -> None:
    cases = _labelled()
    off = [c for c in cases if c["kind"] == "off-claim"]
    on = [c for c in cases if c["kind"] == "on-claim"]
    assert len(off) >= 8 and len(on) >= 8
    caught = [c["id"] for c in off if judges.note_off_claim(str(c["post"]), str(c["note"]))]
    # One case is out of the offline rules' reach (a SIDS post with a note on measles vaccines:
    # it shares the post's key term "vaccines" and the post names no listed condition).
    assert caught == [c["id"] for c in off if c["id"] != "off-sids-measles"]
    assert not [c["id"] for c in on if judges.note_off_claim(str(c["post"]), str(c["note"]))]


# The key points of the CDC's page on vaccines and SIDS (../shared/data/webpages/health/cdc.gov__about-sids.html).
CDC_SIDS = (
    "SIDS is the sudden, unexpected death of a baby younger than 1 year of age that doesn't have a known cause "
    "even after a complete investigation. Multiple research studies and safety reviews have found that vaccines "
    "do not cause and are not linked to SIDS."
)
AUTISM_POST = "Vaccines cause autism, new report shows."


def test_a_page_on_the_topic_but_on_another_claim_fails_relevance() -> None:
    from crowdnotes_site.lib.llm.steps.common import Evidence

    # A note on autism citing the SIDS page: the cosine sees the topic (vaccines) and passes it.
    result = judges.relevance_baseline(
        post=AUTISM_POST,
        snippets=[Evidence(CDC_SIDS)],
        similarity=lambda a, b: 0.54,
        note="Studies of millions of children found no link between vaccines and autism.",
    )
    assert result.value is False
    assert "on the topic, not on the claim" in result.reasoning and "autism" in result.reasoning
    on_claim = "Studies of more than a million children found no link between the MMR vaccine and autism."
    assert (
        judges.relevance_baseline(post=AUTISM_POST, snippets=[Evidence(on_claim)], similarity=lambda a, b: 0.54).value
        is True
    )
    # The same page is relevant to the claim it is about.
    sids_post = "Vaccines cause SIDS: babies die after their shots."
    assert judges.relevance_baseline(post=sids_post, snippets=[Evidence(CDC_SIDS)], similarity=lambda a, b: 0.6).value


def test_a_copied_passage_that_does_not_answer_the_claim_fails_correctness() -> None:
    from crowdnotes_site.lib.llm.steps.common import Evidence

    copy = (
        "Multiple research studies and safety reviews have found that vaccines do not cause and are not linked to SIDS."
    )
    off = judges.correctness_baseline(post=AUTISM_POST, note=copy, snippets=[Evidence(CDC_SIDS)])
    assert off.value is False
    assert "copies a passage but does not address the post's claim" in off.reasoning
    assert off.extra["copied"] == 1.0
    # The same copy under the post it answers is correct: copying is not the fault, missing the claim is.
    on = judges.correctness_baseline(
        post="Vaccines cause SIDS: babies die after their shots.", note=copy, snippets=[Evidence(CDC_SIDS)]
    )
    assert on.value is True, on.reasoning


def test_claim_coverage_counts_key_terms_and_the_names_the_claim_is_about() -> None:
    assert judges.claim_names("The MMR vaccine causes autism, and the CDC knows it.") == ["autism", "mmr"]
    assert judges.claim_names("5G towers spread COVID-19.") == ["5g", "covid"]
    sids = judges.claim_coverage(AUTISM_POST, CDC_SIDS)
    assert sids.touched == ("vaccines",) and sids.named == () and not sids.addressed
    assert "none of the names the claim is about (autism)" in sids.explain()
    assert judges.claim_coverage(AUTISM_POST, "No link between vaccines and autism was found.").addressed
    # A post without content words asks nothing.
    assert judges.claim_coverage("Is it true?", "Anything.").addressed


def test_a_note_that_names_the_claims_code_name_addresses_it_whatever_story_details_it_leaves_out() -> None:
    from crowdnotes_site.lib.llm.steps.common import Evidence

    # The post's key terms are its story ("babies", "4 month shots", "cribs", "die"); the claim is SIDS.
    post = "Babies get their 2 and 4 month shots and then die in their cribs. Vaccines are causing SIDS and the CDC knows it."
    note = "Studies and safety reviews have found that vaccines do not cause and are not linked to SIDS."
    assert judges.correctness_baseline(post=post, note=note, snippets=[Evidence(CDC_SIDS)]).value is True
    # A condition is not such a name: COVID is the topic of this post, not its claim.
    az = "The AstraZeneca COVID vaccine doesn't work, trials showed it failed."
    spain = "Spain says a national COVID-19 vaccination plan will be launched in January."
    assert judges.correctness_baseline(post=az, note=spain, snippets=[Evidence(spain)]).value is False
