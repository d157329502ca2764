"""Run the benchmark: for every row and mode, evidence → note → the gated judges, one JSONL
record per (row, mode) in OUT/rows.jsonl (inputs and outcomes), then the study's table
(OUT/table.json, OUT/table.md). Resumable: a (row, mode) with a record is not redone; a mode
that crashed leaves no record and is tried again next time.

Modes (each reuses the product's own services):
- human: RETRIEVE/MATCH on the human note's URLs (evidence.pipeline), the human note judged on
  the best passage of each (crowdnotes_site.lib.llm.pipeline, judges as configured);
- augmentation: a note drafted from that human evidence (crowdnotes_site.lib.llm.drafting), judged on it;
- automation: evidence.search.services.find_evidence with τ = the human note's URL count and the
  note's date as the cutoff, a note drafted from the chosen sources' best passages, judged;
- ablations: automation with one query, and with search rank order instead of utility judgment;
- compare:<automation mode>: machine vs human evidence, by crowdnotes_site.lib.llm.steps.compare (LLM or baseline).

Works on any OpenAI-compatible endpoint (LLM_BASE_URL) and offline with the labelled baselines;
the table's header says which from the producers recorded in the rows.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from django.conf import settings

from crowdnotes_site.lib.llm.client import LLMConfig, LLMError
from crowdnotes_site.lib.llm.drafting import DraftError, draft_note
from crowdnotes_site.lib.llm.pipeline import JudgeInput, PipelineResult, run_pipeline
from crowdnotes_site.lib.llm.steps import compare
from crowdnotes_site.lib.llm.steps.common import Evidence
from crowdnotes_site.llm import llm_client
from evidence import pipeline, services
from evidence.embedding import cosine
from evidence.models import EvidenceSource
from evidence.search.services import find_evidence
from judging.benchmark import table
from judging.benchmark.dataset import Row
from judging.benchmark.results import TABLE_JSON, TABLE_MD
from judging.services import judges_from_settings

RECORDS, META = "rows.jsonl", "run.json"
AUTOMATION_FLAGS = {
    table.AUTOMATION: {},
    table.SINGLE_QUERY: {"single_query": True, "rank_order": False},
    table.RANK_ORDER: {"single_query": False, "rank_order": True},
}


class BenchmarkError(Exception):
    """The run cannot start (e.g. the out dir holds a run with other settings)."""


@dataclass(frozen=True)
class Outcome:
    summary: dict[str, Any]
    markdown: str
    done: int  # records written by this call
    skipped: int  # (row, mode) pairs already finished
    failed: list[str]  # "row/mode: error" for modes that crashed (no record; retried next run)
    remaining: int = 0  # (row, mode) pairs left for a later call (execute's limit)


def tasks_for(modes: Sequence[str], ablations: bool) -> list[str]:
    """Every (row-level) task in run order: the modes, the ablations, then the comparisons."""
    unknown = [m for m in modes if m not in table.MODES]
    if unknown:
        raise BenchmarkError(f"unknown mode(s) {', '.join(unknown)}; choose from {', '.join(table.MODES)}")
    run = [m for m in table.MODES if m in modes]
    if ablations:
        if table.AUTOMATION not in run:
            raise BenchmarkError("--ablations vary the automation mode: add automation to --modes")
        run += list(table.ABLATIONS)
    return run + [table.COMPARE_PREFIX + m for m in run if m in AUTOMATION_FLAGS]


def settings_signature() -> dict[str, Any]:
    """What makes two runs comparable: a resumed run must have the same."""
    llm = LLMConfig.from_settings(settings)
    return {
        "llm": llm.model if llm.configured else "offline",
        "llm_base_url": settings.LLM_BASE_URL or "",
        "embedding_model": settings.EMBEDDING_MODEL,
        "judge_backends": [
            settings.JUDGE_BACKEND_RELEVANCE,
            settings.JUDGE_BACKEND_CORRECTNESS,
            settings.JUDGE_BACKEND_HELPFULNESS,
        ],
        "search_backends": list(settings.SEARCH_BACKENDS),
    }


def read_records(path: Path) -> list[dict[str, Any]]:
    """The records written so far; a torn last line (a crash mid-write) is ignored."""
    if not path.exists():
        return []
    records = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(record, dict) and "row_id" in record and "mode" in record:
            records.append(record)
    return records


def file_sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# --- The run -----------------------------------------------------------------------------------


class Run:
    def __init__(self, *, dataset: Path, rows: Sequence[Row], tasks: Sequence[str], out: Path) -> None:
        self.dataset, self.rows, self.tasks, self.out = dataset, rows, list(tasks), out
        self.records_path = out / RECORDS
        self._judges: dict[str, Any] | None = None
        self._human: dict[str, list[dict[str, Any]]] = {}

    def prepare(self) -> list[dict[str, Any]]:
        """Create or check the out dir; the records already there."""
        self.out.mkdir(parents=True, exist_ok=True)
        meta_path = self.out / META
        signature, digest = settings_signature(), file_sha256(self.dataset)
        if meta_path.exists():
            meta = json.loads(meta_path.read_text(encoding="utf-8"))
            if meta.get("dataset_sha256") != digest:
                raise BenchmarkError(
                    f"{self.out} holds a run of another dataset (or the file changed); use another --out"
                )
            if meta.get("settings") != signature:
                raise BenchmarkError(
                    f"{self.out} holds a run with other settings ({meta.get('settings')}), not {signature}: "
                    "mixing them would make the table untrue; use another --out"
                )
        else:
            meta = {
                "dataset": str(self.dataset),
                "dataset_sha256": digest,
                "settings": signature,
                "started": _now(),
            }
        meta["tasks"] = sorted(set(meta.get("tasks", [])) | set(self.tasks))
        self.meta = meta
        return read_records(self.records_path)

    def execute(self, *, progress: IO[str] | None = sys.stderr, limit: int | None = None) -> Outcome:
        """Run the unfinished (row, mode) tasks in order, at most `limit` of them, and write the table."""
        from tqdm import tqdm

        records = self.prepare()
        done = {(r["row_id"], r["mode"]): r for r in records}
        todo = [(row, task) for row in self.rows for task in self.tasks if (row.id, task) not in done]
        skipped = len(self.rows) * len(self.tasks) - len(todo)
        todo, later = (todo, []) if limit is None else (todo[:limit], todo[limit:])
        failed: list[str] = []
        written = 0
        bar = tqdm(
            total=len(self.rows) * len(self.tasks),
            initial=skipped,
            desc="benchmark",
            unit="task",
            file=progress,
            disable=progress is None,
        )
        with self.records_path.open("a", encoding="utf-8") as sink:
            if self.records_path.stat().st_size and not self.records_path.read_bytes().endswith(b"\n"):
                sink.write("\n")  # a torn last line (killed mid-write) stays alone on its line
            for row, task in todo:
                bar.set_postfix_str(f"{row.id} {task}", refresh=False)
                started = time.monotonic()
                try:
                    record = self.run_task(row, task, done)
                except Exception as exc:  # one broken row must not stop the benchmark; it is retried next run
                    failed.append(f"{row.id}/{task}: {type(exc).__name__}: {exc}")
                    bar.update(1)
                    continue
                record = {
                    "row_id": row.id,
                    "mode": task,
                    "label": row.label,
                    "demo": row.demo,
                    "inputs": row.inputs(),
                    **record,
                    "seconds": round(time.monotonic() - started, 3),
                    "finished_at": _now(),
                }
                sink.write(json.dumps(record, ensure_ascii=False) + "\n")
                sink.flush()
                done[(row.id, task)] = record
                written += 1
                bar.update(1)
        bar.close()
        summary, markdown = self.write_table(done)
        return Outcome(
            summary=summary, markdown=markdown, done=written, skipped=skipped, failed=failed, remaining=len(later)
        )

    def write_table(self, done: dict[tuple[str, str], dict[str, Any]]) -> tuple[dict[str, Any], str]:
        ids = {row.id for row in self.rows}
        records = [r for (row_id, _), r in done.items() if row_id in ids]
        modes = [t for t in self.tasks if not t.startswith(table.COMPARE_PREFIX)]
        summary = table.summarize(records, modes)
        demo = sum(1 for row in self.rows if row.demo)
        summary.update(
            dataset=self.dataset.name,
            rows=len(self.rows),
            demo_rows=demo,
            rows_complete=sum(1 for row in self.rows if all((row.id, t) in done for t in self.tasks)),
            updated=_now(),
        )
        title = f"Benchmark on `{self.dataset.name}`: {len(self.rows)} rows" + (
            f" ({demo} DEMO rows: made-up posts and notes)" if demo else ""
        )
        markdown = table.to_markdown(summary, title=title)
        self.meta.update(updated=summary["updated"], rows_in_dataset=len(self.rows))
        (self.out / META).write_text(json.dumps(self.meta, indent=2), encoding="utf-8")
        (self.out / TABLE_JSON).write_text(json.dumps({**summary, "title": title}, indent=2), encoding="utf-8")
        (self.out / TABLE_MD).write_text(markdown, encoding="utf-8")
        return summary, markdown

    # --- One task ----------------------------------------------------------------------------

    def run_task(self, row: Row, task: str, done: dict[tuple[str, str], dict[str, Any]]) -> dict[str, Any]:
        if task == table.HUMAN:
            evidence = self.human_evidence(row)
            return self.judged(row, note=row.note, note_producer="human", evidence=evidence, urls=row.urls)
        if task == table.AUGMENTATION:
            return self.drafted_and_judged(row, self.human_evidence(row), producers=["human"])
        if task in AUTOMATION_FLAGS:
            evidence, extra = self.machine_evidence(row, **AUTOMATION_FLAGS[task])
            record = self.drafted_and_judged(row, evidence, producers=extra.pop("producers"))
            return {**record, **extra}
        if task.startswith(table.COMPARE_PREFIX):
            mode = task.removeprefix(table.COMPARE_PREFIX)
            machine = done.get((row.id, mode))
            if machine is None:
                raise BenchmarkError(f"{mode} has no record for this row yet")
            return self.compared(row, human=self.human_evidence(row), machine=machine["evidence"])
        raise BenchmarkError(f"unknown task {task!r}")

    def human_evidence(self, row: Row) -> list[dict[str, Any]]:
        """RETRIEVE + MATCH on each of the human note's URLs (once per row per process)."""
        if row.id not in self._human:
            matcher = services.get_matcher()
            found = []
            for url in row.urls:
                result = pipeline.retrieve_and_match(
                    url,
                    row.post,
                    matcher=matcher,
                    policy=services.fetch_policy(),
                    min_words=settings.EVIDENCE_MIN_WORDS,
                )
                found.append(_evidence_entry(url, result))
            self._human[row.id] = found
        return self._human[row.id]

    def machine_evidence(
        self, row: Row, *, single_query: bool = False, rank_order: bool = False
    ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """find_evidence with τ = the human URL count and the note's date as cutoff; the best
        passage of each chosen source (stored passages of indexed documents, else fetched)."""
        state = find_evidence(
            post_text=row.post,
            tau=len(row.urls),
            cutoff=row.note_time.date(),
            single_query=single_query,
            rank_order=rank_order,
        )
        matcher = services.get_matcher()
        evidence = []
        for choice in state.active:
            candidate = state.pool[choice.pool_index]
            source = EvidenceSource.objects.filter(pk=candidate.source_id).first() if candidate.source_id else None
            if source is not None and source.cleaned_text:
                passages = [p.text for p in services.passages_for(source=source, matcher=matcher)]
                passages = passages or [c.text for c in matcher.chunk(source.cleaned_text)]
                best = matcher.match(row.post, passages)
                entry = {
                    "url": candidate.url,
                    "ok": True,
                    "error_code": None,
                    "text": passages[best.best_index],
                    "score": round(best.best_score, 4),
                }
            else:
                entry = _evidence_entry(
                    candidate.url,
                    pipeline.retrieve_and_match(
                        candidate.url,
                        row.post,
                        matcher=matcher,
                        policy=services.fetch_policy(),
                        min_words=settings.EVIDENCE_MIN_WORDS,
                    ),
                )
            evidence.append({**entry, "category": candidate.category, "chosen_by": choice.producer})
        extra = {
            "queries": state.queries,
            "query_producer": state.query_producer,
            "pool_size": len(state.pool),
            "search_warnings": state.warnings,
            "producers": sorted({p for p in [state.query_producer, *(c.producer for c in state.active)] if p}),
        }
        return evidence, extra

    def drafted_and_judged(self, row: Row, evidence: list[dict[str, Any]], *, producers: list[str]) -> dict[str, Any]:
        usable = [(e["url"], e["text"]) for e in evidence if e["ok"]]
        base = {"evidence": evidence, "evidence_producers": producers}
        if not usable:
            return {**base, **_no_note("no evidence passage to draft from")}
        try:
            draft = draft_note(post=row.post, snippets=usable, client=llm_client())
        except DraftError as exc:
            return {**base, **_no_note(str(exc))}
        judged = self.judged(
            row,
            note=draft.text,
            note_producer=draft.method,
            evidence=evidence,
            urls=tuple(dict.fromkeys(url for url, _ in usable)),
        )
        return {**judged, "evidence_producers": producers}

    def judged(
        self, row: Row, *, note: str, note_producer: str, evidence: list[dict[str, Any]], urls: Sequence[str]
    ) -> dict[str, Any]:
        snippets = tuple(Evidence(text=e["text"], source=e["url"]) for e in evidence if e["ok"])
        result = run_pipeline(
            JudgeInput(post=row.post, note=note, urls=tuple(urls), snippets=snippets),
            self.judges(),
            max_attempts=settings.JUDGE_PARSE_ATTEMPTS,
        )
        return {
            "evidence": evidence,
            "note_text": note,
            "note_producer": note_producer,
            "urls": list(urls),
            **_verdicts(result),
        }

    def compared(self, row: Row, *, human: list[dict[str, Any]], machine: list[dict[str, Any]]) -> dict[str, Any]:
        """Machine vs human evidence; which set is shown as A alternates by row id (position bias)."""

        def as_evidence(entries: list[dict[str, Any]]) -> list[Evidence]:
            return [Evidence(text=e["text"], source=e["url"]) for e in entries if e["ok"]]

        machine_first = int(hashlib.sha256(row.id.encode()).hexdigest(), 16) % 2 == 0
        set_a, set_b = (machine, human) if machine_first else (human, machine)
        client = llm_client()
        try:
            if client is not None:
                result = compare.compare_evidence_llm(
                    client, post=row.post, set_a=as_evidence(set_a), set_b=as_evidence(set_b)
                )
            else:
                result = compare.compare_evidence_baseline(
                    post=row.post, set_a=as_evidence(set_a), set_b=as_evidence(set_b), similarity=_similarity()
                )
        except LLMError as exc:
            return {"winner": None, "comparator": "", "reasoning": "", "error": str(exc), "machine_shown_as": None}
        names = {
            compare.A: table.WIN if machine_first else table.LOSE,
            compare.B: table.LOSE if machine_first else table.WIN,
        }
        winner = table.TIE if result.value == compare.TIE else names.get(result.value)
        return {
            "winner": winner,
            "answer": result.value,
            "machine_shown_as": "A" if machine_first else "B",
            "comparator": result.producer.label,
            "reasoning": result.reasoning,
            "raw_output": result.raw_output,
            "error": "" if winner else "no parsable answer",
        }

    def judges(self) -> dict[str, Any]:
        if self._judges is None:
            self._judges = judges_from_settings()
        return self._judges


def _similarity() -> Callable[[str, str], float] | None:
    if settings.JUDGE_BASELINE_SIMILARITY != "embedding":
        return None
    return cosine


def _evidence_entry(url: str, result: Any) -> dict[str, Any]:
    if not result.ok:
        return {"url": url, "ok": False, "error_code": result.error_code, "text": "", "score": None}
    return {
        "url": url,
        "ok": True,
        "error_code": None,
        "text": result.chunks[result.match.best_index].text,
        "score": round(result.match.best_score, 4),
    }


def _verdicts(result: PipelineResult) -> dict[str, Any]:
    return {
        "verdicts": {s.stage: s.verdict for s in result.stages},
        "helpful": result.helpful,
        "judges": sorted({s.judge for s in result.stages if s.judge_name}),
        "stages": [{**s.summary(), "error": s.error} for s in result.stages],
        "error": "",
    }


def _no_note(reason: str) -> dict[str, Any]:
    return {
        "note_text": "",
        "note_producer": "",
        "verdicts": {},
        "helpful": False,
        "judges": [],
        "stages": [],
        "error": reason,
    }


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def run_benchmark(
    *, dataset: Path, rows: Sequence[Row], modes: Sequence[str], ablations: bool, out: Path, progress: IO[str] | None
) -> Outcome:
    return Run(dataset=dataset, rows=rows, tasks=tasks_for(modes, ablations), out=out).execute(progress=progress)
