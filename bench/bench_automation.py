"""Automation ("find evidence for me") benchmark: end-to-end time to proposed sources, local index
query latency and ingest rate at 10 K / 100 K documents, and recall@τ of a planted document.

Run on PostgreSQL (a database the bench may wipe) and on the embedded SQLite default:
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/cn_automation_bench \
        flock /tmp/heavy.lock .venv/bin/python bench/bench_automation.py
    CROWDNOTES_VAR_DIR=/tmp/automation-bench-sqlite flock /tmp/heavy.lock .venv/bin/python bench/bench_automation.py

Parts (each prints a table):
1. ingest: `index_documents` on ../shared/data/webpages (162 real pages and PDFs, with the manifest).
2. end to end: `evidence.search.services.find_evidence` with τ = 3 on that index, for the labelled
   posts below: offline (baselines, MiniLM) and with a zero-latency loopback OpenAI-compatible LLM.
3. recall@τ on a labelled set built from the corpus: for every English page of health/ and pdf/,
   the post is one sentence of that page (the 4th or later sentence with 12-40 words) and the
   planted relevant document is the page itself. A known-item test: the sentence's words are in
   the document, so lexical search finds it more easily than real posts would.
4. index (and 5. tantivy, for the choice of engine): synthetic documents (words drawn by frequency from the corpus vocabulary, 120 words
   each) added to 10 K and 100 K; bulk ingest rate with the full-text index maintained, and the
   latency of the local backend's query (k = 24: 3 x 8 results before rerank), 300 queries.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from datetime import date, timedelta
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


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def labelled_posts(limit: int) -> list[tuple[str, str]]:
    """(post, planted document URL) from the indexed English health pages and PDFs."""
    # Project modules load Django models: imported once django.setup() has run.
    from crowdnotes_site.lib.llm.steps.common import sentences
    from evidence.models import EvidenceSource

    posts = []
    for source in EvidenceSource.objects.filter(indexed_at__isnull=False, language="en").order_by("id"):
        if not source.copy_url.split("/")[-2:-1] or source.copy_url.split("/")[-2] not in ("health", "pdf"):
            continue
        picked = [s for s in sentences(source.cleaned_text)[3:] if 12 <= len(s.split()) <= 40]
        if picked:
            posts.append((picked[0], source.url))
    return posts[:limit]


def part_ingest(data: Path) -> list[str]:
    # Project modules load Django models: imported once django.setup() has run.
    from evidence.index.services import documents_index_folder

    started = time.perf_counter()
    outcomes = documents_index_folder(folder=data, manifest=DATA / "manifest.tsv", base_url="http://127.0.0.1:8001/")
    wall = time.perf_counter() - started
    n = sum(outcomes.values())
    return [
        f"| demo corpus, `index_documents` (extract + chunk + categorize) | {n} | {dict(outcomes)} | {wall:.1f} | {n / wall:.2f} |"
    ]


def part_end_to_end(posts: list[tuple[str, str]]) -> list[str]:
    from django.test import override_settings

    # Project modules load Django models: imported once django.setup() has run.
    from evidence.search.services import find_evidence
    from tests.support.llm_server import ScriptedLLM

    rows = []
    llm = ScriptedLLM()
    llm.server.RequestHandlerClass.disable_nagle_algorithm = True  # type: ignore[attr-defined]

    def answer(messages: list[dict[str, str]]) -> str:
        if "plan web searches" in messages[0]["content"]:
            return "vaccine safety\nmeasles outbreak\nflu shot\ndiabetes symptoms\ngreen tea"
        return "The most relevant.\nIndex: 0"

    llm.respond_with(answer)
    find_evidence(post_text="warm up the models", tau=3)  # model loads are not part of a request's time
    for name, overrides in (
        ("offline baselines (no LLM)", {}),
        ("zero-latency loopback LLM", {"LLM_BASE_URL": llm.base_url}),
    ):
        with override_settings(**overrides):
            times = []
            for post, _ in posts:
                started = time.perf_counter()
                state = find_evidence(post_text=post, tau=3)
                times.append(time.perf_counter() - started)
                assert len(state.active) <= 3  # fewer when few candidates clear the relevance floor
        rows.append(
            f"| {name} | {len(times)} | {statistics.median(times):.2f} | {pct(times, 0.95):.2f} | {max(times):.2f} |"
        )
    llm.close()
    return rows


def part_recall(posts: list[tuple[str, str]]) -> list[str]:
    # Project modules load Django models: imported once django.setup() has run.
    from evidence.search.services import find_evidence

    rows = []
    for name, kwargs in (
        ("diverse queries + utility baseline (default)", {}),
        ("- query diversity (single query)", {"single_query": True}),
        ("- utility judgment (rank order)", {"rank_order": True}),
    ):
        for tau in (1, 3):
            hits = 0
            for post, url in posts:
                state = find_evidence(post_text=post, tau=tau, **kwargs)  # type: ignore[arg-type]
                hits += url in {state.pool[c.pool_index].url for c in state.active}
            rows.append(f"| {name} | {tau} | {len(posts)} | {hits / len(posts):.3f} |")
    return rows


def vocabulary() -> tuple[list[str], Any]:
    """The corpus's words (document frequency as the sampling weight), for synthetic documents."""
    import numpy as np

    # Project modules load Django models: imported once django.setup() has run.
    from evidence.index import store
    from evidence.models import EvidenceSource

    texts = EvidenceSource.objects.filter(indexed_at__isnull=False, language="en").values_list(
        "cleaned_text", flat=True
    )
    counts: dict[str, int] = {}
    for text in texts:
        for word in store.query_terms(text, limit=10**9):
            if word.isalpha() and len(word) > 2:
                counts[word] = counts.get(word, 0) + 1
    vocab = sorted(counts, key=lambda w: -counts[w])[:20000]
    weights = np.array([counts[w] for w in vocab], dtype=float)
    return vocab, weights / weights.sum()


def part_index(sizes: list[int], queries: int) -> list[str]:
    import numpy as np
    from django.db import connection
    from django.utils import timezone

    # Project modules load Django models: imported once django.setup() has run.
    from crowdnotes_site.lib.hashing import sha256_hex
    from evidence.index import store
    from evidence.models import EvidenceSource

    vocab, weights = vocabulary()
    rng = np.random.default_rng(7)
    pyrng = random.Random(7)
    rows = []
    have = EvidenceSource.objects.filter(url__startswith="https://synthetic.example/").count()
    for size in sizes:
        todo = size - have
        started = time.perf_counter()
        batch = []
        for i in range(have, size):
            words = rng.choice(vocab, size=126, p=weights)
            body = " ".join(words[6:])
            url = f"https://synthetic.example/doc/{i}"
            batch.append(EvidenceSource(
                url=url, url_hash=sha256_hex(url), final_url=url, title=" ".join(words[:6]), cleaned_text=body,
                content_hash=sha256_hex(body), indexed_at=timezone.now(), category="news", domain="synthetic.example",
                published_at=date(2015, 1, 1) + timedelta(days=int(rng.integers(0, 3650))),
            ))  # fmt: skip
            if len(batch) == 2000:
                EvidenceSource.objects.bulk_create(batch)
                batch = []
        EvidenceSource.objects.bulk_create(batch)
        ingest = time.perf_counter() - started
        have = size
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("ANALYZE evidence_evidencesource")
        mid = vocab[50:3000]
        latencies, cut_latencies = [], []
        for _ in range(queries):
            query = " ".join(pyrng.sample(mid, pyrng.randint(3, 6)))
            t0 = time.perf_counter()  # what the local backend does: 24 ranked, snippets for the 8 kept
            store.with_snippets(query, store.search(query, k=24, snippets=False)[:8])
            latencies.append((time.perf_counter() - t0) * 1000)
            t0 = time.perf_counter()
            store.with_snippets(query, store.search(query, k=24, cutoff=date(2020, 1, 1), snippets=False)[:8])
            cut_latencies.append((time.perf_counter() - t0) * 1000)
        rows.append(
            f"| {connection.vendor} | {size:,} | {todo / ingest:,.0f} | {statistics.median(latencies):.1f} | "
            f"{pct(latencies, 0.95):.1f} | {statistics.median(cut_latencies):.1f} | {pct(cut_latencies, 0.95):.1f} |"
        )
        print(rows[-1], flush=True)
    return rows


def part_tantivy(sizes: list[int], queries: int) -> list[str]:
    """The same synthetic documents and queries in tantivy (BM25, stemmed English), for the choice."""
    import tempfile
    from datetime import UTC, datetime

    import numpy as np
    import tantivy

    vocab, weights = vocabulary()
    builder = tantivy.SchemaBuilder()
    builder.add_text_field("title", stored=True, tokenizer_name="en_stem")
    builder.add_text_field("body", stored=True, tokenizer_name="en_stem")
    builder.add_date_field("published", stored=True, indexed=True, fast=True)
    schema = builder.build()
    index = tantivy.Index(schema, path=tempfile.mkdtemp(prefix="tantivy-bench-"))
    writer = index.writer(heap_size=200_000_000)
    rng = np.random.default_rng(7)
    pyrng = random.Random(7)
    rows, have = [], 0
    for size in sizes:
        started = time.perf_counter()
        for _ in range(have, size):
            words = rng.choice(vocab, size=126, p=weights)
            day = datetime(2015, 1, 1, tzinfo=UTC) + timedelta(days=int(rng.integers(0, 3650)))
            writer.add_document(tantivy.Document(title=" ".join(words[:6]), body=" ".join(words[6:]), published=day))
        writer.commit()
        writer.wait_merging_threads()
        writer = index.writer(heap_size=200_000_000)
        index.reload()
        ingest = time.perf_counter() - started
        todo, have = size - have, size
        searcher = index.searcher()
        mid = vocab[50:3000]
        cutoff = tantivy.Query.range_query(
            schema, "published", tantivy.FieldType.Date, datetime(1990, 1, 1, tzinfo=UTC), datetime(2020, 1, 1, tzinfo=UTC),
            include_lower=True, include_upper=False,
        )  # fmt: skip
        latencies, cut_latencies = [], []
        for _ in range(queries):
            picked = pyrng.sample(mid, pyrng.randint(3, 6))
            t0 = time.perf_counter()
            query = index.parse_query(" ".join(picked), ["title", "body"])
            [searcher.doc(address)["title"] for _, address in searcher.search(query, 24).hits]
            latencies.append((time.perf_counter() - t0) * 1000)
            t0 = time.perf_counter()
            both = tantivy.Query.boolean_query([(tantivy.Occur.Must, query), (tantivy.Occur.Must, cutoff)])
            [searcher.doc(address)["title"] for _, address in searcher.search(both, 24).hits]
            cut_latencies.append((time.perf_counter() - t0) * 1000)
        rows.append(
            f"| tantivy {tantivy.__version__ if hasattr(tantivy, '__version__') else ''} (no snippets) | {size:,} | "
            f"{todo / ingest:,.0f} | {statistics.median(latencies):.1f} | {pct(latencies, 0.95):.1f} | "
            f"{statistics.median(cut_latencies):.1f} | {pct(cut_latencies, 0.95):.1f} |"
        )
        print(rows[-1], flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--posts", type=int, default=40, help="labelled posts for parts 2 and 3")
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--data", type=Path, default=DATA, help="the corpus folder (default ../shared/data/webpages)")
    parser.add_argument("--skip", nargs="*", default=[], choices=["ingest", "e2e", "recall", "index", "tantivy"])
    args = parser.parse_args()
    if "postgres" in os.environ.get("DATABASE_URL", ""):
        recreate_database(os.environ["DATABASE_URL"])
    else:
        var = Path(os.environ.get("CROWDNOTES_VAR_DIR") or ROOT / "var" / "automation-bench")
        (var / "crowdnotes.sqlite3").unlink(missing_ok=True)
        os.environ["CROWDNOTES_VAR_DIR"] = str(var)

    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command
    from django.db import connection

    call_command("migrate", verbosity=0)
    print(
        f"database: {connection.vendor}; embedding model {settings.EMBEDDING_MODEL}; backends {settings.SEARCH_BACKENDS}"
    )
    if "ingest" not in args.skip:
        print("\n| ingest | documents | outcomes | wall s | documents/s |\n|---|---:|---|---:|---:|")
        print("\n".join(part_ingest(args.data)), flush=True)
    posts = labelled_posts(args.posts)
    if "e2e" not in args.skip:
        print(
            "\n| find evidence → proposed sources, τ = 3 | posts | median s | p95 s | max s |\n|---|---:|---:|---:|---:|"
        )
        print("\n".join(part_end_to_end(posts)), flush=True)
    if "recall" not in args.skip:
        print("\n| recall of the planted document | τ | posts | recall@τ |\n|---|---:|---:|---:|")
        print("\n".join(part_recall(posts)), flush=True)
    if "index" not in args.skip:
        print("\n| database | documents | bulk ingest docs/s | query p50 ms | p95 ms | with cutoff p50 ms | p95 ms |")
        print("|---|---:|---:|---:|---:|---:|---:|", flush=True)
        part_index(args.sizes, args.queries)
    if "tantivy" not in args.skip and connection.vendor == "postgresql":  # the same rows either way: once
        try:
            part_tantivy(args.sizes, args.queries)
        except ImportError:
            print("(tantivy not installed: pip install tantivy==0.27.0 for the comparison row)")


if __name__ == "__main__":
    main()
