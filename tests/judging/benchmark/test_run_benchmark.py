"""`run_benchmark` end to end: real evidence pipeline, search flow, drafting and judges; the LLM
is the loopback scripted endpoint and the evidence pages come from the loopback web server."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from crowdnotes_site.lib.llm.steps.common import split_data_block
from tests.evidence.corpus import MEASLES_PAGE, page
from tests.support.llm_server import ScriptedLLM
from tests.support.web_server import WebServer

pytestmark = pytest.mark.django_db

POST = "The MMR vaccine causes autism in children, and measles is harmless anyway."
BREAD = ["Sourdough bread needs an active starter, a long cold fermentation and a very hot oven with steam."] * 3


def dataset(tmp_path: Path, web_server: WebServer) -> Path:
    who = web_server.add("/who", page("Measles fact sheet", MEASLES_PAGE, "2019-05-01"))
    bread = web_server.add("/bread", page("Sourdough basics", BREAD, "2017-07-07"))
    rows = [
        {"id": "h1", "post": POST, "note": "Large studies found no link between the MMR vaccine and autism.",
         "urls": [who], "label": "Helpful", "note_time": "2023-01-01T00:00:00Z"},
        {"id": "n1", "post": POST, "note": "Only idiots believe this.",
         "urls": [bread], "label": "Not Helpful", "note_time": "2023-01-01T00:00:00Z"},
    ]  # fmt: skip
    path = tmp_path / "tiny.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def run(*args: str) -> str:
    out = io.StringIO()
    call_command("run_benchmark", *args, "--no-progress", stdout=out, stderr=io.StringIO())
    return out.getvalue()


def records(out: Path) -> list[dict[str, Any]]:
    lines = (out / "rows.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip() and line != TORN]


TORN = '{"row_id": "n1", "mode": "hu'  # the last line of a run killed mid-write


def scripted(messages: list[dict[str, str]]) -> str:
    system, user = messages[0]["content"], messages[-1]["content"]
    if system.startswith("You plan web searches"):
        return "measles vaccine autism\nMMR vaccine safety"
    if system.startswith("You select evidence"):
        return "The fact sheet answers the claim.\nIndex: 0"
    if system.startswith("You write Community Notes"):
        return "Large studies of children found no link between the MMR vaccine and autism."
    if system.startswith("You check evidence"):
        snippet = split_data_block(user)[1]["evidence_snippet"]["text"]
        return (
            "On the claim.\nFinal decision: yes" if "measles" in snippet.lower() else "Off topic.\nFinal decision: no"
        )
    if system.startswith("You check whether"):
        return "Faithful.\nFinal decision: yes"
    if system.startswith("You rate"):
        return "Insulting.\nFinal decision: no" if "idiots" in user else "Clear and sourced.\nFinal decision: yes"
    if system.startswith("You compare two sets"):
        return "Both are the same fact sheet.\nFinal answer: tie"
    return "unexpected request"


def test_the_command_runs_every_mode_and_writes_rows_and_the_table(
    tmp_path: Path, web_server: WebServer, llm_server: ScriptedLLM, corpus: tuple[Path, Path]
) -> None:
    folder, manifest = corpus
    call_command("index_documents", str(folder), "--manifest", str(manifest), stdout=io.StringIO())
    llm_server.respond_with(scripted)
    out = tmp_path / "out"
    printed = run(str(dataset(tmp_path, web_server)), "--modes", "human,augmentation,automation", "--out", str(out))

    got = {(r["row_id"], r["mode"]): r for r in records(out)}
    tasks = ["human", "augmentation", "automation", "compare:automation"]
    assert set(got) == {(row, task) for row in ("h1", "n1") for task in tasks}
    assert got[("h1", "human")]["inputs"]["label"] == "Helpful"
    # human: RETRIEVE/MATCH on the human URL, then the gated judges
    assert got[("h1", "human")]["verdicts"] == {"relevance": "yes", "correctness": "yes", "helpfulness": "yes"}
    assert "MMR" in got[("h1", "human")]["evidence"][0]["text"]
    assert got[("n1", "human")]["verdicts"] == {"relevance": "no"}  # the bread page: gated at relevance
    # augmentation: an LLM draft from the human evidence
    assert got[("h1", "augmentation")]["note_producer"] == "llm:scripted-model"
    assert got[("h1", "augmentation")]["verdicts"]["helpfulness"] == "yes"
    # automation: tau = 1 (one human URL), only documents published before 2023 (no 2024 news, no undated)
    auto = got[("h1", "automation")]
    assert auto["queries"] == ["measles vaccine autism", "MMR vaccine safety"]
    assert len(auto["evidence"]) == 1 and auto["evidence"][0]["chosen_by"] == "llm:scripted-model"
    assert auto["evidence"][0]["url"] not in (
        "https://news.example/2024/measles-outbreak",
        "https://undated.example/measles-myths",
    )
    expected_r = "measles" in auto["evidence"][0]["text"].lower()
    assert (auto["verdicts"]["relevance"] == "yes") is expected_r
    assert got[("n1", "compare:automation")]["winner"] == "tie"
    assert got[("n1", "compare:automation")]["comparator"] == "llm:scripted-model"

    summary = json.loads((out / "table.json").read_text())
    assert summary["backend"] == "LLM: scripted-model"
    human_rows = {r["subset"]: r for r in summary["modes"] if r["mode"] == "human"}
    assert (human_rows["Helpful"]["R"], human_rows["Helpful"]["H"]) == (1.0, 1.0)
    assert (human_rows["Not Helpful"]["R"], human_rows["all"]["H"]) == (0.0, 0.5)
    assert {(r["subset"], r["tie"]) for r in summary["pairwise"]} == {("Helpful", 1), ("Not Helpful", 1), ("all", 2)}
    assert "**LLM: scripted-model**" in printed and "| human note, human evidence | all | 2 | 50.0% |" in printed


def test_a_rerun_resumes_without_redoing_finished_rows_and_the_page_shows_it(
    tmp_path: Path, web_server: WebServer, settings: Any, admin_client: Any
) -> None:
    settings.BENCHMARK_DIR = tmp_path / "runs"
    settings.LLM_BASE_URL = ""  # offline: baselines
    data = dataset(tmp_path, web_server)
    out = settings.BENCHMARK_DIR / "tiny"
    first = run(str(data), "--modes", "human,augmentation", "--limit", "1")
    assert "2 task(s) run, 0 already finished" in first
    before = {(r["row_id"], r["mode"]): r["finished_at"] for r in records(out)}
    assert set(before) == {("h1", "human"), ("h1", "augmentation")}
    who_fetches = sum(r["path"] == "/who" for r in web_server.requests)
    with (out / "rows.jsonl").open("a") as sink:
        sink.write(TORN)  # ignored, and the next record starts on a line of its own

    second = run(str(data), "--modes", "human,augmentation")
    assert "2 task(s) run, 2 already finished" in second
    after = records(out)
    assert TORN in (out / "rows.jsonl").read_text().splitlines()
    assert [(r["row_id"], r["mode"]) for r in after].count(("h1", "human")) == 1
    assert {(r["row_id"], r["mode"]): r["finished_at"] for r in after if r["row_id"] == "h1"} == before
    assert sum(r["path"] == "/who" for r in web_server.requests) == who_fetches  # h1 was not fetched again
    assert {r["row_id"] for r in after} == {"h1", "n1"}
    assert "**OFFLINE: offline baselines, no LLM" in second
    assert all(j.startswith(("baseline:", "classifier:")) for r in after for j in r["judges"])

    settings.LLM_BASE_URL = "http://127.0.0.1:9/v1"  # other settings: resuming would mix them
    with pytest.raises(CommandError, match="other settings"):
        run(str(data), "--modes", "human")

    response = admin_client.get("/judging/benchmark/")
    body = response.content.decode()
    assert response.status_code == 200
    assert "Benchmark on `tiny.jsonl`: 2 rows" in body and "OFFLINE: offline baselines" in body
    assert "2 of 2 rows complete" in body and "Demo data" not in body
