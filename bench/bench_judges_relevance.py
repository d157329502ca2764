"""The offline relevance judge on its labelled set: does it fail notes about another claim than
the post's, and pass notes on the post's claim? Prints the agreement per kind of case.

Run (no database; --embeddings loads MiniLM, the demo's offline similarity):
    .venv/bin/python bench/bench_judges_relevance.py [--embeddings] [--without-note]

The set, bench/data/judges_relevance_labelled.jsonl, is written by hand: each case a
post, a note, the snippets its judge sees and whether the note is relevant; "off-claim" cases cite
snippets that touch the post's claim but carry a note on another claim.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from crowdnotes_site.lib.llm.steps.common import Evidence  # noqa: E402
from crowdnotes_site.lib.llm.steps.judges import relevance_baseline  # noqa: E402

DATA = ROOT / "bench" / "data" / "judges_relevance_labelled.jsonl"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--embeddings", action="store_true", help="cosine of MiniLM instead of word overlap")
    parser.add_argument("--without-note", action="store_true", help="ablation: no note, only the post and snippets")
    args = parser.parse_args()
    similarity = None
    if args.embeddings:
        from evidence.embedding import cosine

        similarity = cosine
    cases = [json.loads(line) for line in DATA.read_text().splitlines() if line.strip()]
    rows: dict[str, list[int]] = {}
    for case in cases:
        result = relevance_baseline(
            post=case["post"], snippets=[Evidence(text=t) for t in case["snippets"]], similarity=similarity,
            note="" if args.without_note else case["note"],
        )  # fmt: skip
        agree = result.value is case["relevant"]
        rows.setdefault(case["kind"], [0, 0])[0] += int(agree)
        rows[case["kind"]][1] += 1
        if not agree:
            print(f"disagrees: {case['id']}: judged {result.value}, labelled {case['relevant']}")
    judge = ("embedding cosine" if args.embeddings else "word overlap") + (
        " without the note" if args.without_note else " + note on claim"
    )
    print(f"\nOffline relevance judge ({judge}) on {DATA.relative_to(ROOT)}\n")
    print("| cases | n | agree | agreement |")
    print("|---|---|---|---|")
    total = [0, 0]
    for kind, (n_agree, n) in sorted(rows.items()):
        print(f"| {kind} | {n} | {n_agree} | {n_agree / n:.0%} |")
        total[0] += n_agree
        total[1] += n
    print(f"| all | {total[1]} | {total[0]} | {total[0] / total[1]:.0%} |")


if __name__ == "__main__":
    main()
