"""How long pulling eligible posts and hydrating imported posts take under X's documented limits.

    DATABASE_URL=postgres://…/cn_xapi REDIS_URL=redis://…/8 \\
        flock /tmp/heavy.lock .venv/bin/python bench/bench_xapi.py [--eligible 1000] [--hydrate 10000] [--compress 5]

Runs CrowdNotes' own services (xnotes.services: client, budget, parsing, database writes) against
the loopback fake X API (tests/support/x_server.py), in three steps:

1. cost: with no rate limit, pull `--eligible` posts (100 a page) and hydrate `--hydrate`
   imported posts (100 ids a request); the seconds per request are our code + loopback HTTP.
2. model: the time under X's documented limit (90 requests per 15-minute window): a run of R
   requests waits for ceil(R / 90) − 1 resets, so it takes (ceil(R / 90) − 1) × 900 s plus the
   requests of its last window at the measured cost (`_model_s`).
3. check: the same hydration with the window compressed `--compress` times (`--check-limit`, default
   90, requests per 900/compress s),
   waiting for each reset as the command does; the measured time is compared with the model's and
   scaled to the real window (each wait is then 900 s instead of 900/compress s:
   `scaled_to_real_window_s` = measured + waits × (900 − 900/compress)). Pick `--compress` so that
   a compressed window is still longer than our code needs for `--check-limit` requests (else
   the window resets before the budget is spent and our code, not the limit, is the bound).

The rows it creates (X ids 42…) are deleted at the start and the end. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support import x_server  # noqa: E402

WINDOW_REQUESTS = 90
WINDOW_S = 900.0


def _setup(fake: x_server.FakeX) -> None:
    os.environ.update(
        X_API_BASE_URL=fake.base_url, X_API_KEY=x_server.CONSUMER_KEY, X_API_KEY_SECRET=x_server.CONSUMER_SECRET,
        X_ACCESS_TOKEN=x_server.ACCESS_TOKEN, X_ACCESS_TOKEN_SECRET=x_server.ACCESS_TOKEN_SECRET,
        X_BEARER_TOKEN=x_server.BEARER_TOKEN, TOPICS_CLASSIFY_NEW_POSTS="0", LOG_LEVEL="WARNING",
    )  # fmt: skip
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "crowdnotes_site.settings")
    os.environ.setdefault("SECRET_KEY", "bench-only")
    import django

    django.setup()


def _cleanup() -> None:
    # Project modules load Django models: imported once django.setup() has run.
    from notes.models import Post

    Post.objects.filter(external_id__startswith="42").delete()


def _imported(n: int, offset: int) -> list[str]:
    # Project modules load Django models: imported once django.setup() has run.
    from crowdnotes_site.lib.hashing import sha256_hex
    from notes.models import Post

    ids = [str(4200000000000000000 + offset + i) for i in range(n)]
    Post.objects.bulk_create(
        [Post(text="[imported]", text_hash=sha256_hex(i), external_id=i, text_available=False) for i in ids],
        batch_size=2000,
    )
    return ids


def _model_s(requests: int, s_per_request: float, window_requests: int, window_s: float) -> float:
    """Time of R requests when X allows L per fixed window of W s (and L requests take less than W):
    the first L run at our speed inside the first window, then every further window starts after
    a wait for the reset, so the time is (ceil(R / L) − 1) × W plus the last window's requests."""
    waits = math.ceil(requests / window_requests) - 1
    return waits * window_s + (requests - waits * window_requests) * s_per_request


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--eligible", type=int, default=1000)
    parser.add_argument("--hydrate", type=int, default=10000)
    parser.add_argument("--compress", type=float, default=5.0, help="window compression for the check step")
    parser.add_argument(
        "--check-limit", type=int, default=WINDOW_REQUESTS, help="requests per window in the check step"
    )
    args = parser.parse_args()
    fake = x_server.FakeX()
    _setup(fake)
    # Project modules load Django models: imported once django.setup() has run.
    from xnotes import budget
    from xnotes.client import XClient
    from xnotes.services import eligible, hydrate

    _cleanup()
    budget.clear()
    fake.set_window(limit=10**9, seconds=WINDOW_S)
    # 1. cost: eligible posts, 100 a page, with quoted posts and media in `includes`.
    pages = math.ceil(args.eligible / 100)
    fake.eligible_pages = [
        [{"id": str(4210000000000000000 + p * 100 + i), "text": f"Post {p}-{i}: garlic cures measles " * 3,
          "author_id": "7", "created_at": "2026-11-20T10:00:00Z", "lang": "en",
          "referenced_tweets": [{"type": "quoted", "id": "4219999999999999999"}],
          "attachments": {"media_keys": ["3_1"]}} for i in range(100)]
        for p in range(pages)
    ]  # fmt: skip
    fake.eligible_includes = {"tweets": [{"id": "4219999999999999999", "text": "The quoted post."}],
                              "media": [{"media_key": "3_1", "type": "photo", "url": "https://pbs.twimg.com/m.jpg"}]}  # fmt: skip
    client = XClient()
    t0 = time.perf_counter()
    run = eligible.fetch_eligible(
        run=eligible.fetch_run_create(max_results=100, page_limit=pages, post_limit=args.eligible), client=client
    )
    fetch_s = time.perf_counter() - t0
    ids = _imported(args.hydrate, 0)
    for i in ids:
        fake.tweets[i] = {"id": i, "text": f"Hydrated text of {i}", "created_at": "2025-01-02T03:04:05Z", "lang": "en"}
    t0 = time.perf_counter()
    hyd = hydrate.hydrate_posts(client=XClient(), limit=args.hydrate)
    hydrate_s = time.perf_counter() - t0
    result: dict[str, object] = {
        "fetch": {"posts": run.fetched, "new": run.new, "requests": run.requests, "seconds": round(fetch_s, 2),
                  "s_per_request": round(fetch_s / max(1, run.requests), 3),
                  "under_limit_s": round(_model_s(run.requests, fetch_s / max(1, run.requests), WINDOW_REQUESTS, WINDOW_S), 1)},
        "hydrate": {"posts": hyd.looked_up, "hydrated": hyd.hydrated, "requests": hyd.requests,
                    "seconds": round(hydrate_s, 2), "s_per_request": round(hydrate_s / max(1, hyd.requests), 3),
                    "under_limit_s": round(_model_s(hyd.requests, hydrate_s / max(1, hyd.requests), WINDOW_REQUESTS, WINDOW_S), 1)},
    }  # fmt: skip
    # 3. check: the same hydration under a compressed window, waiting for each reset.
    _cleanup()
    budget.clear()
    window = WINDOW_S / args.compress
    ids = _imported(args.hydrate, 5_000_000)
    for i in ids:
        fake.tweets[i] = {"id": i, "text": f"Hydrated text of {i}"}
    fake.set_window(limit=args.check_limit, seconds=window)
    waits = 0

    def wait(limited: budget.RateLimited) -> None:
        nonlocal waits
        waits += 1
        budget.sleep_until_reset(limited)

    t0 = time.perf_counter()
    checked = hydrate.hydrate_posts(client=XClient(), limit=args.hydrate, on_rate_limit=wait)
    check_s = time.perf_counter() - t0
    result["check"] = {
        "window": f"{args.check_limit} requests per {window:.1f} s", "requests": checked.requests,
        "hydrated": checked.hydrated, "waits": waits, "seconds": round(check_s, 2),
        # + 1 s per wait: the client's margin after each reset (budget.RateLimited.wait_s)
        "model_s": round(_model_s(checked.requests, hydrate_s / max(1, hyd.requests), args.check_limit, window + 1.0), 2),
        "x_429s": sum(1 for r in fake.requests if r.status == 429), "violations": len(fake.violations),
        # The same run under the real window: each wait lasts the real window instead of the
        # compressed one (the requests inside a window take the same time).
        "scaled_to_real_window_s": round(check_s + waits * (WINDOW_S - window), 1),
    }  # fmt: skip
    _cleanup()
    fake.close()
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
