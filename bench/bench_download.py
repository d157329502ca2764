"""Whole-download research path at a given scale: generate -> convert -> score -> delays -> spikes,
and `score_communitynotes` on the same TSVs; optionally each step side by side with another
checkout's.

    flock /tmp/heavy.lock .venv/bin/python bench/bench_download.py --scale 0.05 [--keep DIR] \\
        [--code /tmp/old-checkout] [--steps convert score score_tsv]

Each step runs in its own process (so its peak RSS is its own); prints one table: wall seconds,
rows, rows/s, peak RSS, bytes per rating, disk, and a checksum of the step's outputs (the
columnar form's Parquet files; the scored notes and rater scores; the delay and spike tables),
equal when two checkouts wrote the same outputs. `score_tsv` is `manage.py score_communitynotes
--notes notes-00000.tsv --ratings DIR --status-history noteStatusHistory-00000.tsv` (DIR: the
ratings shards). With `--code`, every step runs once per checkout, this one first, alternating,
each checkout in a folder of its own (hard links to the same TSVs). scale 0.05 ~ 10 M ratings;
0.1 ~ 20 M; 1.0 = the full shape.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STEPS = ("convert", "score", "delays", "spikes", "score_tsv")
OUTPUTS = {
    "convert": ("columnar", "*.parquet"),
    "score": ("research", "*_scores.tsv", "scored_notes.tsv"),
    "delays": ("research", "delays*"),
    "spikes": ("research", "spikes*"),
    "score_tsv": ("score_tsv", "*.tsv"),
}


def _du(path: Path, pattern: str = "*") -> int:
    return sum(f.stat().st_size for f in path.glob(pattern) if f.is_file())


def _checksum(folder: Path, step: str) -> str:
    sub, *patterns = OUTPUTS[step]
    h = hashlib.sha256()
    for f in sorted({f for p in patterns for f in (folder / sub).glob(p)}):
        h.update(f.name.encode())
        h.update(f.read_bytes())
    return h.hexdigest()[:16]


def _run(args: list[str], cwd: Path) -> tuple[float, int]:
    """Wall seconds and peak RSS (bytes) of one child process."""
    env = {**os.environ, "DEBUG": "0", "SECRET_KEY": os.environ.get("SECRET_KEY", "bench"),
           "DATABASE_URL": os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres")}  # fmt: skip
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, *args], cwd=cwd, env=env, stdout=subprocess.DEVNULL)
    _pid, status, usage = os.wait4(proc.pid, 0)
    if status != 0:
        raise SystemExit(f"step failed: {args} in {cwd}")
    return time.perf_counter() - t0, usage.ru_maxrss * 1024


def _step(step: str, code: Path, folder: Path) -> tuple[float, int]:
    if step == "score_tsv":
        ratings = folder / "score_tsv" / "ratings"
        ratings.mkdir(parents=True, exist_ok=True)
        for shard in folder.glob("ratings-*.tsv"):
            if not (ratings / shard.name).exists():
                (ratings / shard.name).symlink_to(shard.resolve())
        return _run(["manage.py", "score_communitynotes", "--notes", str(folder / "notes-00000.tsv"),
                     "--ratings", str(ratings), "--status-history", str(folder / "noteStatusHistory-00000.tsv"),
                     "--outdir", str(folder / "score_tsv")], code)  # fmt: skip
    return _run(["-m", "crowdnotes_site.lib.communitynotes.research.run", str(folder), "--only", step], code)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--scale", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep", help="folder to keep the data in, reused if generated there before (default: "
                        "a temporary one, deleted)")  # fmt: skip
    parser.add_argument("--code", type=Path, action="append", default=[], help="another checkout to run beside")
    parser.add_argument("--steps", nargs="+", choices=STEPS, default=list(STEPS))
    args = parser.parse_args()
    data = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="cn_download_"))
    codes = [ROOT, *(c.resolve() for c in args.code)]
    rows = []
    made: list[Path] = []
    try:
        if (data / "synthetic-truth.json").exists():
            rows.append(("generate", ROOT, 0.0, 0, 0, _du(data, "*.tsv"), "(kept from before)"))
        else:
            wall, rss = _run(["-m", "crowdnotes_site.lib.communitynotes.data.synthetic_download", str(data),
                              "--scale", str(args.scale), "--seed", str(args.seed)], ROOT)  # fmt: skip
            rows.append(("generate", ROOT, wall, rss, 0, _du(data, "*.tsv"), ""))
        truth = json.loads((data / "synthetic-truth.json").read_text())
        n = truth["ratings_written"]
        folders = [data] if len(codes) == 1 else []
        for k in range(len(codes) if len(codes) > 1 else 0):  # a folder per checkout: hard links to the TSVs
            folder = data.parent / f"{data.name}-code{k}"
            folder.mkdir(exist_ok=True)
            for f in data.iterdir():
                if f.is_file() and not (folder / f.name).exists():
                    os.link(f, folder / f.name)
            folders.append(folder)
            made.append(folder)
        for step in args.steps:
            for code, folder in zip(codes, folders, strict=True):
                wall, rss = _step(step, code, folder)
                rec_path = folder / "research" / "steps" / f"{step}.json"
                r = json.loads(rec_path.read_text())["rows"] if step in ("convert", "delays", "spikes") else n
                disk = _du(folder / "columnar") if step == "convert" else 0
                rows.append((step, code, wall, rss, r, disk, _checksum(folder, step)))
        print(f"scale {args.scale}: {n:,} ratings, {truth['notes']:,} notes, {truth['raters']:,} raters; "
              f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")  # fmt: skip
        print("\n| step | checkout | wall s | rows | rows/s | peak RSS MiB | B/rating | disk MiB | outputs |")
        print("|---|---|---:|---:|---:|---:|---:|---:|---|")
        for step, code, wall, rss, r, disk, digest in rows:
            rate = f"{r / wall:,.0f}" if wall and r else ""
            print(f"| {step} | {code} | {wall:.1f} | {r:,} | {rate} | {rss / 2**20:,.0f} | {rss / n:.1f} | "
                  f"{disk / 2**20:,.0f} | {digest} |")  # fmt: skip
    finally:
        for folder in made:
            shutil.rmtree(folder, ignore_errors=True)
        if not args.keep:
            shutil.rmtree(data, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
