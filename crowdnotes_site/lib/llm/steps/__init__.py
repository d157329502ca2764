"""Every LLM-backed step of the product, one module per task family, each step with a prompt
(through `crowdnotes_site.lib.llm.client`) and an offline baseline for when no endpoint is configured:

- `common`     Producer, StepResult, Evidence, the LLM runner (`llm_step`), shared lexical helpers
- `drafting`   a note draft from confirmed snippets (crowdnotes_site.lib.llm.drafting)
- `judges`     relevance, correctness, helpfulness (crowdnotes_site.lib.llm.pipeline)
- `search`     search queries and the most useful result (automation)
- `principles` Supernote principle checks
- `supernote`  a Supernote candidate from existing notes
- `topics`     health-topic labels
- `compare`    pairwise evidence utility, machine vs human evidence (the benchmark)

Every result says who produced it (`Producer`): "llm" + model name, "baseline" + baseline
name, or "classifier" + version. Baselines are honest, simple heuristics, never presented as
an LLM. No ORM and no model loading here: similarity functions and classifiers are passed in.
Each family declares the versions of its prompts (`VERSIONS`, bumped when a prompt's text
changes; stored decisions record them); PROMPT_VERSIONS is all of them.
"""

from __future__ import annotations

from crowdnotes_site.lib.llm.steps import compare, drafting, judges, principles, search, supernote, topics

PROMPT_VERSIONS: dict[str, str] = {
    **drafting.VERSIONS,
    **judges.VERSIONS,
    **search.VERSIONS,
    **principles.VERSIONS,
    **supernote.VERSIONS,
    **topics.VERSIONS,
    **compare.VERSIONS,
}
