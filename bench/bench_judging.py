"""Judging throughput: judged notes per minute through real Celery workers, with a
zero-latency loopback LLM, and the per-note overhead beyond LLM time.

Run (PostgreSQL + Redis required; uses its own database and wipes it):
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/cn_judging_bench REDIS_URL=redis://127.0.0.1:6379/5 \
        flock /tmp/heavy.lock python bench/bench_judging.py --notes 60 --workers 1 2

Per note, "LLM time" is the sum of the three stages' client-side call latencies (HTTP round
trips to the loopback server, which answers at once); "overhead" is worker time per note
(wall time x workers / notes) minus that: Celery delivery, claims, queries, inserts.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

from benchdb import recreate_database

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "crowdnotes_site.settings")
os.environ.setdefault("SECRET_KEY", "bench-only-secret-key")
os.environ.setdefault("SECURE_SSL_REDIRECT", "0")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--notes", type=int, default=60)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    args = parser.parse_args()
    if "postgres" not in os.environ.get("DATABASE_URL", "") or not os.environ.get("REDIS_URL"):
        sys.exit("set DATABASE_URL (PostgreSQL, a database the bench may wipe) and REDIS_URL")
    recreate_database(os.environ["DATABASE_URL"])

    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)

    # Project modules load Django models: imported once django.setup() has run.
    from tests.support.llm_server import ScriptedLLM

    llm = ScriptedLLM()
    # Headers and body go out in two writes; without TCP_NODELAY, Nagle + delayed ACK add
    # ~40 ms per call, which is not "zero latency".
    llm.server.RequestHandlerClass.disable_nagle_algorithm = True  # type: ignore[attr-defined]
    llm.respond_with(lambda messages: "Looks fine.\nFinal decision: yes")
    rows = [_in_process(args.notes, llm)]
    for n_workers in args.workers:
        rows.append(_with_workers(args.notes, n_workers, llm))
    llm.close()

    print()
    print("| setup | notes | wall s | judged notes/min | LLM ms/note | overhead ms/note |")
    print("|---|---|---|---|---|---|")
    for name, n, wall, llm_ms, overhead_ms in rows:
        print(f"| {name} | {n} | {wall:.1f} | {n / wall * 60:.0f} | {llm_ms:.1f} | {overhead_ms:.1f} |")


def _make_notes(n: int) -> list[int]:
    # Project modules load Django models: imported once django.setup() has run.
    from judging.models import JudgeDecision, JudgeRun
    from notes.models import Note, Post

    JudgeDecision.objects.all().delete()
    JudgeRun.objects.all().delete()
    Note.objects.all().delete()
    Post.objects.all().delete()
    ids = []
    for i in range(n):
        post = Post.objects.create(text=f"Claim {i}: vitamin C cures the flu.", text_hash=f"bench-{i}")
        note = Note.objects.create(post=post, text=f"Trials found no effect of vitamin C on flu ({i}).")
        ids.append(note.pk)
    return ids


def _llm_ms_per_note() -> float:
    from django.db.models import Sum

    # Project modules load Django models: imported once django.setup() has run.
    from judging.models import JudgeDecision

    per_note = JudgeDecision.objects.values("note_id").annotate(ms=Sum("latency_ms")).values_list("ms", flat=True)
    return statistics.mean(per_note) if per_note else 0.0


def _in_process(n: int, llm: object) -> tuple[str, int, float, float, float]:
    """The judge chain without Celery, for reference: services called in a loop."""
    from django.conf import settings

    # Project modules load Django models: imported once django.setup() has run.
    from judging import services
    from judging.models import JudgeRun
    from notes.models import Note

    settings.LLM_BASE_URL = llm.base_url  # type: ignore[attr-defined]
    ids = _make_notes(n)
    started = time.perf_counter()
    for note in Note.objects.filter(pk__in=ids).select_related("post"):
        run = services.judge_run_request(note=note)
        while services.judge_run_step(run_id=run.pk):
            pass
    wall = time.perf_counter() - started
    assert JudgeRun.objects.filter(state="done").count() == n
    llm_ms = _llm_ms_per_note()
    return "in-process (no Celery)", n, wall, llm_ms, wall * 1000 / n - llm_ms


def _with_workers(n: int, n_workers: int, llm: object) -> tuple[str, int, float, float, float]:
    from django.db import transaction

    # Project modules load Django models: imported once django.setup() has run.
    from judging import services
    from judging.models import JudgeRun
    from notes.models import Note
    from tests.support.worker import Worker, purge_broker

    ids = _make_notes(n)
    purge_broker()
    env = {"LLM_BASE_URL": llm.base_url, "DB_CONN_MAX_AGE": "60"}  # type: ignore[attr-defined]
    workers = [Worker(queues="llm", extra_env=env, name=f"bench{i}") for i in range(n_workers)]
    try:
        started = time.perf_counter()
        with transaction.atomic():
            for note in Note.objects.filter(pk__in=ids).select_related("post"):
                services.judge_run_request(note=note)
        while JudgeRun.objects.filter(state__in=["done", "failed"]).count() < n:
            time.sleep(0.05)
        wall = time.perf_counter() - started
    finally:
        for w in workers:
            w.stop()
    failed = JudgeRun.objects.filter(state="failed").count()
    if failed:
        print(f"warning: {failed} runs failed", file=sys.stderr)
    llm_ms = _llm_ms_per_note()
    return f"Celery, {n_workers} worker(s)", n, wall, llm_ms, wall * n_workers * 1000 / n - llm_ms


if __name__ == "__main__":
    main()
