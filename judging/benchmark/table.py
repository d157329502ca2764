"""The study's table from the runner's records (pure arithmetic; no ORM, no I/O).

Per mode and crowd-label subset (Helpful, Not Helpful, all): R = share of rows whose note's
evidence passed relevance, C = share that passed relevance and correctness, H = share that
passed all three (the gated pipeline), so C <= R and H <= C hold by construction; a record whose
verdicts break the gating (a later stage answered without the earlier "yes") is counted only as
far as the gate allows and reported in `gating_violations`. A row for which a mode produced no
note (no evidence found, draft refused) counts as failing every stage (`no_note`); a stage that
ended in "error" fails from there on (`judge_errors`). Overall H is the "all" row's H.

Pairwise evidence utility: per compared mode, machine evidence vs the human note's evidence:
win (machine more useful), lose, tie, and comparisons that gave no answer (`errors`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from judging.benchmark.dataset import HELPFUL, NOT_HELPFUL

HUMAN, AUGMENTATION, AUTOMATION = "human", "augmentation", "automation"
SINGLE_QUERY, RANK_ORDER = "automation-single-query", "automation-rank-order"
MODES = (HUMAN, AUGMENTATION, AUTOMATION)
ABLATIONS = (SINGLE_QUERY, RANK_ORDER)
MODE_TEXT = {
    HUMAN: "human note, human evidence",
    AUGMENTATION: "machine note, human evidence",
    AUTOMATION: "machine note, machine evidence",
    SINGLE_QUERY: "ablation: automation without query diversity (one query)",
    RANK_ORDER: "ablation: automation without utility judgment (search rank order)",
}
COMPARE_PREFIX = "compare:"
SUBSETS = (HELPFUL, NOT_HELPFUL, "all")
WIN, LOSE, TIE = "machine", "human", "tie"


@dataclass(frozen=True)
class ModeRow:
    mode: str
    subset: str
    n: int
    r: int
    c: int
    h: int
    no_note: int
    judge_errors: int
    gating_violations: int

    def share(self, count: int) -> float | None:
        return count / self.n if self.n else None


@dataclass(frozen=True)
class PairRow:
    mode: str
    subset: str
    n: int
    win: int
    lose: int
    tie: int
    errors: int


def passed(verdicts: Mapping[str, str]) -> tuple[bool, bool, bool, bool]:
    """(R, C, H, gating violated) for one note's stage verdicts."""
    r = verdicts.get("relevance") == "yes"
    c = r and verdicts.get("correctness") == "yes"
    h = c and verdicts.get("helpfulness") == "yes"
    violated = ("correctness" in verdicts and not r) or ("helpfulness" in verdicts and not c)
    return r, c, h, violated


def _subset(records: Iterable[Mapping[str, Any]], subset: str) -> list[Mapping[str, Any]]:
    return [rec for rec in records if subset == "all" or rec["label"] == subset]


def mode_rows(records: Sequence[Mapping[str, Any]], modes: Sequence[str]) -> list[ModeRow]:
    rows = []
    for mode in modes:
        of_mode = [rec for rec in records if rec["mode"] == mode]
        for subset in SUBSETS:
            chosen = _subset(of_mode, subset)
            counts = [passed(rec.get("verdicts") or {}) for rec in chosen]
            row = ModeRow(
                mode=mode,
                subset=subset,
                n=len(chosen),
                r=sum(r for r, _, _, _ in counts),
                c=sum(c for _, c, _, _ in counts),
                h=sum(h for _, _, h, _ in counts),
                no_note=sum(1 for rec in chosen if not rec.get("note_text")),
                judge_errors=sum(1 for rec in chosen if "error" in (rec.get("verdicts") or {}).values()),
                gating_violations=sum(v for _, _, _, v in counts),
            )
            assert row.h <= row.c <= row.r <= row.n  # the gating, by construction
            rows.append(row)
    return rows


def pair_rows(records: Sequence[Mapping[str, Any]], modes: Sequence[str]) -> list[PairRow]:
    rows = []
    for mode in modes:
        of_mode = [rec for rec in records if rec["mode"] == COMPARE_PREFIX + mode]
        if not of_mode:
            continue
        for subset in SUBSETS:
            chosen = _subset(of_mode, subset)
            winners = [rec.get("winner") for rec in chosen]
            rows.append(
                PairRow(
                    mode=mode,
                    subset=subset,
                    n=len(chosen),
                    win=winners.count(WIN),
                    lose=winners.count(LOSE),
                    tie=winners.count(TIE),
                    errors=sum(1 for w in winners if w not in (WIN, LOSE, TIE)),
                )
            )
    return rows


def producers(records: Iterable[Mapping[str, Any]]) -> dict[str, list[str]]:
    """Who produced what, from the records themselves: judges, drafts, evidence choices, comparator."""
    found: dict[str, set[str]] = {"judges": set(), "drafting": set(), "evidence choice": set(), "comparator": set()}
    for rec in records:
        found["judges"].update(rec.get("judges") or [])
        if rec.get("note_producer") and rec["mode"] != HUMAN:
            found["drafting"].add(rec["note_producer"])
        found["evidence choice"].update(rec.get("evidence_producers") or [])
        if rec.get("comparator"):
            found["comparator"].add(rec["comparator"])
    return {k: sorted(v) for k, v in found.items() if v}


def backend_line(found: Mapping[str, Sequence[str]]) -> str:
    """The header's statement of what ran: offline baselines, an LLM, or both."""
    labels = [label for values in found.values() for label in values if ":" in label]  # not "human"
    llms = sorted({label.partition(":")[2] for label in labels if label.startswith("llm:")})
    if not llms:
        return "OFFLINE: offline baselines, no LLM (the numbers describe the baselines, not an LLM)"
    others = sorted({label for label in labels if not label.startswith("llm:")})
    line = f"LLM: {', '.join(llms)}"
    return line + (f"; also baselines/classifiers: {', '.join(others)}" if others else "")


def summarize(records: Sequence[Mapping[str, Any]], modes: Sequence[str]) -> dict[str, Any]:
    """The table as JSON (the results page and `table.json`)."""
    found = producers(records)
    return {
        "backend": backend_line(found),
        "producers": found,
        "modes": [
            {**row.__dict__, "R": row.share(row.r), "C": row.share(row.c), "H": row.share(row.h)}
            for row in mode_rows(records, modes)
        ],
        "pairwise": [row.__dict__ for row in pair_rows(records, modes)],
    }


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}%"


def to_markdown(summary: Mapping[str, Any], *, title: str) -> str:
    lines = [f"### {title}", "", f"**{summary['backend']}**", ""]
    for what, labels in summary["producers"].items():
        lines.append(f"- {what}: {', '.join(f'`{label}`' for label in labels)}")
    lines += [
        "",
        "| mode | crowd label | n | R | C | H | no note | judge errors |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in summary["modes"]:
        lines.append(
            f"| {MODE_TEXT.get(row['mode'], row['mode'])} | {row['subset']} | {row['n']} | {_pct(row['R'])} | "
            f"{_pct(row['C'])} | {_pct(row['H'])} | {row['no_note']} | {row['judge_errors']} |"
        )
    if summary["pairwise"]:
        lines += [
            "",
            "Pairwise evidence utility (machine vs human evidence):",
            "",
            "| machine evidence of | crowd label | n | win | lose | tie | no answer |",
            "|---|---|---|---|---|---|---|",
        ]
        for row in summary["pairwise"]:
            lines.append(
                f"| {row['mode']} | {row['subset']} | {row['n']} | {row['win']} | {row['lose']} | {row['tie']} | "
                f"{row['errors']} |"
            )
    violations = sum(row["gating_violations"] for row in summary["modes"] if row["subset"] == "all")
    if violations:
        lines += ["", f"{violations} record(s) had verdicts past a failed stage; counted only up to the gate."]
    return "\n".join(lines) + "\n"
