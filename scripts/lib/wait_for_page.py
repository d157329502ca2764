"""Wait until the demo's web app answers a page (scripts/demo.sh). Usage: wait_for_page.py URL PID.
Exits 0 once GET URL answers (any HTTP status below 500), 1 when process PID has exited first.
Says every 10 s that it is still waiting, so a slow first start is never silent."""

from __future__ import annotations

import os
import sys
import time
import urllib.error
import urllib.request


def main(url: str, pid: int) -> int:
    start = last = time.monotonic()
    while True:
        try:
            with urllib.request.urlopen(url, timeout=5) as answer:  # noqa: S310 - the demo's own loopback URL
                if answer.status < 500:
                    return 0
        except urllib.error.HTTPError as exc:
            if exc.code < 500:
                return 0
        except OSError:
            pass
        try:
            os.kill(pid, 0)
        except OSError:
            return 1
        if time.monotonic() - last >= 10:
            last = time.monotonic()
            print(f"   … the web app has not answered yet after {last - start:.0f} s", file=sys.stderr, flush=True)
        time.sleep(0.5)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], int(sys.argv[2])))
