from __future__ import annotations

from crowdnotes_site.lib.llm.client import LLMClient
from crowdnotes_site.lib.llm.steps import supernote
from crowdnotes_site.lib.llm.steps.supernote import SourceNote
from tests.lib.llm.steps.examples import POST
from tests.support.llm_server import Reply, ScriptedLLM


def test_it_samples_supernote_candidates_with_the_given_temperature(
    llm_server: ScriptedLLM, llm_client: LLMClient
) -> None:
    notes = [
        SourceNote("Note A", helpful=1, not_helpful=5, tags=("opinion",)),
        SourceNote("Note B", helpful=6, somewhat=1),
    ]
    llm_server.script(Reply("A merged note."))
    result = supernote.supernote_candidate_llm(llm_client, post=POST, notes=notes)
    assert result.value == "A merged note."
    assert (llm_server.requests[0]["temperature"], llm_server.requests[0]["top_p"]) == (
        0.95,
        0.8,
    )
    assert "Tags given by raters: opinion" in llm_server.requests[0]["messages"][-1]["content"]
    base = supernote.supernote_candidate_baseline(post=POST, notes=notes)
    assert base.value == "Note B" and base.producer.name == "best-source-note-v1"
