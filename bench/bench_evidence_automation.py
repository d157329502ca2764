"""Automation's relevance on the labelled set, and evidence latency under two concurrent users,
one with the 211-passage WHO PDF, on a real worker.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/cn_ev_automation_bench REDIS_URL=redis://127.0.0.1:6379/6 \
        flock /tmp/heavy.lock .venv/bin/python bench/bench_evidence_automation.py \
        [--parts index,concurrency,automation,topk] [--unsliced] [--cache FILE]

Parts run in that order; --cache: the automation part's collected relevances (reused when present,
deleted by part index).

The database is wiped first (part index). Default settings: EMBEDDING_MODEL=all-mpnet-base-v2
(the floor's scale), offline baselines (no LLM), the local index of ../shared/data/webpages.

Parts (each prints a table):
- automation: for every case of bench/data/evidence_labelled.json (38 posts with acceptable pages)
  and its 10 unaddressed claims, the real flow (key-term queries, AND lexical search, pool) and the
  best-passage relevance of the candidates the screen checks (`services.candidate_relevance`) and
  the share of the claim's key terms each contains (`services.candidate_coverage`), cached per
  post and URL; then the screen and the utility rounds replayed for each floor of a grid (pure
  `flow.screen` / `flow.choose_one` on the cached values, τ = 3), and at the configured floor
  for each key-term weight and margin, per half of the cases. Per row: recall@3 (cases with an
  acceptable page among the proposals), share of proposals that are acceptable, proposals in
  total on the unaddressed claims.
- concurrency: a real cpu worker (solo pool, like the demo's). User A submits the WHO IPC PDF
  (211 passages) for its labelled post; when A's first pick is ready, user B submits a Mayo
  Clinic page for its post. Times from submit: A's first pick, A's final pick (last refine slice),
  B's first pick, and how far B's evidence was behind (B ready - B submitted). With slices of
  EVIDENCE_SLICE_PASSAGES=32, with slices also bounded in time (EVIDENCE_SLICE_SECONDS=10) and,
  with --unsliced, with one unsliced refine (EVIDENCE_SLICE_PASSAGES=100000), on the same machine
  in the same run. Before each, the worker matches a small page (model loaded, as on a running demo).
- topk: for the labelled cases whose document has more than K passages, the refine over the
  pre-rank's top K vs exhaustive: same best passage (agreement), and passage hit@1 of each (the
  passage contains a quoted sentence).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from benchdb import recreate_database

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "crowdnotes_site.settings")
os.environ.setdefault("SECRET_KEY", "bench-only-secret-key")
os.environ.setdefault("DEBUG", "1")
os.environ.setdefault("SECURE_SSL_REDIRECT", "0")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("LOG_LEVEL", "WARNING")
DATA = ROOT.parent / "shared" / "data" / "webpages"
if not DATA.is_dir():
    DATA = Path("/work/shared/data/webpages")
LABELLED = ROOT / "bench" / "data" / "evidence_labelled.json"
FLOORS = [0.0, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5]
MARGINS: list[float | None] = [None, 0.25, 0.20, 0.15, 0.10, 0.05]
# The key-term weight (SearchConfig.key_term_weight) is chosen with the margin, on the even half.
KEY_TERM_WEIGHTS = [0.0, 0.05, 0.10, 0.15, 0.20]
KEY_TERM_MARGINS = [0.05, 0.08, 0.10, 0.15]
PDF_CASE_FILE = "pdf/who.int__9789241549929-eng_IPC-core-components.pdf"
B_CASE_FILE = "health/mayoclinic.org__symptoms-causes-syc-20371444.html"
SLICE_SECONDS = 10.0  # the time-bounded variant of the concurrency part


def _norm(text: str) -> str:
    return " ".join(text.split())


def labelled() -> dict[str, Any]:
    return json.loads(LABELLED.read_text(encoding="utf-8"))


def file_of() -> dict[str, str]:
    """Indexed source URL -> corpus file (the manifest's copy URL ends with the file's path)."""
    # Project modules load Django models: imported once django.setup() has run.
    from evidence.models import EvidenceSource

    return {
        url: copy.split("127.0.0.1:8001/", 1)[-1]
        for url, copy in EvidenceSource.objects.filter(indexed_at__isnull=False).values_list("url", "copy_url")
    }


def part_index() -> list[str]:
    # Project modules load Django models: imported once django.setup() has run.
    from evidence.index.services import documents_index_folder

    started = time.perf_counter()
    outcomes = documents_index_folder(folder=DATA, manifest=DATA / "manifest.tsv", base_url="http://127.0.0.1:8001/")
    return [f"indexed {dict(outcomes)} in {time.perf_counter() - started:.0f} s"]


# --- automation ---------------------------------------------------------------------------------


def collect(posts: list[str], cache_path: Path) -> dict[str, Any]:
    """Per post: queries, pool (as JSON) and the relevance of every candidate the screen would
    check at floor 0 without its early stop (the first SEARCH_SCREEN_LIMIT in screen order), and
    the share of the claim's key terms each of them contains (added to a cache that lacks it)."""
    from django.conf import settings

    # Project modules load Django models: imported once django.setup() has run.
    from crowdnotes_site.lib.llm.steps import search as steps
    from evidence.search import flow, services

    cache_path.parent.mkdir(parents=True, exist_ok=True)
    cache: dict[str, Any] = json.loads(cache_path.read_text()) if cache_path.exists() else {}
    for entry in cache.values():
        if "coverage" not in entry:
            state = flow.SearchState.from_json(entry["state"])
            terms = steps.key_terms(state.post)
            by_url = {c.url: c for c in state.pool}
            entry["coverage"] = {u: services.candidate_coverage(terms, by_url[u]) for u in entry["relevance"]}
            cache_path.write_text(json.dumps(cache))
    for n, post in enumerate(posts, start=1):
        if post in cache:
            continue
        started = time.perf_counter()
        cfg = services.search_config(tau=3)
        deps = services.search_deps()
        state = flow.SearchState(post=post)
        flow.write_queries(state, cfg, deps)
        flow.run_searches(state, cfg, deps)
        flow.make_pool(state, cfg, deps)
        full_order = flow._screen_order(state, deps)
        order = full_order[: settings.SEARCH_SCREEN_LIMIT]
        relevance = {state.pool[i].url: services.candidate_relevance(post, state.pool[i]) for i in order}
        terms = steps.key_terms(post)
        coverage = {state.pool[i].url: services.candidate_coverage(terms, state.pool[i]) for i in order}
        cache[post] = {
            "coverage": coverage,
            "state": state.to_json(),
            "relevance": relevance,
            "order": [state.pool[i].url for i in full_order],
            "s": time.perf_counter() - started,
        }
        cache_path.write_text(json.dumps(cache))
        print(
            f"  {n}/{len(posts)} pool {len(state.pool)} checked {len(relevance)} {cache[post]['s']:.0f} s", flush=True
        )
    return cache


def replay(
    entry: dict[str, Any], floor: float, tau: int = 3, margin: float | None = None, weight: float | None = None
) -> list[str]:
    """The screen and the offline utility rounds on the cached relevances and key-term shares: the
    proposed URLs. weight: the key-term weight (None: the configured one)."""
    # Project modules load Django models: imported once django.setup() has run.
    from evidence.search import flow, services

    state = flow.SearchState.from_json(entry["state"])
    cfg = flow.SearchConfig(
        **{**services.search_config(tau=tau).__dict__, "relevance_floor": floor, "relevance_margin": margin}
    )
    if weight is not None:
        cfg = dataclasses.replace(cfg, key_term_weight=weight)
    relevance = entry["relevance"]
    coverage = entry.get("coverage", {})
    # The screen checks candidates in the collected order (title + snippet similarity): replayed by
    # a similarity that ranks each candidate's screen text by its place in that order.
    rank = {url: n for n, url in enumerate(entry["order"])}
    by_text = {f"{c.title}. {c.snippet}": -rank.get(c.url, len(rank)) for c in state.pool}
    deps = flow.Deps(
        backends=[],
        similarity=lambda post, text: float(by_text.get(text, -len(rank))),
        relevance=lambda post, c: relevance.get(c.url),
        coverage=lambda terms, c: coverage.get(c.url),
    )
    while not state.screen_done:
        flow.screen(state, cfg, deps)
    while not state.done_choosing(cfg):
        flow.choose_one(state, cfg, deps)
    return [state.pool[c.pool_index].url for c in state.active]


def proposals(
    cases: list[dict[str, Any]],
    cache: dict[str, Any],
    files: dict[str, str],
    floor: float,
    margin: float | None = None,
    weight: float | None = None,
) -> tuple[int, int, int]:
    """Replayed at this floor and margin: (cases with an acceptable page among their proposals,
    acceptable proposals, proposals), an acceptable page being the case's file or one of its `also`."""
    hits = acceptable = proposed = 0
    for case in cases:
        ok = {case["file"], *case.get("also", [])}
        got = [files.get(u, u) in ok for u in replay(cache[case["post"]], floor, margin=margin, weight=weight)]
        hits += any(got)
        acceptable += sum(got)
        proposed += len(got)
    return hits, acceptable, proposed


def margin_table(
    cases: list[dict[str, Any]], unaddressed: list[dict[str, Any]], cache: dict[str, Any], files: dict[str, str]
) -> list[str]:
    """At the configured floor, each key-term weight and margin below the best screened candidate
    (SearchConfig.key_term_weight, relevance_margin) per half of the cases: chosen on the
    even-numbered cases, checked on the odd."""
    from django.conf import settings

    floor = settings.EVIDENCE_RELEVANCE_FLOOR
    rows = [
        f"Margin below the best candidate, floor {floor:.2f} (even half: where the margin is chosen; odd: held out)",
        "",
        "| key-term weight | margin | recall@3 even | acceptable even | recall@3 odd | acceptable odd | recall@3 all | acceptable all | on the unaddressed claims |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    grid = [(0.0, m) for m in MARGINS] + [(w, m) for w in KEY_TERM_WEIGHTS[1:] for m in KEY_TERM_MARGINS]
    for weight, margin in grid:
        cells = []
        for part in (0, 1, None):
            some = [c for n, c in enumerate(cases) if part is None or n % 2 == part]
            hits, acceptable, proposed = proposals(some, cache, files, floor, margin, weight)
            cells += [
                f"{hits}/{len(some)} = {hits / len(some):.0%}",
                f"{acceptable}/{proposed}" if proposed else "none",
            ]
            if proposed:
                cells[-1] += f" = {acceptable / proposed:.0%}"
        off = sum(len(replay(cache[u["post"]], floor, margin=margin, weight=weight)) for u in unaddressed)
        shown = "none" if margin is None else f"{margin:.2f}"
        rows.append(f"| {weight:.2f} | {shown} | {' | '.join(cells)} | {off} |")
    return rows


def part_automation(cache_path: Path) -> list[str]:
    data = labelled()
    cases, unaddressed = data["cases"], data["unaddressed"]
    cache = collect([c["post"] for c in cases] + [u["post"] for u in unaddressed], cache_path)
    files = file_of()
    rows = [
        "| floor (no margin) | recall@3 (cases with an acceptable page proposed) | proposals acceptable | proposals on the 10 unaddressed claims | proposals per case |",
        "|---|---|---|---|---|",
    ]
    for floor in FLOORS:
        hits, acceptable, proposed = proposals(cases, cache, files, floor, weight=0.0)
        off = sum(len(replay(cache[u["post"]], floor, weight=0.0)) for u in unaddressed)
        share = f"{acceptable}/{proposed} = {acceptable / proposed:.0%}" if proposed else "none proposed"
        rows.append(
            f"| {floor:.2f} | {hits}/{len(cases)} = {hits / len(cases):.0%} | {share} | {off} | {proposed / len(cases):.2f} |"
        )
    rows += ["", *margin_table(cases, unaddressed, cache, files)]
    checked = [r for e in cache.values() for r in e["relevance"].values() if r is not None]
    pools = [len(e["state"]["pool"]) for e in cache.values()]
    secs = [e["s"] for e in cache.values()]
    rows.append(
        f"\n{len(cache)} posts; pool size median {sorted(pools)[len(pools) // 2]}; {len(checked)} candidates "
        f"checked; collection {sum(secs):.0f} s (median {sorted(secs)[len(secs) // 2]:.1f} s per post)."
    )
    # Where the acceptable and the other checked candidates fall (to choose the floor).
    good: list[float] = []
    other: list[float] = []
    for case in cases:
        ok = {case["file"], *case.get("also", [])}
        for url, rel in cache[case["post"]]["relevance"].items():
            if rel is not None:
                (good if files.get(url, url) in ok else other).append(rel)
    none = [r for u in unaddressed for r in cache[u["post"]]["relevance"].values() if r is not None]
    for name, values in (("acceptable", good), ("other (labelled cases)", other), ("unaddressed claims", none)):
        if values:
            values.sort()
            rows.append(
                f"- {name}: n={len(values)}, min {values[0]:.3f}, median {values[len(values) // 2]:.3f}, max {values[-1]:.3f}"
            )
    return rows


# --- concurrency ----------------------------------------------------------------------------------


def _case(file: str) -> dict[str, Any]:
    return next(c for c in labelled()["cases"] if c["file"] == file)


def part_concurrency(unsliced: bool, sliced_only: bool = False) -> list[str]:
    from django.contrib.auth.models import User

    # Project modules load Django models: imported once django.setup() has run.
    from evidence import snippets
    from evidence.models import EvidenceSource, Passage, Snippet
    from notes.models import DraftJob
    from tests.notes.factories import make_job, make_post
    from tests.support.web_server import WebServer
    from tests.support.worker import Worker, purge_broker

    web = WebServer()
    a_case, b_case = _case(PDF_CASE_FILE), _case(B_CASE_FILE)
    a_url = web.add("/who-ipc.pdf", (DATA / PDF_CASE_FILE).read_bytes(), content_type="application/pdf")
    b_url = web.add("/mayo.html", (DATA / B_CASE_FILE).read_bytes(), content_type="text/html; charset=utf-8")
    warm_url = web.add("/warm.html", _WARM_PAGE)
    users = [User.objects.get_or_create(username=f"bench-{n}")[0] for n in ("a", "b")]
    # The pre-filter table is built once here (the worker reads it from MODEL_CACHE_DIR).
    _warm_table()
    rows = [
        "| refine | A: first pick (s) | A: final pick (s) | A: slices | A: mean slice (s) | B: first pick after B's submit (s) | A's refine still running when B was ready |",
        "|---|---|---|---|---|---|---|",
    ]
    variants = [
        ("slices of 32 passages", "32", "0"),
        (f"slices of <= 32 passages and <= {SLICE_SECONDS:g} s", "32", f"{SLICE_SECONDS:g}"),
        ("one unsliced task", "100000", "0"),
    ]
    if sliced_only:
        variants = variants[1:2]
    for label, slice_size, slice_seconds in variants[: 3 if unsliced else 2]:
        Snippet.objects.all().delete()
        DraftJob.objects.all().delete()
        # Neither page cached: both are fetched, read and matched as a contributor's would be.
        EvidenceSource.objects.filter(url__in=[a_url, b_url]).delete()
        Passage.objects.filter(source__indexed_at__isnull=True).delete()
        # Embeddings are shared by passage text: the index's copies of the two files must not hand
        # the fetched pages embeddings another part computed (the refine would cost nothing).
        for file in (PDF_CASE_FILE, B_CASE_FILE):
            Passage.objects.filter(source__copy_url__endswith=file).update(embedding=None)
        purge_broker()
        env = {
            "EVIDENCE_SLICE_PASSAGES": slice_size,
            "EVIDENCE_SLICE_SECONDS": slice_seconds,
            "EVIDENCE_ALLOWED_LOCAL": f"127.0.0.1:{web.port}",
            "CELERY_BROKER_URL": os.environ.get("CELERY_BROKER_URL", ""),
        }
        env = {k: v for k, v in env.items() if v}
        worker = Worker(queues="cpu", extra_env=env, name=f"bench-{slice_size}-{slice_seconds}")
        try:
            # The worker loads its model on a small page first, as a running demo worker has.
            EvidenceSource.objects.filter(url=warm_url).delete()
            (w,) = snippets.snippets_add(
                job=make_job(users[1], make_post("Warm-up post about hand washing.")), urls=[warm_url]
            )
            _wait(lambda pk=w.pk: _state(pk).state in ("ready", "failed") and not _state(pk).refine_pending, 300)
            a_job = make_job(users[0], make_post(a_case["post"]))
            started = time.monotonic()
            (a,) = snippets.snippets_add(job=a_job, urls=[a_url])
            a_first = _wait(lambda pk=a.pk: _state(pk).state in ("ready", "failed"), 600)
            b_job = make_job(users[1], make_post(b_case["post"]))
            b_started = time.monotonic()
            (b,) = snippets.snippets_add(job=b_job, urls=[b_url])
            _wait(lambda pk=b.pk: _state(pk).state in ("ready", "failed"), 900)
            b_ready = time.monotonic() - b_started
            a_running = Snippet.objects.get(pk=a.pk).refine_pending
            _wait(lambda pk=a.pk: not _state(pk).refine_pending, 900)
            a_final = time.monotonic() - started
            a_row = Snippet.objects.get(pk=a.pk)
            slices = int(a_row.timings_ms.get("refine_slices", 0))
            mean = int(a_row.timings_ms.get("refine", 0)) / 1000 / max(slices, 1)
            rows.append(
                f"| {label} | {a_first - started:.1f} | {a_final:.1f} | {slices} | {mean:.1f} | "
                f"{b_ready:.1f} | {'yes' if a_running else 'no'} |"
            )
            print(rows[-1], flush=True)
        finally:
            worker.stop()
    web.close()
    return rows


_WARM_PAGE = (
    "<html><head><title>Hand washing</title></head><body><article>"
    + "".join(
        f"<p>Washing hands with soap and water for twenty seconds removes germs ({n}). "
        "Rinse well and dry with a clean towel. Hand sanitizer helps when soap is not available.</p>"
        for n in range(12)
    )
    + "</article></body></html>"
)


def _warm_table() -> None:
    # Project modules load Django models: imported once django.setup() has run.
    from evidence import services
    from evidence.matching import prerank

    matcher = services.get_matcher()
    prerank(matcher.model, matcher.config.model_name, "warm", ["a passage"], matcher.config.cache_dir)


def _state(pk: int) -> Any:
    # Project modules load Django models: imported once django.setup() has run.
    from evidence.models import Snippet

    return Snippet.objects.get(pk=pk)


def _wait(predicate: Any, timeout: float) -> float:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return time.monotonic()
        time.sleep(0.2)
    raise TimeoutError("condition not met")


# --- top-K vs exhaustive ------------------------------------------------------------------------------


def part_topk(ks: tuple[int, ...] = (32, 64)) -> list[str]:
    import numpy as np

    # Project modules load Django models: imported once django.setup() has run.
    from evidence import services
    from evidence.matching import prerank
    from evidence.models import EvidenceSource

    matcher = services.get_matcher()
    files = {f: u for u, f in file_of().items()}
    rows = [
        "| K | long-document cases (> K passages) | top-K agrees with exhaustive | passage hit@1 top-K | passage hit@1 exhaustive |",
        "|---|---|---|---|---|",
    ]
    per_case = []
    for case in labelled()["cases"]:
        source = EvidenceSource.objects.get(url=files[case["file"]], indexed_at__isnull=False)
        passages = services.passages_for(source=source, matcher=matcher)
        if len(passages) <= min(ks):
            continue
        texts = [p.text for p in passages]
        started = time.perf_counter()
        vectors = matcher.embed(texts)
        services.passage_vectors_store(matcher=matcher, passages=passages, indices=list(range(len(passages))))
        sims = vectors @ matcher.embed([case["post"]])[0]
        pre = prerank(matcher.model, matcher.config.model_name, case["post"], texts, matcher.config.cache_dir)
        quotes = [_norm(q) for q in case["quotes"]]

        def hit(i: int, quotes: list[str] = quotes, texts: list[str] = texts) -> bool:
            return any(q in _norm(texts[i]) for q in quotes)

        best = int(np.argmax(sims))
        per_case.append((len(texts), best, hit(best), pre, sims, hit))
        print(f"  {case['id']}: {len(texts)} passages, {time.perf_counter() - started:.0f} s", flush=True)
    for k in ks:
        long = [c for c in per_case if c[0] > k]
        agree = hits_k = hits_all = 0
        for _, best, best_hit, pre, sims, hit in long:
            top = np.argsort(-pre, kind="stable")[:k]
            pick = int(top[int(np.argmax(sims[top]))])
            agree += pick == best
            hits_k += hit(pick)
            hits_all += best_hit
        n = len(long)
        if n:
            rows.append(f"| {k} | {n} | {agree}/{n} | {hits_k}/{n} | {hits_all}/{n} |")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--parts", default="index,concurrency,automation,topk")
    parser.add_argument("--cache", default=str(ROOT / "artifacts" / "ev-automation-bench-cache.json"))
    parser.add_argument("--unsliced", action="store_true", help="concurrency: also one unsliced refine")
    parser.add_argument(
        "--sliced-only", action="store_true", help="concurrency: the shipped slicing only (time and passage bound)"
    )
    args = parser.parse_args()
    parts = args.parts.split(",")
    url = os.environ.get("DATABASE_URL", "")
    if "index" in parts and url.startswith("postgres"):
        recreate_database(url)
        Path(args.cache).unlink(missing_ok=True)
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    for name, run in (
        ("index", part_index),
        ("concurrency", lambda: part_concurrency(args.unsliced, args.sliced_only)),
        ("automation", lambda: part_automation(Path(args.cache))),
        ("topk", part_topk),
    ):
        if name in parts:
            print(f"\n## {name}", flush=True)
            for row in run():
                print(row, flush=True)


if __name__ == "__main__":
    main()
