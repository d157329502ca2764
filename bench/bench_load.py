"""Load benchmark: the main pages on gunicorn + PostgreSQL + Redis under concurrent clients.

Sets up a benchmark database (migrate, the demo, `--ratings` synthetic Community Notes ratings
imported with `import_communitynotes`, one draft with evidence per client, judge decisions),
starts `gunicorn -w 4` with production settings (DEBUG=0), then, one page at a time, lets
`--clients` threads (one signed-in user each) send `--requests` requests each, and prints
p50 / p95 / max latency and throughput per page, with the load average before and after. The last
row is a baseline of the same server in the same run: /favicon.ico, a redirect through the whole
middleware stack without a query or a template, i.e. what the machine (other jobs, the load client
on the same cores) adds to any request.

    flock /tmp/heavy.lock .venv/bin/python bench/bench_load.py \\
        --database-url postgres://postgres@127.0.0.1:5432/cn_bench_load --redis-url redis://127.0.0.1:6379/4

The client is the standard library (one connection per request, as gunicorn's sync workers
close them anyway); it runs on the same machine as the server, so it takes some of the CPU.
Rate limits are raised for the run (each client posts many ratings in seconds).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import secrets
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the project's modules (the script runs from bench/)
PY = sys.executable


def _env(database_url: str, redis_url: str, static_root: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LLM_", "RATE_LIMIT_"))}
    env.update(
        DJANGO_SETTINGS_MODULE="crowdnotes_site.settings",
        DATABASE_URL=database_url,
        REDIS_URL=redis_url,
        SECRET_KEY="bench-only-" + "k" * 50,
        DEBUG="0",
        ALLOWED_HOSTS="127.0.0.1",
        SECURE_SSL_REDIRECT="0",
        STATIC_ROOT=static_root,
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        LOG_LEVEL="WARNING",
        RATE_LIMIT_RATING="100000/h",
        RATE_LIMIT_LOGIN="100000/h",
    )
    return env


def _manage(env: dict[str, str], *args: str) -> str:
    out = subprocess.run([PY, "manage.py", *args], cwd=ROOT, env=env, check=True, capture_output=True, text=True)
    return out.stdout


def _ensure_database(database_url: str) -> None:
    import psycopg

    name = database_url.rsplit("/", 1)[1]
    with psycopg.connect(database_url.rsplit("/", 1)[0] + "/postgres", autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
            conn.execute(f'CREATE DATABASE "{name}"')


def prepare(env: dict[str, str], n_ratings: int, workdir: Path) -> None:
    _manage(env, "migrate", "--noinput", "-v0")
    _manage(env, "collectstatic", "--noinput", "-v0")
    imported = subprocess.run(
        [PY, __file__, "--child", "count-ratings"], cwd=ROOT, env=env, check=True, capture_output=True, text=True
    ).stdout.strip()
    if int(imported or 0) == 0:
        _manage(env, "load_demo")
        if n_ratings:
            # Project modules load Django models: imported once django.setup() has run.
            from crowdnotes_site.lib.communitynotes.data import synthetic

            synthetic.write_tsv(synthetic.generate(n_ratings, seed=5), workdir)
            started = time.perf_counter()
            _manage(
                env, "import_communitynotes", "--notes", str(workdir / "notes-00000.tsv"),
                "--ratings", str(workdir / "ratings-00000.tsv"),
            )  # fmt: skip
            print(f"imported {n_ratings:,} synthetic ratings in {time.perf_counter() - started:.0f} s", flush=True)
            # Score them once, as the beat schedule would: statuses and side counters as in production.
            started = time.perf_counter()
            _manage(env, "shell", "-c", "from notes.services import notes_rescore; print(notes_rescore())")
            print(f"rescored in {time.perf_counter() - started:.0f} s", flush=True)


def child_count_ratings() -> None:
    import django

    django.setup()
    from notes.models import Rating

    print(Rating.objects.count())


def signed_in_session(user: Any) -> str:
    """A stored session signed in as `user` (call after django.setup()): its key, for the cookie."""
    from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
    from django.contrib.sessions.backends.db import SessionStore

    session = SessionStore()
    session[SESSION_KEY] = str(user.pk)
    session[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
    session[HASH_SESSION_KEY] = user.get_session_auth_hash()
    session.create()
    return str(session.session_key)


def child_setup(n_clients: int) -> None:
    """One user per client in every role, signed in (a session), with a draft holding 5 sources."""
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group

    # Project modules load Django models: imported once django.setup() has run.
    from evidence.models import EvidenceSource, Passage, Snippet
    from evidence.services import url_hash
    from judging.models import JudgeDecision, JudgeKind, Stage
    from notes.models import DraftJob, Note, NoteStatus, Post
    from notes.roles import ADMIN, CONTRIBUTOR, RATER
    from notes.services import participant_for_user

    groups = list(Group.objects.filter(name__in=[ADMIN, CONTRIBUTOR, RATER]))
    posts = list(Post.objects.filter(is_demo=True).order_by("pk")[:n_clients])
    if JudgeDecision.objects.count() < 300:
        for note in Note.objects.order_by("pk")[:150]:
            for stage in (Stage.RELEVANCE, Stage.CORRECTNESS):
                JudgeDecision.objects.get_or_create(
                    note=note,
                    stage=stage,
                    content_hash=f"bench-{note.pk}",
                    defaults={
                        "verdict": "yes",
                        "judge_kind": JudgeKind.BASELINE,
                        "judge_name": "bench",
                        "reasoning": "Benchmark decision.",
                    },
                )  # get: a database with fewer than 150 notes gets this setup again on each run
    clients = []
    for i in range(n_clients):
        user, _ = get_user_model().objects.get_or_create(username=f"bench-user-{i:02d}")
        user.groups.set(groups)
        participant_for_user(user=user)
        post = posts[i % len(posts)]
        job = DraftJob.objects.filter(contributor=user).first()
        if job is None:
            job = DraftJob.objects.create(post=post, contributor=user)
            for j in range(5):
                url = f"https://example.org/bench/{i}/{j}"
                text = f"Passage {j} of the evidence for {post.text[:80]}"
                source, _ = EvidenceSource.objects.get_or_create(
                    url_hash=url_hash(url), defaults={"url": url, "final_url": url, "cleaned_text": text}
                )
                passage = Passage.objects.create(
                    source=source, embedding_model="bench", chunk_index=0, text=text, char_start=0, char_end=len(text)
                )
                Snippet.objects.create(
                    post=post, draft_job=job, url=url, position=j, state=Snippet.State.READY,
                    source=source, passage=passage, similarity=0.5,
                )  # fmt: skip
        clients.append({"session": signed_in_session(user), "job": job.pk, "post": post.pk})
    to_rate = list(
        Note.objects.filter(status=NoteStatus.NEEDS_MORE_RATINGS, is_demo=True).values_list("pk", flat=True)[:50]
    )
    print(json.dumps({"clients": clients, "notes": to_rate}))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _request(port: int, method: str, path: str, cookies: str, headers: dict[str, str], body: str = "") -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        all_headers = {"Cookie": cookies, "Host": "127.0.0.1", **headers}
        if body:
            all_headers["Content-Type"] = "application/x-www-form-urlencoded"
        conn.request(method, path, body=body or None, headers=all_headers)
        response = conn.getresponse()
        response.read()
        return response.status
    finally:
        conn.close()


Request = tuple[str, str, dict[str, str], str, tuple[int, ...]]  # method, path, headers, body, good statuses


def page_request(name: str, setup: dict[str, Any], info: dict[str, Any], index: int, r: int, token: str) -> Request:
    """The `r`-th request of client `index` (its `info`: session, draft, post) for the page `name`."""
    method, path, headers, body, ok = "GET", "/", {}, "", (200,)
    if name == "post page":
        path = f"/posts/{info['post']}/"
    elif name == "rating queue":
        path = "/rate/"
    elif name == "posting a rating":
        notes = setup["notes"]
        method, path, ok = "POST", f"/rate/{notes[(index * 7 + r) % len(notes)]}/", (302,)
        headers = {"X-CSRFToken": token}
        body = "level=" + ("HELPFUL" if r % 2 else "NOT_HELPFUL")
    elif name == "draft page poll":
        path, headers = f"/drafts/{info['job']}/?was=collecting", {"HX-Request": "true"}
    elif name == "audit list":
        path = "/judging/audit/"
    elif name == BASELINE:
        path, ok = "/favicon.ico", (301,)
    return method, path, headers, body, ok


def percentiles(latencies: list[float]) -> dict[str, float]:
    """p50, p95 and max of latencies (ms); p95 as the value below which 95% of them fall."""
    ordered = sorted(latencies)
    return {
        "p50": statistics.median(ordered),
        "p95": ordered[max(int(len(ordered) * 0.95) - 1, 0)],
        "max": ordered[-1],
    }


def run_page(
    port: int,
    setup: dict[str, Any],
    name: str,
    n_requests: int,
    think_s: float = 0.0,
    request_for: Callable[[str, dict[str, Any], dict[str, Any], int, int, str], Request] = page_request,
) -> dict[str, Any]:
    """Every client of `setup` sends `n_requests` requests for the page `name` (what `request_for`
    makes of it), in its own thread; their latencies (ms), errors and throughput."""
    latencies: list[float] = []
    errors: list[int] = []
    lock = threading.Lock()

    def client(index: int, info: dict[str, Any]) -> None:
        token = secrets.token_hex(16)  # a 32-character CSRF secret: cookie and header agree
        cookies = f"sessionid={info['session']}; csrftoken={token}"
        pause = random.Random(index)
        for r in range(n_requests):
            if think_s:  # a person reading: uniform 0.5-1.5x the think time, not synchronised across clients
                time.sleep(think_s * pause.uniform(0.5, 1.5))
            method, path, headers, body, ok = request_for(name, setup, info, index, r, token)
            started = time.perf_counter()
            try:
                status = _request(port, method, path, cookies, headers, body)
            except (OSError, http.client.HTTPException):
                status = 0  # no answer (a gunicorn worker killed by its timeout, a reset): an error, timed
            elapsed = (time.perf_counter() - started) * 1000
            with lock:
                latencies.append(elapsed)
                if status not in ok:
                    errors.append(status)

    threads = [threading.Thread(target=client, args=(i, c)) for i, c in enumerate(setup["clients"])]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - started
    return {
        "page": name,
        "requests": len(latencies),
        "errors": len(errors),
        "error_statuses": sorted(set(errors)),
        **percentiles(latencies),
        "rps": len(latencies) / wall,
        "latencies": latencies,
    }


def start_gunicorn(env: dict[str, str], workers: int, log_path: Path) -> tuple[subprocess.Popen[bytes], int]:
    """gunicorn (sync workers) serving the app on a free loopback port, once /healthz answers."""
    port = _free_port()
    log = log_path.open("w")
    server = subprocess.Popen(
        [PY, "-m", "gunicorn", "crowdnotes_site.wsgi", "-w", str(workers), "-b", f"127.0.0.1:{port}"],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while True:
        try:
            if _request(port, "GET", "/healthz", "", {}) == 200:
                return server, port
        except OSError:
            pass
        if time.monotonic() > deadline or server.poll() is not None:
            server.terminate()
            server.wait(timeout=30)
            raise SystemExit(f"gunicorn did not start; see {log_path}")
        time.sleep(0.5)


# The machine's share: the cheapest answer of the same server in the same run (a redirect through
# the whole middleware stack, no query, no template), so a page's latency can be split into what
# the machine adds to any request and what the page itself costs.
BASELINE = "baseline: /favicon.ico (redirect, no query)"
PAGES = ["home", "post page", "rating queue", "posting a rating", "draft page poll", "audit list", BASELINE]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database-url", default="postgres://postgres@127.0.0.1:5432/cn_bench_load")
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/4")
    parser.add_argument("--ratings", type=int, default=1_000_000, help="synthetic ratings imported on first run")
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--requests", type=int, default=15, help="per client and page")
    parser.add_argument("--workers", type=int, default=4, help="gunicorn workers")
    parser.add_argument(
        "--think", type=float, default=0.0,
        help="seconds a client waits between requests (0: closed loop, each client sends its next request at once)",
    )  # fmt: skip
    parser.add_argument("--pages", nargs="+", choices=PAGES, default=PAGES, help="measure only these pages")
    parser.add_argument("--child", choices=["count-ratings", "setup"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child == "count-ratings":
        return child_count_ratings()
    if args.child == "setup":
        return child_setup(args.clients)

    workdir = ROOT / "var" / "bench-load"
    workdir.mkdir(parents=True, exist_ok=True)
    env = _env(args.database_url, args.redis_url, str(workdir / "static"))
    _ensure_database(args.database_url)
    prepare(env, args.ratings, workdir)
    out = subprocess.run(
        [PY, __file__, "--child", "setup", "--clients", str(args.clients)],
        cwd=ROOT, env=env, check=True, capture_output=True, text=True,
    )  # fmt: skip
    setup = json.loads(out.stdout.strip().splitlines()[-1])
    # What autovacuum does after bulk writes (this machine's server runs with it off): set hint bits
    # and the visibility map, refresh statistics, and flush, so the first measured page does not pay
    # for the import that just finished.
    import psycopg

    with psycopg.connect(args.database_url, autocommit=True) as conn:
        conn.execute("VACUUM (ANALYZE)")
        conn.execute("CHECKPOINT")
    counts = (
        subprocess.run(
            [
                PY,
                "manage.py",
                "shell",
                "-c",
                "from notes.models import Post, Note, Rating; print(Post.objects.count(), Note.objects.count(), Rating.objects.count())",
            ],
            cwd=ROOT,
            env=env,
            check=True,
            capture_output=True,
            text=True,
        )
        .stdout.strip()
        .splitlines()[-1]
        .split()
    )  # fmt: skip (the last line: startup may log before it)
    server, port = start_gunicorn(env, args.workers, workdir / "gunicorn.log")
    try:
        for name in args.pages:  # warm every worker's connections and templates
            run_page(port, {**setup, "clients": setup["clients"][:4]}, name, 2)
        load_before = os.getloadavg()
        rows = [run_page(port, setup, name, args.requests, args.think) for name in args.pages]
        load_after = os.getloadavg()
    finally:
        server.terminate()
        server.wait(timeout=30)
    print(
        f"\n{args.clients} clients x {args.requests} requests per page, think time {args.think:g} s "
        f"(0.5-1.5x, per request), gunicorn -w {args.workers} (sync), DEBUG=0; "
        f"database: {int(counts[0]):,} posts, {int(counts[1]):,} notes, {int(counts[2]):,} ratings; "
        f"load average (1 min) {load_before[0]:.2f} before the measured pages, {load_after[0]:.2f} after\n"
    )
    print("| page | requests | errors | p50 ms | p95 ms | max ms | req/s |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for row in rows:
        errors = f"{row['errors']} {row['error_statuses']}" if row["errors"] else "0"
        print(
            f"| {row['page']} | {row['requests']} | {errors} | {row['p50']:.0f} | {row['p95']:.0f} | "
            f"{row['max']:.0f} | {row['rps']:.1f} |"
        )


if __name__ == "__main__":
    main()
