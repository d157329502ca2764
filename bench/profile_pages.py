"""Where a page's time goes, per request: queries (count and time), template rendering, the rest.

Runs in one process against a database prepared by `bench_load.py` (the same settings, DEBUG=0),
signed in as the benchmark's first user (every role), and requests each page `--requests` times
after one warm-up request. Prints, per page: queries per request, SQL ms, template render ms
(queries run while rendering included), total ms and the CPU time of this process (Django's own
work, less sensitive to other jobs on the machine than the wall-clock columns), all medians;
with `--sql` the slowest statements of the last request.

    flock /tmp/heavy.lock .venv/bin/python bench/profile_pages.py \\
        --database-url postgres://postgres@127.0.0.1:5432/cn_bench_load --redis-url redis://127.0.0.1:6379/4

Single process, no concurrency: this is the CPU and database cost of one request, not latency
under load (that is `bench_load.py`).
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

PAGES: dict[str, str] = {
    "home": "/",
    "audit list": "/judging/audit/",
    "post page": "",  # the first demo post, found at run time
    "rating queue": "/rate/",
    "healthz": "/healthz",
}


class _Sql:
    def __init__(self) -> None:
        self.statements: list[tuple[float, str]] = []

    def __call__(self, execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any) -> Any:
        started = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            self.statements.append(((time.perf_counter() - started) * 1000, sql))


@contextmanager
def _render_timer(spent: list[float]) -> Iterator[None]:
    from django.template.backends.django import Template

    original = Template.render

    def render(self: Any, *args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return original(self, *args, **kwargs)
        finally:
            spent.append((time.perf_counter() - started) * 1000)

    Template.render = render  # type: ignore[method-assign]
    try:
        yield
    finally:
        Template.render = original  # type: ignore[method-assign]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database-url", default="postgres://postgres@127.0.0.1:5432/cn_bench_load")
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/4")
    parser.add_argument("--requests", type=int, default=20)
    parser.add_argument("--page", action="append", help="only these pages (names as printed)")
    parser.add_argument("--sql", action="store_true", help="print the slowest statements of each page")
    parser.add_argument("--profile", action="store_true", help="cProfile each page (top 30 functions)")
    parser.add_argument("--top", type=int, default=30, help="functions printed per profile")
    parser.add_argument("--sort", default="tottime", help="cProfile sort key (tottime, cumulative, ...)")
    args = parser.parse_args()
    os.environ.update(
        DJANGO_SETTINGS_MODULE="crowdnotes_site.settings",
        DATABASE_URL=args.database_url,
        REDIS_URL=args.redis_url,
        SECRET_KEY="bench-only-" + "k" * 50,
        DEBUG="0",
        ALLOWED_HOSTS="127.0.0.1,testserver",
        SECURE_SSL_REDIRECT="0",
        LOG_LEVEL="WARNING",
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        STATIC_ROOT=str(ROOT / "var" / "bench-load" / "static"),  # bench_load.py's collectstatic
    )
    for key in [k for k in os.environ if k.startswith("LLM_")]:
        del os.environ[key]
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    if not (ROOT / "var" / "bench-load" / "static" / "staticfiles.json").exists():
        call_command("collectstatic", "--noinput", "-v0")
    from django.db import connection
    from django.test import Client

    # Project modules load Django models: imported once django.setup() has run.
    from notes.models import Post

    user = get_user_model().objects.get(username="bench-user-00")
    client = Client()
    client.force_login(user)
    pages = dict(PAGES)
    post = Post.objects.filter(is_demo=True).order_by("pk").first()
    pages["post page"] = f"/posts/{post.pk}/" if post else "/"
    names = args.page or list(pages)
    print(
        f"| page | queries | SQL ms | render ms | total ms | CPU ms (this process) | bytes |  (medians of {args.requests})"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name in names:
        path = pages[name]
        client.get(path)  # warm: sessions, permissions, templates, connection
        queries, sql_ms, render_ms, total_ms, cpu_ms = [], [], [], [], []
        size = 0
        sql = _Sql()
        for _ in range(args.requests):
            sql.statements.clear()
            spent: list[float] = []
            with connection.execute_wrapper(sql), _render_timer(spent):
                started, cpu_started = time.perf_counter(), time.process_time()
                response = client.get(path)
                total_ms.append((time.perf_counter() - started) * 1000)
                cpu_ms.append((time.process_time() - cpu_started) * 1000)
            assert response.status_code == 200, (name, response.status_code)
            size = len(response.content)
            queries.append(len(sql.statements))
            sql_ms.append(sum(t for t, _ in sql.statements))
            render_ms.append(sum(spent[-1:]))  # the outermost render (includes run inside it)
        print(
            f"| {name} | {statistics.median(queries):.0f} | {statistics.median(sql_ms):.1f} | "
            f"{statistics.median(render_ms):.1f} | {statistics.median(total_ms):.1f} | "
            f"{statistics.median(cpu_ms):.1f} | {size:,} |"
        )
        if args.sql:
            for t, statement in sorted(sql.statements, reverse=True)[:8]:
                print(f"    {t:7.2f} ms  {statement[:300]}")
        if args.profile:
            profiler = cProfile.Profile()
            profiler.enable()
            for _ in range(args.requests):
                client.get(path)
            profiler.disable()
            pstats.Stats(profiler).sort_stats(args.sort).print_stats(args.top)


if __name__ == "__main__":
    main()
