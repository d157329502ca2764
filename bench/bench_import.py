"""Benchmark `import_communitynotes` ratings import (PostgreSQL COPY path) on synthetic data.

    DATABASE_URL=postgres://…/cn_bench flock /tmp/heavy.lock .venv/bin/python bench/bench_import.py \
        --ratings 1000000 [--orm]

Writes synthetic public-format TSVs (`crowdnotes_site/lib/communitynotes/data/synthetic.py`), brings the schema of the database
named by DATABASE_URL up to date (`migrate`), empties its ratings, imports the notes, then times
the ratings import alone: first into empty tables, then again over the same rows (idempotent
re-import). Prints ratings/s, the process's peak memory and the PostgreSQL table sizes. The
database must exist (`createdb -h 127.0.0.1 -U postgres cn_bench`) and its ratings are
deleted: point it at a scratch database.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

from notes.scoring import reader as scoring_reader
from notes.scoring import services as scoring_services

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "crowdnotes_site.settings")


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def child_rescore() -> None:
    """Time scoring_inputs once, then three rescorings; print JSON with this process's peak RSS."""
    import django

    django.setup()
    from django.conf import settings

    settings.DEBUG = False
    from django.utils import timezone

    # Project modules load Django models: imported once django.setup() has run.

    t0 = time.perf_counter()
    inputs = scoring_reader.scoring_inputs(now=timezone.now(), lock_after_days=None)
    read_s = time.perf_counter() - t0
    del inputs
    runs = []
    # The synthetic notes are from 2023: from the second run on their statuses are locked (older
    # than 14 days), which changes their explanation once; the third run is unchanged.
    for label in ("first rescoring", "second (statuses now locked)", "unchanged rescoring"):
        t0 = time.perf_counter()
        summary = scoring_services.notes_rescore()
        runs.append((label, time.perf_counter() - t0, summary["notes_updated"], _peak_mb()))
    print(json.dumps({"read_s": read_s, "runs": runs}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ratings", type=int, default=1_000_000)
    parser.add_argument("--workdir", type=Path, default=ROOT / "var" / "bench-import")
    parser.add_argument("--orm", action="store_true", help="the batched ORM path instead of COPY")
    parser.add_argument("--online", action="store_true", help="COPY path without the table lock (per-row key checks)")
    parser.add_argument("--chunk-lines", type=int, default=250_000)
    parser.add_argument("--rescore", action="store_true", help="then time notes_rescore() from the database")
    parser.add_argument("--child-rescore", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child_rescore:
        return child_rescore()

    import django

    django.setup()
    from django.conf import settings

    # DEBUG=1 (for the dev settings) would keep every SQL statement in memory: not the import's.
    settings.DEBUG = False
    from django.core.management import call_command
    from django.db import connection

    # Project modules load Django models: imported once django.setup() has run.
    from crowdnotes_site.lib.communitynotes.data import synthetic
    from notes.communitynotes import importer as cni

    data_dir = args.workdir / str(args.ratings)
    notes_path, ratings_path = data_dir / "notes-00000.tsv", data_dir / "ratings-00000.tsv"
    if not ratings_path.exists():
        notes_path, ratings_path = synthetic.write_tsv(synthetic.generate(args.ratings, seed=5), data_dir)
    call_command("migrate", verbosity=0)
    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE notes_rating, notes_notestatuschange, notes_importcheckpoint")
    load_before = " ".join(f"{x:.2f}" for x in os.getloadavg())
    t0 = time.perf_counter()
    cni.import_notes(notes_path, cni.ImportReport())
    t_notes = time.perf_counter() - t0
    rows = []
    for label in ("empty tables", "re-import (same rows)"):
        report = cni.ImportReport()
        t0 = time.perf_counter()
        if args.orm:
            cni.import_ratings(ratings_path, report)
        else:
            cni.import_ratings_copy(ratings_path, report, chunk_lines=args.chunk_lines, exclusive=not args.online)
        elapsed = time.perf_counter() - t0
        n = report.counts["ratings upserted"]
        rows.append((label, n, elapsed, n / elapsed, report.counts["ratings inserted or changed"]))
    rescore: list[tuple[str, float, int, float]] = []
    t_read = 0.0
    if args.rescore:
        # In a fresh process, so that its peak memory is the rescoring's own (not the import's).
        out = subprocess.run(
            [sys.executable, __file__, "--child-rescore"], check=True, capture_output=True, text=True
        ).stdout
        result = json.loads(out.strip().splitlines()[-1])
        t_read, rescore = result["read_s"], [tuple(r) for r in result["runs"]]
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT relname, pg_total_relation_size(oid) FROM pg_class "
            "WHERE relname IN ('notes_rating', 'notes_note', 'notes_participant') ORDER BY relname"
        )
        sizes = cursor.fetchall()
    path = "ORM batches" if args.orm else "COPY, online (no table lock)" if args.online else "COPY, exclusive"
    print(f"path: {path}; notes import {t_notes:.1f} s; load average before: {load_before}")
    print("| run | ratings | seconds | ratings/s | rows written | peak MB (process) |")
    print("|---|---:|---:|---:|---:|---:|")
    for label, n, elapsed, rate, written in rows:
        print(f"| {label} | {n:,} | {elapsed:.1f} | {rate:,.0f} | {written:,} | {_peak_mb():.0f} |")
    print("table sizes: " + ", ".join(f"{name} {size / 2**20:.0f} MB" for name, size in sizes))
    print("load average after: " + " ".join(f"{x:.2f}" for x in os.getloadavg()))
    if rescore:
        print(f"\nrescoring from PostgreSQL (binary COPY of the ratings: {t_read:.1f} s for scoring_inputs)")
        print("| run | seconds | notes written | peak MB (process) |")
        print("|---|---:|---:|---:|")
        for label, elapsed, written, peak in rescore:
            print(f"| {label} | {elapsed:.1f} | {written:,} | {peak:.0f} |")


if __name__ == "__main__":
    main()
