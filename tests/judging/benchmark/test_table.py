"""The study's table: R, C, H per crowd-label subset with the gating, and pairwise utility."""

from __future__ import annotations

from typing import Any

from judging.benchmark import table

YES, NO, ERR = "yes", "no", "error"


def rec(mode: str, label: str, *verdicts: str, note: str = "a note", **extra: Any) -> dict[str, Any]:
    stages = dict(zip(("relevance", "correctness", "helpfulness"), verdicts, strict=False))
    return {"mode": mode, "label": label, "verdicts": stages, "note_text": note, **extra}


def by_key(rows: list[table.ModeRow]) -> dict[tuple[str, str], table.ModeRow]:
    return {(r.mode, r.subset): r for r in rows}


def test_r_c_h_per_label_subset_and_overall() -> None:
    records: list[dict[str, Any]] = [
        rec("human", "Helpful", YES, YES, YES),
        rec("human", "Helpful", YES, YES, NO),
        rec("human", "Helpful", YES, NO),
        rec("human", "Helpful", NO),
        rec("human", "Not Helpful", YES, YES, YES),
        rec("human", "Not Helpful", NO),
        rec("human", "Not Helpful", YES, ERR),
        rec("automation", "Helpful", note=""),  # no note produced: fails every stage
        rec("automation", "Not Helpful", YES, YES, YES),
    ]
    rows = by_key(table.mode_rows(records, ["human", "automation"]))
    helpful = rows[("human", "Helpful")]
    assert (helpful.n, helpful.r, helpful.c, helpful.h) == (4, 3, 2, 1)
    assert (helpful.share(helpful.r), helpful.share(helpful.c), helpful.share(helpful.h)) == (0.75, 0.5, 0.25)
    not_helpful = rows[("human", "Not Helpful")]
    assert (not_helpful.n, not_helpful.r, not_helpful.c, not_helpful.h, not_helpful.judge_errors) == (3, 2, 1, 1, 1)
    overall = rows[("human", "all")]
    assert (overall.n, overall.r, overall.c, overall.h) == (7, 5, 3, 2)
    auto = rows[("automation", "Helpful")]
    assert (auto.n, auto.r, auto.h, auto.no_note) == (1, 0, 0, 1)
    assert rows[("automation", "all")].share(rows[("automation", "all")].h) == 0.5


def test_verdicts_past_a_failed_gate_count_only_up_to_the_gate() -> None:
    # correctness "yes" after relevance "no" can only come from a broken pipeline: C stays <= R
    records = [rec("human", "Helpful", NO, YES, YES), rec("human", "Helpful", YES, NO, YES)]
    row = by_key(table.mode_rows(records, ["human"]))[("human", "all")]
    assert (row.r, row.c, row.h, row.gating_violations) == (1, 0, 0, 2)
    assert "2 record(s) had verdicts past a failed stage" in table.to_markdown(
        table.summarize(records, ["human"]), title="t"
    )


def test_an_empty_subset_has_no_shares() -> None:
    row = by_key(table.mode_rows([rec("human", "Helpful", YES)], ["human"]))[("human", "Not Helpful")]
    assert row.n == 0 and row.share(row.r) is None


def test_pairwise_utility_counts_win_lose_tie_and_unanswered() -> None:
    records: list[dict[str, Any]] = [
        {"mode": "compare:automation", "label": "Helpful", "winner": "machine"},
        {"mode": "compare:automation", "label": "Helpful", "winner": "human"},
        {"mode": "compare:automation", "label": "Not Helpful", "winner": "tie"},
        {"mode": "compare:automation", "label": "Not Helpful", "winner": None},
        {"mode": "compare:automation", "label": "Not Helpful", "winner": "machine"},
    ]
    rows = {(r.mode, r.subset): r for r in table.pair_rows(records, ["human", "automation"])}
    assert set(rows) == {("automation", s) for s in table.SUBSETS}  # human has no comparison
    overall = rows[("automation", "all")]
    assert (overall.n, overall.win, overall.lose, overall.tie, overall.errors) == (5, 2, 1, 1, 1)
    assert (rows[("automation", "Helpful")].win, rows[("automation", "Helpful")].lose) == (1, 1)


def test_the_header_says_offline_or_names_the_llm_from_the_recorded_producers() -> None:
    offline = [rec("human", "Helpful", YES, judges=["baseline:relevance-embedding-v1"])]
    summary = table.summarize(offline, ["human"])
    assert summary["backend"].startswith("OFFLINE")
    mixed = [
        rec("augmentation", "Helpful", YES, judges=["llm:qwen"], note_producer="llm:qwen"),
        rec("augmentation", "Helpful", YES, judges=["classifier:v3"], note_producer="llm:qwen"),
    ]
    summary = table.summarize(mixed, ["augmentation"])
    assert summary["backend"] == "LLM: qwen; also baselines/classifiers: classifier:v3"
    assert summary["producers"]["drafting"] == ["llm:qwen"]
    text = table.to_markdown(summary, title="Run")
    assert "| machine note, human evidence | all | 2 | 100.0% | 0.0% | 0.0% | 0 | 0 |" in text
