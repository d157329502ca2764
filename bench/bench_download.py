"""Whole-download research path at a given scale: generate -> convert -> score -> delays -> spikes.

    flock /tmp/heavy.lock .venv/bin/python bench/bench_download.py --scale 0.05 [--keep DIR]

Each step runs in its own process (so its peak RSS is its own); prints one table: wall seconds,
rows, rows/s, peak RSS, bytes per rating, disk. scale 0.05 ~ 10 M ratings; 1.0 = the full shape.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _du(path: Path, pattern: str = "*") -> int:
    return sum(f.stat().st_size for f in path.glob(pattern) if f.is_file())


def _run(args: list[str]) -> tuple[float, int]:
    """Wall seconds and peak RSS (bytes) of one child process."""
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, *args], cwd=ROOT)
    _pid, status, usage = os.wait4(proc.pid, 0)
    if status != 0:
        raise SystemExit(f"step failed: {args}")
    return time.perf_counter() - t0, usage.ru_maxrss * 1024


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--scale", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep", help="folder to keep the data in (default: a temporary one, deleted)")
    args = parser.parse_args()
    folder = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="cn_download_"))
    rows = []
    try:
        wall, rss = _run(["-m", "crowdnotes_site.lib.communitynotes.data.synthetic_download", str(folder), "--scale", str(args.scale),
                          "--seed", str(args.seed)])  # fmt: skip
        truth = json.loads((folder / "synthetic-truth.json").read_text())
        n = truth["ratings_written"]
        rows.append(("generate", wall, n, rss, _du(folder, "*.tsv")))
        for step in ("convert", "score", "delays", "spikes"):
            wall, rss = _run(["-m", "crowdnotes_site.lib.communitynotes.research.run", str(folder), "--only", step])
            rec = json.loads((folder / "research" / "steps" / f"{step}.json").read_text())
            disk = _du(folder / "columnar") if step == "convert" else 0
            rows.append((step, wall, rec["rows"] if step != "score" else n, rss, disk))
        print(f"scale {args.scale}: {n:,} ratings, {truth['notes']:,} notes, {truth['raters']:,} raters")
        print(
            f"{'step':<9} {'wall s':>8} {'rows':>13} {'rows/s':>11} {'peak RSS MiB':>13} {'B/rating':>9} {'disk MiB':>9}"
        )
        for step, wall, r, rss, disk in rows:
            print(f"{step:<9} {wall:>8.1f} {r:>13,} {r / wall:>11,.0f} {rss / 2**20:>13,.0f} {rss / n:>9.1f} "
                  f"{disk / 2**20:>9,.0f}")  # fmt: skip
    finally:
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
