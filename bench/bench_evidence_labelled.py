"""Passage and sentence hit@1 on the labelled evidence set.

Run (heavy: loads all-mpnet-base-v2; the first run embeds every passage of 34 documents, ~10-20 min
on 2 busy cores; reruns reuse bench/.cache/labelled-*.npz and take a few minutes):
    flock /tmp/heavy.lock .venv/bin/python bench/bench_evidence_labelled.py [--model all-MiniLM-L6-v2] [--json out.json]
        [--first-only] [--timing] [--prefilter-k K] [--no-prose] [--sentence-lexical W]
--timing: first pick only, no stored vector reused, each case with an empty cache (its time is a
latency); --first-only: no refine (no need to embed every passage). The overrides default to the
shipped MatchConfig.

Each case of bench/data/evidence_labelled.json goes through the real code path: the page is served
on loopback, fetched, extracted (evidence.extract) and cut into 512/128-token passages
(Matcher.chunk), then matched like the worker does:
  - first pick: Matcher.match with the shipped strategy (BM25 + static pre-filter, mpnet on top-k),
  - after refine: Matcher.match exhaustive (every passage embedded), what snippet_refine stores.
Passage hit: the chosen passage contains one of the case's quotes (whitespace collapsed).
Sentence hit: the sentence the matcher highlights in that passage (Matcher.best_sentence) covers
at least half of a quote, or lies inside one. Quotes missing from the extracted text are counted
(an extraction change can drop them), and such a case can only miss.

A weight tried on this set is chosen on the even-numbered cases of the file (0, 2, ...) and checked
on the odd ones: the table reports the even half, the odd half (held out) and all.
Time: the first pick's match plus its sentence choice, per case, model warm (a latency only with
--timing; otherwise the stored vectors make it a dot product).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import os
import statistics
import sys
import threading
import time
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from evidence.embedding import MPNET  # noqa: E402
from evidence.fetch import FetchPolicy  # noqa: E402
from evidence.matching import MatchConfig, Matcher, VectorCache  # noqa: E402
from evidence.pipeline import PipelineResult, retrieve  # noqa: E402

PAGES = ROOT.parent / "shared" / "data" / "webpages"
if not PAGES.exists():
    PAGES = Path("/work/shared/data/webpages")
CACHE = ROOT / "bench" / ".cache"
LABELLED = ROOT / "bench" / "data" / "evidence_labelled.json"


class Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


def serve() -> tuple[ThreadingHTTPServer, int]:
    handler = functools.partial(Quiet, directory=str(PAGES))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, server.server_address[1]


def norm(text: str) -> str:
    return " ".join(text.split())


def overlap(a: tuple[int, int], b: tuple[int, int]) -> int:
    return max(0, min(a[1], b[1]) - max(a[0], b[0]))


def quote_spans(text: str, quotes: list[str]) -> list[tuple[int, int]]:
    """Where each quote (or, for a quote cut by the passage's edge, its part inside) lies in text."""
    spans = []
    for quote in quotes:
        at = text.find(quote)
        if at >= 0:
            spans.append((at, at + len(quote)))
    return spans


def sentence_hit(passage: str, sentence: str, quotes: list[str]) -> bool:
    text = norm(passage)
    at = text.find(norm(sentence))
    if at < 0 or not sentence.strip():
        return False
    shown = (at, at + len(norm(sentence)))
    for span in quote_spans(text, quotes):
        common = overlap(shown, span)
        if common >= 0.5 * (span[1] - span[0]) or common >= 0.9 * (shown[1] - shown[0]):
            return True
    return False


def mark(hit: bool | None) -> str:
    return "-   " if hit is None else "HIT " if hit else "miss"


def load_vectors(matcher: Matcher, path: Path) -> None:
    if path.exists():
        label = matcher.model_label()
        for key, vector in np.load(path).items():
            matcher.cache.put((label, key), vector)


def save_vectors(matcher: Matcher, path: Path) -> None:
    """Every vector the run embedded (passages, posts, sentences), keyed by text hash, for reruns."""
    label = matcher.model_label()
    stored = dict(np.load(path)) if path.exists() else {}
    for (key_label, key), vector in list(matcher.cache._items.items()):
        if key_label == label:
            stored[key] = vector
    CACHE.mkdir(exist_ok=True)
    np.savez(path, **stored)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default=MPNET)
    parser.add_argument("--json", help="write per-case results here")
    parser.add_argument("--only", help="comma-separated case ids")
    parser.add_argument(
        "--no-prose",
        action="store_true",
        help="rank by cosine alone (no prose demotion)",
    )
    parser.add_argument("--pair-margin", type=float, help="override MatchConfig.pair_margin")
    parser.add_argument(
        "--prefilter-k",
        type=int,
        help="override MatchConfig.prefilter_k (passages the first pick embeds)",
    )
    parser.add_argument("--sentence-lexical", type=float, help="override MatchConfig.sentence_lexical_weight")
    parser.add_argument(
        "--first-only",
        action="store_true",
        help="the first pick only (no exhaustive refine)",
    )
    parser.add_argument(
        "--timing",
        action="store_true",
        help="first pick only, with no stored vector: its time includes embedding the passages and sentences",
    )
    args = parser.parse_args()
    data = json.loads(LABELLED.read_text())
    cases = data["cases"]
    if args.only:
        cases = [c for c in cases if c["id"] in args.only.split(",")]
    server, port = serve()
    policy = FetchPolicy(
        allowed_local=frozenset({("127.0.0.1", port)}),
        total_timeout=30,
        max_bytes=20 * 1024 * 1024,
    )
    config = MatchConfig(model_name=args.model)
    if args.no_prose:
        config = dataclasses.replace(config, prose_demotion=False)
    if args.pair_margin is not None:
        config = dataclasses.replace(config, pair_margin=args.pair_margin)
    if args.prefilter_k is not None:
        config = dataclasses.replace(config, prefilter_k=args.prefilter_k)
    if args.sentence_lexical is not None:
        config = dataclasses.replace(config, sentence_lexical_weight=args.sentence_lexical)
    matcher = Matcher(config)
    path = CACHE / f"labelled-{Path(args.model).name}.npz"
    if not args.timing:
        load_vectors(matcher, path)
    # The first pick must run the shipped pre-filter even when the bench cache holds every vector
    # (the worker only skips it for pages embedded before): never report "all cached".
    matcher.all_cached = lambda texts: False  # type: ignore[method-assign]
    rows: list[dict[str, Any]] = []
    missing_quotes = 0
    n_quotes = 0
    for case in cases:
        run = PipelineResult()
        retrieve(f"http://127.0.0.1:{port}/{case['file']}", run, policy=policy, min_words=25)
        assert run.extracted is not None
        full = norm(run.extracted.text)
        quotes = [q for q in case["quotes"] if norm(q) in full]
        n_quotes += len(case["quotes"])
        missing_quotes += len(case["quotes"]) - len(quotes)
        chunks = matcher.chunk(run.extracted.text)
        texts = [c.text for c in chunks]
        # The case's position in the labelled file: weights were chosen on the even half.
        half = "even" if data["cases"].index(case) % 2 == 0 else "odd"
        row: dict[str, Any] = {
            "id": case["id"],
            "file": case["file"],
            "n_passages": len(texts),
            "half": half,
        }
        if args.timing:
            matcher.cache = VectorCache()  # cases sharing a document must not reuse its vectors
        stages = (
            (("first", "prefilter"),)
            if args.timing or args.first_only
            else (("first", "prefilter"), ("refined", "exhaustive"))
        )
        for label, strategy in stages:
            started = time.perf_counter()
            result = matcher.match(case["post"], texts, strategy=strategy)
            match_s = time.perf_counter() - started
            chosen = texts[result.best_index]
            row[f"{label}_index"] = result.best_index
            row[f"{label}_score"] = round(result.best_score, 4)
            row[f"{label}_passage_hit"] = any(norm(q) in norm(chosen) for q in quotes)
            row[f"{label}_match_s"] = round(match_s, 2)
            started = time.perf_counter()
            sentence = matcher.best_sentence(case["post"], chosen)
            row[f"{label}_sentence_s"] = round(time.perf_counter() - started, 2)
            assert sentence is not None  # a passage with text always has a best sentence
            row[f"{label}_sentence"] = sentence.text
            row[f"{label}_sentence_hit"] = sentence_hit(chosen, sentence.text, [norm(q) for q in quotes])
        rows.append(row)
        print(
            f"{case['id']:24s} n={len(texts):3d} first={'HIT ' if row['first_passage_hit'] else 'miss'}"
            f" refined={mark(row.get('refined_passage_hit'))}"
            + f" sent1={mark(row['first_sentence_hit'])} sentR={mark(row.get('refined_sentence_hit'))}"
            f" | {row['first_sentence'][:90]!r}",
            flush=True,
        )
    server.shutdown()
    if not args.timing:
        save_vectors(matcher, path)
    n = len(rows)

    def share(key: str, half: str | None = None) -> str:
        some = [r for r in rows if half is None or r["half"] == half]
        if not any(key in r for r in some):
            return "not run"
        hits = sum(1 for r in some if r.get(key))
        return f"{hits}/{len(some)} = {hits / max(1, len(some)):.0%}"

    print()
    print(
        f"model {args.model}, n = {n} cases, {len({r['file'] for r in rows})} documents; quotes missing from the extracted text: {missing_quotes}/{n_quotes}"
    )
    print(
        f"prefilter_k {config.prefilter_k}, pair_margin {config.pair_margin}, prose_demotion {config.prose_demotion},"
        f" sentence_lexical_weight {config.sentence_lexical_weight}"
    )
    print("| cases | passage hit@1, first pick | after refine | sentence hit@1, first pick | after refine |")
    print("|---|---|---|---|---|")
    for part in ("even", "odd", None):
        print(
            f"| {part or 'all'} | {share('first_passage_hit', part)} | {share('refined_passage_hit', part)}"
            f" | {share('first_sentence_hit', part)} | {share('refined_sentence_hit', part)} |"
        )
    first = [r["first_match_s"] + r["first_sentence_s"] for r in rows]
    cached = "stored vectors reused: not a latency" if not args.timing else "nothing cached"
    print(
        f"first pick (match + sentence, model warm, {cached}) median {statistics.median(first):.2f} s,"
        f" max {max(first):.2f} s; sentence choice alone median {statistics.median(r['first_sentence_s'] for r in rows):.2f} s"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1, ensure_ascii=False))


if __name__ == "__main__":
    main()
