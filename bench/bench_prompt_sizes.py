"""Prompt size and build time per prompt builder (untrusted text goes in as a fenced JSON data
block). Pure: no database, no LLM. Runs on any commit whose prompt builders have
these signatures, so a before/after comparison is `git stash`/checkout + the same command.

    python bench/bench_prompt_sizes.py [--repeat 2000]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from crowdnotes_site.lib.llm.steps import compare, drafting, judges, principles, search, supernote, topics
from crowdnotes_site.lib.llm.steps.common import Evidence, render
from crowdnotes_site.lib.llm.steps.supernote import SourceNote

POST = "Vitamin C cures cancer, doctors won't tell you."
PASSAGE = (
    "High-dose vitamin C has been studied in cancer patients. Trials have not shown that it cures "
    "cancer. Some studies looked at quality of life."
)
EV = [
    Evidence(PASSAGE, "https://cancer.gov/vitc"),
    Evidence("The weather in Paris is mild in spring.", "https://t.example/p"),
]
NOTE = "Trials have not shown that high-dose vitamin C cures cancer. https://cancer.gov/vitc"
CANDS = [("Paris weather", "Mild in spring.", "https://t.example/1"), ("Vitamin C", PASSAGE, "https://c.example/2")]
NOTES = [SourceNote(NOTE, 3, 1, 0, ("sources",)), SourceNote("Vitamin C is not a cancer cure, trials show.")]
BUILDERS = {
    "draft": lambda: drafting.draft_prompt(POST, EV, 280),
    "relevance": lambda: judges.relevance_prompt(POST, EV[0]),
    "correctness": lambda: judges.correctness_prompt(POST, NOTE, EV),
    "helpfulness": lambda: judges.helpfulness_prompt(POST, NOTE, ["https://cancer.gov/vitc"]),
    "queries": lambda: search.search_queries_prompt(POST, 3),
    "utility": lambda: search.pick_useful_prompt(POST, CANDS),
    "topic": lambda: topics.topic_prompt(POST),
    "principle": lambda: principles.principle_prompt(NOTE, "neutral"),
    "compare": lambda: compare.compare_prompt(POST, EV[:1], EV[1:]),
    "supernote": lambda: supernote.supernote_prompt(POST, NOTES, 280),
}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=2000)
    args = parser.parse_args()
    print("| prompt | chars | build µs |")
    print("|---|---|---|")
    for name, build in BUILDERS.items():
        chars = len(render(build()))
        started = time.perf_counter()
        for _ in range(args.repeat):
            build()
        micros = (time.perf_counter() - started) / args.repeat * 1e6
        print(f"| {name} | {chars} | {micros:.1f} |")


if __name__ == "__main__":
    main()
