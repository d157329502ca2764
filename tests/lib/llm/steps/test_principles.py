from __future__ import annotations

from crowdnotes_site.lib.llm.client import LLMClient
from crowdnotes_site.lib.llm.steps import principles
from tests.support.llm_server import Reply, ScriptedLLM


def test_it_checks_principles(llm_server: ScriptedLLM, llm_client: LLMClient) -> None:
    llm_server.script(Reply("Loaded words.\nFinal decision: no"))
    result = principles.principle_check_llm(llm_client, text="Idiots believe this.", principle="neutral")
    assert result.value is False and result.prompt_version == "principle-neutral-v3"
    assert (
        principles.principle_check_baseline(text="In my opinion it probably works.", principle="no_opinion").value
        is False
    )
    assert principles.principle_check_baseline(text="Trials found no effect.", principle="no_opinion").value is True


def test_the_neutral_filter_fails_scorn_in_clean_words_and_insults() -> None:
    scorn = "This dangerous nonsense has been debunked; the people sharing it should be ashamed."
    result = principles.principle_check_baseline(text=scorn, principle="neutral")
    assert result.value is False
    assert '"dangerous nonsense"' in result.reasoning and '"should be ashamed"' in result.reasoning
    assert result.producer.name == "lexicon-v2+profanity-classifier"
    calm = "Large studies of more than a million children found no link between vaccines and autism."
    assert principles.principle_check_baseline(text=calm, principle="neutral").value is True


def test_the_profanity_classifier_scores_insults_high_and_calm_notes_low() -> None:
    # An insult in words no list here names; one insulting sentence in a calm note is not averaged away.
    insult = "The study covered a million children. Whoever posted this is a complete imbecile."
    assert principles.offensive_probability(insult) >= principles.OFFENSIVE_THRESHOLD
    assert principles.principle_check_baseline(text=insult, principle="neutral").value is False
    for calm in (
        "The CDC says vaccines do not cause SIDS; babies should lie on their backs to sleep.",
        "Slimming pills sold online have contained DNP, a highly toxic industrial chemical that killed a student.",
    ):
        assert principles.offensive_probability(calm) < principles.OFFENSIVE_THRESHOLD, calm
        assert principles.principle_check_baseline(text=calm, principle="neutral").value is True
