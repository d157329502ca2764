"""Page latency while the app rescores a big imported database (issue 33, item 4: "pages keep
their latency while it runs (it runs on the `cpu` queue)").

A synthetic download imported into a fresh database (1 M ratings at --scale 0.005; dropped at the end
unless --keep-db):

    flock /tmp/heavy.lock .venv/bin/python bench/bench_rescore_latency.py --scale 0.005 \\
        --db cn_NAME_rescore --redis-url redis://127.0.0.1:6379/N

An existing database that already holds imported ratings (the full shape), used as it is; one
rescoring is ~10-20 min there, and notes.tasks.score_notes's soft time limit
(SCORING_SOFT_TIME_LIMIT_S, 3 h) applies on the default prefork pool (--pool solo or
--rescorer process: none):

    flock /tmp/heavy.lock .venv/bin/python bench/bench_rescore_latency.py --db cn_big \\
        --redis-url redis://127.0.0.1:6379/N --rescores 1 --idle-rounds 3

Steps:
1. The database. `--scale S`: the synthetic download (bench_import_folder.generate, into --data or
   /tmp/bench-rescore-DB/) imported with `manage.py import_communitynotes FOLDER` into a fresh
   database --db (refused if --db already holds ratings), then VACUUM (ANALYZE). Without --scale:
   --db must exist, hold ratings and have every migration applied (checked, never migrated); its
   ratings are not written. What the benchmark adds there: its users (bench-rescore-NN, each with
   a participant and a session), the rescoring runs (ScoringRun and outbox rows), and what each
   rescoring writes (the notes' scores and statuses, the raters' factors), as the app's own
   rescoring would.
2. gunicorn -w --workers with production settings (bench_load.start_gunicorn), and --clients
   signed-in clients (bench_load.run_page: one thread and one connection per request each, a
   think time of 0.5-1.5x --think between requests; --think 0: a closed loop).
3. Idle: --idle-rounds rounds over the pages (home, a note's page, the rating queue, the delays
   analytics page and the spikes page), --requests per client and page each round.
4. During rescoring: --rescorer worker (default) starts a real `celery worker -Q cpu
   --concurrency 1` (--pool prefork, as docs/operations/production.md runs it: the task's time
   limits apply; --pool solo: in the worker's own process, without time limits, as scripts/demo.sh)
   before the idle rounds, then asks for a rescoring as the admin's "Rescore now" does
   (notes_rescore_request: outbox, broker, `notes.tasks.score_notes`); --rescorer process runs
   notes_rescore() in a fresh process instead (bench_import_folder --child-rescore: no Celery,
   no task time limit). The same rounds run while it is under way; a page's batch that was still
   running when the rescoring ended is left out. --rescores runs, one after the other.
   Rescoring wall: the run's started_at to finished_at (worker) or the call (process); peak RSS
   of the process that rescored: VmHWM of the worker and its pool process once a run has ended,
   and wait4's at the end.
Prints two tables (pages; rescoring runs) with the load average before, during and after.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import bench_import_folder as folder_bench  # this folder: the script's own, first on sys.path
import bench_load as load_bench
import psycopg

ROOT = folder_bench.ROOT
PY = folder_bench.PY
PG = folder_bench.PG
PAGES = {
    "home": "/",
    "note page": "/rate/{note}/",
    "rating queue": "/rate/",
    "analytics: delays": "/analytics/delays/",
    "analytics: spikes": "/analytics/spikes/",
}
FINISHED = ("done", "failed", "skipped")


def _page_request(
    name: str, setup: dict[str, Any], info: dict[str, Any], index: int, r: int, token: str
) -> load_bench.Request:
    return "GET", PAGES[name].format(**setup), {}, "", (200,)


def child_setup(n_clients: int) -> None:
    """The benchmark's users (every role, a participant and a signed-in session each) and the
    note whose page is measured: the note of the first imported rating (a rated note, found by
    the primary key; no scan of the ratings)."""
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group

    from notes.models import Rating
    from notes.roles import ADMIN, CONTRIBUTOR, RATER
    from notes.services import participant_for_user

    note = Rating.objects.order_by("pk").values_list("note_id", flat=True).first()
    if note is None:
        raise SystemExit("the database holds no ratings")
    groups = list(Group.objects.filter(name__in=[ADMIN, CONTRIBUTOR, RATER]))
    clients = []
    for i in range(n_clients):
        user, _ = get_user_model().objects.get_or_create(username=f"bench-rescore-{i:02d}")
        user.groups.set(groups)
        participant_for_user(user=user)
        clients.append({"session": load_bench.signed_in_session(user)})
    print(json.dumps({"clients": clients, "note": note}))


def child_request() -> None:
    """Ask for a rescoring as the admin's button does (queued on the cpu queue once committed)."""
    import django

    django.setup()
    from django.db import transaction

    from notes.scoring.services import notes_rescore_request

    with transaction.atomic():
        run = notes_rescore_request(user=None)
    print(run.pk)


def _child(env: dict[str, str], *args: str) -> str:
    out = subprocess.run([PY, __file__, *args], cwd=ROOT, env=env, check=False, capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(f"{' '.join(args)} failed ({out.returncode}): {out.stderr[-2000:]}")
    return out.stdout.strip().splitlines()[-1]


def _ratings_exist(db: str) -> bool | None:
    """Whether `db` holds a rating (None: no such database, or no ratings table)."""
    try:
        with psycopg.connect(f"{PG}/{db}") as conn:
            if conn.execute("SELECT to_regclass('notes_rating')").fetchone() == (None,):
                return None
            return conn.execute("SELECT EXISTS (SELECT 1 FROM notes_rating)").fetchone() == (True,)
    except psycopg.OperationalError:
        return None


def _load() -> str:
    return f"{os.getloadavg()[0]:.2f}"


def _tree_peak_mib(pid: int) -> float:
    """The largest peak RSS (VmHWM) of a live process and its descendants (a prefork worker's pool
    process does the task), MiB."""
    peak = 0.0
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                peak = int(line.split()[1]) / 1024
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return peak
    return max([peak, *(_tree_peak_mib(int(c)) for c in children)])


class Rescorer:
    """One rescoring at a time, on a Celery worker (`worker`) or in a fresh process (`process`)."""

    def __init__(self, kind: str, pool: str, env: dict[str, str], db: str, work: Path) -> None:
        self.kind, self.pool, self.env, self.db, self.work = kind, pool, env, db, work
        self.worker: subprocess.Popen[bytes] | None = None
        self.proc: subprocess.Popen[bytes] | None = None
        self.run_id: int | None = None
        self.ended = True
        self.peak_mib = 0.0
        self.runs: list[dict[str, Any]] = []

    def start_worker(self) -> None:
        if self.kind != "worker":
            return
        log_path = self.work / "worker.log"
        log = log_path.open("w")
        self.worker = subprocess.Popen(
            [PY, "-m", "celery", "-A", "crowdnotes_site", "worker", f"--pool={self.pool}", "--concurrency=1", "-Q", "cpu",
             "-n", f"bench-rescore-{os.getpid()}@%h", "--without-gossip", "--without-mingle", "-l", "INFO"],
            cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        deadline = time.monotonic() + 120
        while " ready." not in log_path.read_text():
            if time.monotonic() > deadline or self.worker.poll() is not None:
                raise SystemExit(f"the Celery worker did not start; see {log_path}")
            time.sleep(0.5)

    def begin(self) -> None:
        """Ask for a rescoring and return once it is under way."""
        self.ended = False
        if self.kind == "process":
            env = {**self.env, "BENCH_RESCORE_RUNS": "1"}
            self.proc = subprocess.Popen(
                [PY, str(Path(folder_bench.__file__).resolve()), "--child-rescore"],
                cwd=ROOT, env=env, stdout=subprocess.PIPE,
            )  # fmt: skip
            return
        self.run_id = int(_child(self.env, "--child", "request"))
        deadline = time.monotonic() + 120
        while self._row()["state"] == "queued":
            if time.monotonic() > deadline:
                raise SystemExit(f"scoring run {self.run_id} still queued after 120 s; see {self.work / 'worker.log'}")
            time.sleep(0.2)

    def running(self) -> bool:
        """Whether the rescoring is still under way (its result recorded once it has ended)."""
        if self.ended:
            return False
        if self.kind == "process":
            assert self.proc is not None
            ended = folder_bench._wait(self.proc, block=False)
            if ended is None:
                return True
            self.ended = True
            code, peak = ended
            out = json.loads((self.proc.stdout.read() if self.proc.stdout else b"").decode().strip().splitlines()[-1])
            _, wall, ratings, written, _ = out["runs"][0]
            self.peak_mib = max(self.peak_mib, peak)
            self.runs.append({"state": "done" if code == 0 else f"exit {code}", "wall": wall, "ratings": ratings,
                              "notes_updated": written, "error": ""})  # fmt: skip
            return False
        row = self._row()
        if row["state"] not in FINISHED:
            return True
        self.ended = True
        if self.worker is not None:
            self.peak_mib = max(self.peak_mib, _tree_peak_mib(self.worker.pid))
        wall = (row["finished_at"] - row["started_at"]).total_seconds() if row["finished_at"] else float("nan")
        summary = row["summary"] or {}
        self.runs.append({"state": row["state"], "wall": wall, "ratings": summary.get("ratings", 0),
                          "notes_updated": summary.get("notes_updated", 0), "error": row["error"]})  # fmt: skip
        return False

    def _row(self) -> dict[str, Any]:
        with psycopg.connect(f"{PG}/{self.db}") as conn:
            row = conn.execute(
                "SELECT state, started_at, finished_at, summary, error FROM notes_scoringrun WHERE id = %s",
                [self.run_id],
            ).fetchone()
        assert row is not None
        return dict(zip(("state", "started_at", "finished_at", "summary", "error"), row, strict=True))

    def stop(self) -> None:
        if self.worker is not None and self.worker.returncode is None:
            self.worker.send_signal(signal.SIGTERM)  # warm shutdown: the task in hand ends first
            ended = folder_bench._wait(self.worker)
            if ended is not None:
                self.peak_mib = max(self.peak_mib, ended[1])
        if self.proc is not None and self.proc.returncode is None:
            self.proc.kill()
            folder_bench._wait(self.proc)


class Samples:
    """Latencies (ms) and error counts per page."""

    def __init__(self) -> None:
        self.latencies: dict[str, list[float]] = {name: [] for name in PAGES}
        self.errors: dict[str, int] = dict.fromkeys(PAGES, 0)

    def round(self, port: int, setup: dict[str, Any], requests: int, think: float, keep: Any = None) -> None:
        """One round: every page, each client `requests` times. With `keep`: a page's batch counts
        only if keep() still holds after it, and the round stops there when it does not."""
        for name in PAGES:
            row = load_bench.run_page(port, setup, name, requests, think, request_for=_page_request)
            if keep is not None and not keep():
                return
            self.latencies[name].extend(row["latencies"])
            self.errors[name] += row["errors"]


def _prepare(args: argparse.Namespace, work: Path) -> tuple[bool, str]:
    """The database (fresh from --scale, or the existing --db); whether it was made here, and a line on it."""
    if args.scale is None:
        if not _ratings_exist(args.db):
            raise SystemExit(f"--db {args.db}: no such database with ratings (or give --scale to import one)")
        env = folder_bench._env(args.db)
        check = subprocess.run([PY, "manage.py", "migrate", "--check", "-v0"], cwd=ROOT, env=env, check=False)
        if check.returncode:
            raise SystemExit(f"--db {args.db} has unapplied migrations; this benchmark never migrates it")
        return False, f"existing database {args.db}"
    if _ratings_exist(args.db):
        raise SystemExit(f"--db {args.db} already holds ratings: use it without --scale, or drop it first")
    data = args.data or work / f"scale-{args.scale:g}"
    gen_s = folder_bench.generate(data, args.scale)
    folder_bench._fresh(args.db)
    runs = folder_bench._import(data, args.db, work / "import.log", None, min_free_gb=2.0)
    with psycopg.connect(f"{PG}/{args.db}", autocommit=True) as conn:
        # What autovacuum would do after the bulk load (bench_load does the same).
        conn.execute("VACUUM (ANALYZE)")
        conn.execute("CHECKPOINT")
    if args.data is None:
        import shutil

        shutil.rmtree(data, ignore_errors=True)
    return True, (
        f"synthetic download at scale {args.scale:g} (generated in {gen_s:.0f} s), imported in "
        f"{sum(float(str(r['wall'])) for r in runs):.0f} s into a fresh database {args.db}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--db", help="the database: existing (no --scale) or made fresh (--scale)")
    parser.add_argument("--scale", type=float, help="import a synthetic download of this scale into a fresh --db")
    parser.add_argument("--data", type=Path, help="with --scale: where the download is generated (kept)")
    parser.add_argument("--keep-db", action="store_true", help="with --scale: keep the database at the end")
    parser.add_argument("--redis-url", default=os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/4"))
    parser.add_argument("--rescorer", choices=["worker", "process"], default="worker")
    parser.add_argument("--pool", choices=["prefork", "solo"], default="prefork", help="the worker's pool")
    parser.add_argument("--rescores", type=int, default=3, help="rescorings, one after the other")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--requests", type=int, default=1, help="per client, page and round")
    parser.add_argument("--think", type=float, default=0.5, help="seconds between a client's requests (0.5-1.5x)")
    parser.add_argument("--idle-rounds", type=int, default=10)
    parser.add_argument("--workers", type=int, default=4, help="gunicorn workers")
    parser.add_argument("--child", choices=["setup", "request"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child == "setup":
        return child_setup(args.clients)
    if args.child == "request":
        return child_request()
    if not args.db:
        parser.error("--db is required")

    work = Path(tempfile.gettempdir()) / f"bench-rescore-{args.db}"
    work.mkdir(parents=True, exist_ok=True)
    made, source = _prepare(args, work)
    env = load_bench._env(f"{PG}/{args.db}", args.redis_url, str(work / "static"))
    rescorer = Rescorer(args.rescorer, args.pool, env, args.db, work)
    server = None
    try:
        load_bench._manage(env, "collectstatic", "--noinput", "-v0")
        setup = json.loads(_child(env, "--child", "setup", "--clients", str(args.clients)))
        rescorer.start_worker()
        server, port = load_bench.start_gunicorn(env, args.workers, work / "gunicorn.log")
        Samples().round(port, {**setup, "clients": setup["clients"][:2]}, 2, 0)  # warm every worker
        loads = [_load()]
        idle, during = Samples(), Samples()
        for _ in range(args.idle_rounds):
            idle.round(port, setup, args.requests, args.think)
        loads.append(_load())
        for _ in range(args.rescores):
            rescorer.begin()
            while rescorer.running():
                during.round(port, setup, args.requests, args.think, keep=rescorer.running)
        loads.append(_load())
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=30)
        rescorer.stop()
        if made and not args.keep_db:
            with psycopg.connect(f"{PG}/postgres", autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{args.db}"')
    _print(args, source, idle, during, rescorer, loads)


def _cell(latencies: list[float]) -> str:
    if not latencies:
        return "– | – | –"
    p = load_bench.percentiles(latencies)
    return f"{len(latencies)} | {p['p50']:.0f} | {p['p95']:.0f}"


def _print(
    args: argparse.Namespace,
    source: str,
    idle: Samples,
    during: Samples,
    rescorer: Rescorer,
    loads: list[str],
) -> None:
    how = (
        f"a Celery worker (-Q cpu --pool={args.pool} --concurrency 1), asked as the admin's Rescore now"
        if args.rescorer == "worker"
        else "notes_rescore() in a fresh process"
    )
    print(f"\n{source}; rescoring by {how}; gunicorn -w {args.workers} (sync), DEBUG=0; {args.clients} clients, "
          f"think {args.think:g} s (0.5-1.5x), {args.requests} requests per client, page and round; "
          f"load average (1 min) before idle / after idle / after rescoring: {' / '.join(loads)}\n")  # fmt: skip
    print("| page | idle n | idle p50 ms | idle p95 ms | during n | during p50 ms | during p95 ms | errors |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name in PAGES:
        errors = idle.errors[name] + during.errors[name]
        print(f"| {name} | {_cell(idle.latencies[name])} | {_cell(during.latencies[name])} | {errors} |")
    print("\n| rescoring | state | wall s | ratings | notes written |")
    print("|---|---|---:|---:|---:|")
    for i, run in enumerate(rescorer.runs, 1):
        state = run["state"] + (f" ({run['error'][:120]})" if run["error"] else "")
        print(f"| {i} | {state} | {run['wall']:.1f} | {run['ratings']:,} | {run['notes_updated']:,} |")
    print(f"peak RSS of the rescoring process: {rescorer.peak_mib:.0f} MiB")


if __name__ == "__main__":
    main()
