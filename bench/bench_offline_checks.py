"""The offline checks a moderator relies on when no LLM is configured, on labelled cases written
for them: relevance (does a passage address the post's claim, not only its topic), correctness
(is the note supported by the passages *and* about the post's claim), the "neutral" principle
filter (insults and loaded words), and the offline draft (does it answer the claim, or say that no
confirmed passage does). Prints, per check and part, n, accuracy and the false-pass rate.

Run (no database; --embeddings loads MiniLM, the demo's offline similarity for relevance):
    .venv/bin/python bench/bench_offline_checks.py [--embeddings] [--code DIR] [--real-notes]

--code DIR puts DIR first on the import path, so the same cases run on another version of
`crowdnotes_site` (e.g. `git archive <commit> crowdnotes_site | tar -x -C DIR` for the code
before a change): the "before" column of bench/README.md, "Offline checks a moderator can trust".

--real-notes adds the neutral filter on real 2021 notes (../shared/data/communitynotes/colin-fraser):
the share it fails among notes raters tagged argumentative/inflammatory or harassment (at least half
of at least 2 ratings) and among calm ones (at least 3 ratings, none with those tags, at least half
"helpful"). The tags are the raters' and broader than wording (partisan arguments count), so this
measures how often the filter stops calm notes more than what it should catch.

The cases are two files. bench/data/offline_checks_tuning.jsonl was used to choose the checks'
rules and thresholds; bench/data/offline_checks_fresh.jsonl was written after they were fixed
and never used to change them. Each line: `check` (relevance | correctness | neutral | draft),
`id`, `kind`, the inputs (`post`, `note`, `snippets`, `text`), `sources` (the page of
../shared/data/webpages a passage was taken from, when it was) and `expected` (True when the check
should pass; for drafts "answers", with an `answer` the draft must contain, or "none").
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "bench" / "data"
PARTS = ("tuning", "fresh")
CHECKS = ("relevance", "correctness", "neutral", "draft")


def load(part: str) -> list[dict[str, Any]]:
    path = DATA / f"offline_checks_{part}.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def judge(case: dict[str, Any], similarity: Callable[[str, str], float] | None) -> tuple[bool, str]:
    """(whether the code's answer is the labelled one, what the code answered)."""
    from crowdnotes_site.lib.llm.steps import drafting, judges, principles
    from crowdnotes_site.lib.llm.steps.common import Evidence

    snippets = [Evidence(text=t) for t in case.get("snippets", [])]
    check = case["check"]
    if check == "relevance":
        value = judges.relevance_baseline(
            post=case["post"], snippets=snippets, similarity=similarity, note=case.get("note", "")
        ).value
        return value is case["expected"], str(value)
    if check == "correctness":
        value = judges.correctness_baseline(post=case["post"], note=case["note"], snippets=snippets).value
        return value is case["expected"], str(value)
    if check == "neutral":
        value = principles.principle_check_baseline(text=case["text"], principle="neutral").value
        return value is case["expected"], str(value)
    if check == "draft":
        result = drafting.draft_note_baseline(post=case["post"], snippets=snippets, budget=279)
        says_none = result.extra.get("addresses_claim") is False
        text = str(result.value or "")
        if case["expected"] == "none":
            return says_none, text
        return (not says_none and case["answer"].lower() in text.lower()), text
    raise ValueError(f"unknown check {check!r}")


def real_notes(folder: Path) -> dict[str, list[str]]:
    """Real notes by what their raters said of them: "tagged inflammatory" and "calm"."""
    import csv
    import html
    from collections import Counter

    csv.field_size_limit(1 << 27)
    n: Counter[str] = Counter()
    tagged: Counter[str] = Counter()
    helpful: Counter[str] = Counter()
    with (folder / "ratings-00000.tsv").open(newline="", encoding="utf-8") as fh:
        for r in csv.DictReader(fh, delimiter="\t", quoting=csv.QUOTE_NONE):
            n[r["noteId"]] += 1
            helpful[r["noteId"]] += r["helpful"] == "1"
            tagged[r["noteId"]] += "1" in (
                r["notHelpfulArgumentativeOrInflammatory"],
                r["notHelpfulSpamHarassmentOrAbuse"],
            )
    out: dict[str, list[str]] = {"tagged inflammatory": [], "calm": []}
    with (folder / "notes-00000.tsv").open(newline="", encoding="utf-8") as fh:
        for r in csv.DictReader(fh, delimiter="\t", quoting=csv.QUOTE_NONE):
            k, text = r["noteId"], html.unescape(r["summary"])
            if n[k] >= 2 and tagged[k] * 2 >= n[k]:
                out["tagged inflammatory"].append(text)
            elif n[k] >= 3 and not tagged[k] and helpful[k] * 2 >= n[k]:
                out["calm"].append(text)
    return out


def neutral_parts(cases: list[dict[str, Any]]) -> None:
    """The neutral filter's two parts on their own (current code only): the classifier, the list."""
    from crowdnotes_site.lib.llm.steps import principles
    from crowdnotes_site.lib.llm.steps.common import HOSTILE_RE

    for label, flags in (
        ("classifier only", lambda t: principles.offensive_probability(t) >= principles.OFFENSIVE_THRESHOLD),
        ("phrase list only", lambda t: HOSTILE_RE.search(t) is not None),
    ):
        for part in PARTS:
            rows = [c for c in cases if c["part"] == part]
            agree = sum(flags(c["text"]) is not c["expected"] for c in rows)
            fail = [c for c in rows if c["expected"] is False]
            false_pass = sum(not flags(c["text"]) for c in fail)
            print(
                f"| neutral: {label} | {part} | {len(rows)} | {agree} | {agree / len(rows):.0%} | {len(fail)} "
                f"| {false_pass} | {false_pass / len(fail):.0%} |"
            )


def passes(case: dict[str, Any], agreed: bool) -> bool:
    """Whether the check let the case through (for drafts: did not say that no passage answers)."""
    should_pass = case["expected"] is True or case["expected"] == "answers"
    return should_pass if agreed else not should_pass


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--embeddings", action="store_true", help="relevance by MiniLM cosine instead of word overlap")
    parser.add_argument("--code", type=Path, help="import crowdnotes_site from this folder instead (the code before)")
    parser.add_argument("--verbose", action="store_true", help="print every disagreement")
    parser.add_argument("--real-notes", action="store_true", help="also the neutral filter on real 2021 notes")
    parser.add_argument("--claim-share", type=float, help="try another judges.CLAIM_TERM_SHARE (choosing it)")
    parser.add_argument("--offensive-threshold", type=float, help="try another principles.OFFENSIVE_THRESHOLD")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    if args.code:
        sys.path.insert(0, str(args.code.resolve()))
    similarity = None
    if args.embeddings:
        from evidence.embedding import cosine

        similarity = cosine
    import crowdnotes_site
    from crowdnotes_site.lib.llm.steps import judges, principles

    if args.claim_share is not None:
        judges.CLAIM_TERM_SHARE = args.claim_share
    if args.offensive_threshold is not None:
        principles.OFFENSIVE_THRESHOLD = args.offensive_threshold
    print(
        f"code: {Path(crowdnotes_site.__file__).parent.parent}; relevance by {'MiniLM cosine' if similarity else 'word overlap'}\n"
    )
    print("| check | part | n | agree | accuracy | should fail: n | false passes | false-pass rate |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for check in CHECKS:
        for part in PARTS:
            cases = [c for c in load(part) if c["check"] == check]
            agree, should_fail, false_pass = 0, 0, 0
            for case in cases:
                ok, answer = judge(case, similarity)
                agree += ok
                if case["expected"] is False or case["expected"] == "none":
                    should_fail += 1
                    false_pass += passes(case, ok)
                if args.verbose and not ok:
                    print(f"  disagrees: {case['id']} ({case['kind']}): {answer[:160]}")
            rate = f"{false_pass / should_fail:.0%}" if should_fail else "–"
            print(
                f"| {check} | {part} | {len(cases)} | {agree} | {agree / max(len(cases), 1):.0%} "
                f"| {should_fail} | {false_pass} | {rate} |"
            )
        if check == "neutral" and hasattr(principles, "offensive_probability"):
            neutral_parts([c for part in PARTS for c in load(part) if c["check"] == "neutral"])
    if args.real_notes:
        print("\n| real notes (colin-fraser, 2021) | n | failed by the neutral filter |")
        print("|---|---:|---:|")
        for label, texts in real_notes(ROOT.parent / "shared" / "data" / "communitynotes" / "colin-fraser").items():
            failed = sum(principles.principle_check_baseline(text=t, principle="neutral").value is False for t in texts)
            print(f"| {label} | {len(texts)} | {failed} ({failed / len(texts):.1%}) |")


if __name__ == "__main__":
    main()
