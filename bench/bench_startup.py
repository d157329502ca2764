"""Benchmark process start-up: `django.setup()`, `manage.py check` and `score_communitynotes` on 200 K ratings.

    DEBUG=1 DATABASE_URL=postgres://…/cn_bench REDIS_URL=redis://127.0.0.1:6379/0 \
        flock /tmp/heavy.lock .venv/bin/python bench/bench_startup.py [--runs 5] [--compare OTHER_CHECKOUT]

Every figure is a fresh process (the median and the fastest of `--runs`), in two bytecode modes:

- `no-write`: PYTHONDONTWRITEBYTECODE=1, as on the development machines: the .pyc files that exist
  are read, none is written. With the venv installed by scripts/setup.sh (`pip --no-compile`) only
  the standard library has them, so every process compiles Django, numpy, psycopg and the project
  again (the first line printed says whether Django's package has .pyc files).
- `cached`: every imported module has its .pyc (a fresh PYTHONPYCACHEPREFIX, warmed by one run of
  each command first): a normal install after its first start.

Columns: `django.setup()` timed inside the process; `manage.py check` and `score_communitynotes`
(synthetic public-format TSVs of ~200 K ratings, `crowdnotes_site/lib/communitynotes/data/synthetic.py`, the shape of
bench_scoring.py) timed as the whole process's wall clock; and which of the heavy libraries
(scikit-learn, scipy, torch, transformers, sentence-transformers, openai) a process that ran
django.setup() and the system checks has loaded. `--compare OTHER_CHECKOUT` times another
checkout's manage.py with the same data, its runs interleaved with this one's so both see the same
machine load (a before/after row: `git archive <commit> | tar -x -C /tmp/before`, then link its
.venv to this one's). The database must exist; nothing is written to it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

HEAVY = ("sklearn", "scipy", "torch", "transformers", "sentence_transformers", "openai")

SETUP_CHILD = """
import json, sys, time
t0 = time.perf_counter()
import django
django.setup()
setup_s = time.perf_counter() - t0
from django.core.management import call_command
call_command("check", verbosity=0)
loaded = sorted({m.split(".")[0] for m in sys.modules} & set(json.loads(sys.argv[1])))
print(json.dumps({"setup_s": setup_s, "heavy": loaded}))
"""


def prepare(n: int, workdir: Path) -> tuple[Path, Path, int]:
    """Synthetic notes/ratings TSVs (written once per size; the same shape as bench_scoring.py)."""
    from crowdnotes_site.lib.communitynotes.data import synthetic

    notes, ratings = workdir / "notes-00000.tsv", workdir / "ratings-00000.tsv"
    if not (notes.exists() and ratings.exists()):
        workdir.mkdir(parents=True, exist_ok=True)
        synthetic.write_tsv(synthetic.generate(n, seed=11, ratings_per_rater=40, ratings_per_note=25), workdir)
    with ratings.open("rb") as fh:
        count = sum(1 for _ in fh) - 1
    return notes, ratings, count


def _env(mode: str, cache_dir: Path) -> dict[str, str]:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": os.environ.get("DJANGO_SETTINGS_MODULE", "crowdnotes_site.settings")}
    if mode == "no-write":
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        env.pop("PYTHONPYCACHEPREFIX", None)
    else:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(cache_dir)
    return env


def django_has_pyc() -> bool:
    import django

    return any(Path(django.__file__).parent.glob("__pycache__/*.pyc"))


def _wall(cmd: list[str], cwd: Path, env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, env=env, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def measure(roots: list[Path], mode: str, runs: int, notes: Path, ratings: Path, out: Path) -> list[dict[str, object]]:
    """The figures of each checkout in `roots`, their runs interleaved (the same machine load for all)."""
    python = sys.executable
    score = [python, "manage.py", "score_communitynotes", "--notes", str(notes), "--ratings", str(ratings)]
    score += ["--outdir", str(out)]
    check = [python, "manage.py", "check"]
    setup = [python, "-c", SETUP_CHILD, json.dumps(HEAVY)]
    results: list[dict[str, list[object]]] = [{"setup": [], "check": [], "score": [], "heavy": []} for _ in roots]
    with tempfile.TemporaryDirectory(prefix="bench-startup-pyc-") as tmp:
        envs = [_env(mode, Path(tmp) / str(i)) for i in range(len(roots))]
        if mode == "cached":  # one run of each writes the .pyc files the measured runs read
            for root, env in zip(roots, envs, strict=True):
                for cmd in (setup, check, score):
                    subprocess.run(cmd, cwd=root, env=env, check=True, stdout=subprocess.DEVNULL)
        for _ in range(runs):
            for root, env, r in zip(roots, envs, results, strict=True):
                child = subprocess.run(setup, cwd=root, env=env, check=True, capture_output=True, text=True)
                report = json.loads(child.stdout.strip().splitlines()[-1])
                r["setup"].append(report["setup_s"])
                r["heavy"] = report["heavy"]
                r["check"].append(_wall(check, root, env))
                r["score"].append(_wall(score, root, env))
    return results  # type: ignore[return-value]


def _cell(values: object) -> str:
    seconds = sorted(values)  # type: ignore[call-overload]
    return f"{statistics.median(seconds):.2f} ({seconds[0]:.2f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5, help="fresh processes per figure (median and fastest shown)")
    parser.add_argument("--ratings", type=int, default=200_000, help="synthetic ratings for score_communitynotes")
    parser.add_argument("--root", type=Path, default=ROOT, help="the checkout whose manage.py is timed")
    parser.add_argument(
        "--compare", type=Path, help="another checkout (e.g. an export of an earlier commit), timed alongside"
    )
    parser.add_argument("--workdir", type=Path, default=ROOT / "var" / "bench-startup")
    parser.add_argument("--modes", nargs="+", choices=["no-write", "cached"], default=["no-write", "cached"])
    args = parser.parse_args()
    notes, ratings, count = prepare(args.ratings, args.workdir / str(args.ratings))
    roots = [args.root.resolve(), *([args.compare.resolve()] if args.compare else [])]
    print(f"{count:,} ratings in {ratings.parent}; {args.runs} runs per figure; "
          f"Django's package has .pyc files: {'yes' if django_has_pyc() else 'no'}; load {os.getloadavg()[0]:.1f}", flush=True)  # fmt: skip
    rows = []
    for mode in args.modes:
        for root, r in zip(roots, measure(roots, mode, args.runs, notes, ratings, args.workdir / "out"), strict=True):
            rows.append((root, mode, r))
    print(f"{'checkout':<24} | {'bytecode':<9} | {'django.setup() s':>16} | {'manage.py check s':>17} | "
          f"{'score_communitynotes s':>22} | heavy libraries after check")  # fmt: skip
    for root, mode, r in rows:
        heavy = ", ".join(r["heavy"]) or "none"  # type: ignore[arg-type]
        print(f"{str(root)[-24:]:<24} | {mode:<9} | {_cell(r['setup']):>16} | {_cell(r['check']):>17} | "
              f"{_cell(r['score']):>22} | {heavy}")  # fmt: skip
    print(f"Figures: median (fastest) wall seconds of fresh processes; load {os.getloadavg()[0]:.1f} at the end.")


if __name__ == "__main__":
    main()
