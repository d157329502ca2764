"""Dropped database connections under load: how many requests fail, and how.

Starts `gunicorn -w 4` (DEBUG=0, CONN_MAX_AGE=60) from `--app-dir` on a migrated database with a
few posts, lets `--clients` threads request the home page and a post page without pause for
`--seconds`, and every `--seconds / (kills + 1)` seconds terminates every server backend of the
database (`pg_terminate_backend`, what a PostgreSQL restart or failover does to open connections).
Prints the count of each status, and of 503 answers that explain themselves.

    flock /tmp/heavy.lock .venv/bin/python bench/bench_db_drop.py \\
        --database-url postgres://postgres@127.0.0.1:5432/cn_bench_drop --redis-url redis://127.0.0.1:6379/6

`--app-dir` points at another checkout (e.g. an export of an older commit) to measure it the same way.
"""

from __future__ import annotations

import argparse
import collections
import http.client
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
EXPLAINED = "The connection to our database was interrupted"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _get(port: int, path: str) -> tuple[int, str]:
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        conn.request("GET", path, headers={"Host": "127.0.0.1"})
        response = conn.getresponse()
        return response.status, response.read().decode(errors="replace")
    except OSError:
        return 0, ""


def _terminate(database_url: str) -> int:
    import psycopg

    name = database_url.rsplit("/", 1)[1]
    with psycopg.connect(database_url.rsplit("/", 1)[0] + "/postgres", autocommit=True) as admin:
        rows = admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
            [name],
        ).fetchall()
    return len(rows)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--database-url", required=True)
    parser.add_argument("--redis-url", required=True)
    parser.add_argument("--app-dir", type=Path, default=ROOT)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--kills", type=int, default=3)
    args = parser.parse_args()

    import psycopg

    name = args.database_url.rsplit("/", 1)[1]
    with psycopg.connect(args.database_url.rsplit("/", 1)[0] + "/postgres", autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
            conn.execute(f'CREATE DATABASE "{name}"')
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "crowdnotes_site.settings",
        "DATABASE_URL": args.database_url,
        "REDIS_URL": args.redis_url,
        "SECRET_KEY": "bench-only-" + "k" * 50,
        "DEBUG": "0",
        "ALLOWED_HOSTS": "127.0.0.1",
        "SECURE_SSL_REDIRECT": "0",
        "LOG_LEVEL": "CRITICAL",
        "DB_CONN_MAX_AGE": "60",
        "TOPICS_CLASSIFY_NEW_POSTS": "0",
        "STATIC_ROOT": tempfile.mkdtemp(prefix="bench-static-"),  # DEBUG=0 serves the collected manifest
    }
    manage = [PY, "manage.py"]
    subprocess.run([*manage, "migrate", "--noinput", "-v0"], cwd=args.app_dir, env=env, check=True)
    subprocess.run([*manage, "collectstatic", "--noinput", "-v0"], cwd=args.app_dir, env=env, check=True)
    post_id = subprocess.run(
        [*manage, "shell", "-c", "from notes.services import post_create; from notes.models import Post;"
         " [post_create(text=f'Bench claim {i} about vitamins') for i in range(20 - Post.objects.count())];"
         " print(Post.objects.order_by('pk').first().pk)"],
        cwd=args.app_dir, env=env, check=True, capture_output=True, text=True,
    ).stdout.strip().splitlines()[-1]  # fmt: skip
    port = _free_port()
    server = subprocess.Popen(
        [PY, "-m", "gunicorn", "crowdnotes_site.wsgi", "-w", "4", "-b", f"127.0.0.1:{port}"],
        cwd=args.app_dir,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while _get(port, "/")[0] != 200:
            if time.monotonic() > deadline:
                raise SystemExit(f"gunicorn did not answer 200 on /: {_get(port, '/')[0]}")
            time.sleep(0.2)
        statuses: collections.Counter[str] = collections.Counter()
        lock = threading.Lock()
        stop = time.monotonic() + args.seconds

        def client(index: int) -> None:
            paths = ["/", f"/posts/{post_id}/"]
            n = index
            while time.monotonic() < stop:
                status, body = _get(port, paths[n % 2])
                n += 1
                label = f"{status} explained" if status == 503 and EXPLAINED in body else str(status)
                with lock:
                    statuses[label] += 1

        threads = [threading.Thread(target=client, args=(i,)) for i in range(args.clients)]
        for thread in threads:
            thread.start()
        terminated = []
        for _ in range(args.kills):
            time.sleep(args.seconds / (args.kills + 1))
            terminated.append(_terminate(args.database_url))
        for thread in threads:
            thread.join()
    finally:
        server.terminate()
        server.wait(timeout=30)
    total = sum(statuses.values())
    print(f"app {args.app_dir}: {total} requests in {args.seconds:.0f} s by {args.clients} clients, gunicorn -w 4")
    print(f"backends terminated at each of {args.kills} drops: {terminated}")
    for label, count in sorted(statuses.items()):
        print(f"  {label}: {count}")


if __name__ == "__main__":
    main()
