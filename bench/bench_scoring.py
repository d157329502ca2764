"""Benchmark crowdnotes_site/lib/communitynotes/scoring/ on synthetic Community Notes data from a known latent model.

    flock /tmp/heavy.lock /work/venv/bin/python bench/bench_scoring.py [--sizes 200000 1000000]

For each size it writes notes/ratings TSVs in the public format (two rater camps with opposite
factors, notes of varied intercepts), then measures in fresh subprocesses (so peak memory is
the scorer's own): (a) scoring arrays already in memory, (b) the whole file path
(read TSVs + score + write outputs, i.e. `manage.py score_communitynotes`). Prints a table.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import cast

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from crowdnotes_site.lib.communitynotes import scoring  # noqa: E402
from crowdnotes_site.lib.communitynotes.data import scorer_input as scoring_tsv  # noqa: E402
from crowdnotes_site.lib.communitynotes.data import synthetic  # noqa: E402


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def child_arrays(workdir: Path) -> dict[str, object]:
    d = np.load(workdir / "data.npz")
    meta = scoring.NotesMeta(
        int(d["n_notes"]), not_misleading=d["not_misleading"], created_at_ms=d["note_created"], author=d["author"]
    )
    ratings = scoring.Ratings(d["rater"], d["note"], d["value"], d["created"])
    base = _peak_mb()
    t0 = time.perf_counter()
    res = scoring.score(ratings, meta, int(d["n_raters"]))
    elapsed = time.perf_counter() - t0
    ok = ~np.isnan(res.note_intercept)
    rok = ~np.isnan(res.rater_factor)
    return {
        "seconds": elapsed,
        "peak_mb": _peak_mb(),
        "peak_before_mb": base,
        "corr_note_intercept": float(np.corrcoef(res.note_intercept[ok], d["true_note_intercept"][ok])[0, 1]),
        "corr_note_factor": float(np.corrcoef(res.note_factor[ok], d["true_note_factor"][ok])[0, 1]),
        "corr_rater_factor": float(np.corrcoef(res.rater_factor[rok], d["true_rater_factor"][rok])[0, 1]),
        "status": np.bincount(res.status, minlength=3).tolist(),
        "iterations": [res.diagnostics.get("phase1_iterations"), res.diagnostics.get("phase1b_iterations")],
        "scored_notes": int(ok.sum()),
        "scored_raters": int(rok.sum()),
    }


def child_files(workdir: Path) -> dict[str, object]:
    t0 = time.perf_counter()
    summary = scoring_tsv.score_files(
        notes_path=workdir / "notes-00000.tsv", ratings_path=workdir / "ratings-00000.tsv", outdir=workdir / "out"
    )
    return {
        "seconds": time.perf_counter() - t0,
        "peak_mb": _peak_mb(),
        "read_s": summary["seconds_read"],
        "score_s": summary["seconds_score"],
        "write_s": summary["seconds_write"],
    }


def prepare(n: int, workdir: Path, per_rater: int = 40, per_note: int = 25) -> tuple[int, int, int]:
    data = synthetic.generate(n, seed=11, ratings_per_rater=per_rater, ratings_per_note=per_note)
    synthetic.write_tsv(data, workdir)
    np.savez(
        workdir / "data.npz",
        rater=data.rater, note=data.note, value=data.value, created=data.created_at_ms,
        n_notes=data.n_notes, n_raters=data.n_raters, not_misleading=data.not_misleading,
        note_created=data.note_created_at_ms, author=data.note_author,
        true_note_intercept=data.true_note_intercept, true_note_factor=data.true_note_factor,
        true_rater_factor=data.true_rater_factor,
    )  # fmt: skip
    return len(data.value), data.n_raters, data.n_notes


def _run(mode: str, workdir: Path) -> dict[str, object]:
    out = subprocess.run(
        [sys.executable, __file__, "--child", mode, "--workdir", str(workdir)],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[200_000, 1_000_000])
    parser.add_argument("--workdir", type=Path, default=ROOT / "var" / "bench-scoring")
    parser.add_argument("--ratings-per-rater", type=int, default=40, help="synthetic shape: raters = ratings / this")
    parser.add_argument("--ratings-per-note", type=int, default=25, help="synthetic shape: notes = ratings / this")
    parser.add_argument("--child", choices=["arrays", "files"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        fn = child_arrays if args.child == "arrays" else child_files
        print(json.dumps(fn(args.workdir)))
        return
    rows = []
    for n in args.sizes:
        workdir = args.workdir / str(n)
        workdir.mkdir(parents=True, exist_ok=True)
        actual, n_raters, n_notes = prepare(n, workdir, args.ratings_per_rater, args.ratings_per_note)
        print(f"{actual:,} ratings, {n_raters:,} raters, {n_notes:,} notes written to {workdir}", flush=True)
        rows.append((actual, _run("arrays", workdir), _run("files", workdir)))
    print(
        f"{'ratings':>9} | {'score s':>7} | {'peak MB':>7} | {'file->tsv s':>11} | {'read s':>6} | {'peak MB':>7} | "
        f"{'r(i_n)':>6} | {'r(f_n)':>6} | {'r(f_u)':>6} | {'notes scored':>12} | {'CRH/CRNH/NMR':>17} | iters"
    )
    for actual, a, f in rows:
        nmr, crh, crnh = cast(list[int], a["status"])
        r_rater = abs(cast(float, a["corr_rater_factor"]))
        split = f"{f['read_s']:.1f}/{f['score_s']:.1f}/{f['write_s']:.1f}"
        print(
            f"{actual:>9} | {a['seconds']:>7.2f} | {a['peak_mb']:>7.0f} | {f['seconds']:>11.2f} | {f['read_s']:>6.2f} | "
            f"{f['peak_mb']:>7.0f} | {split:>19} | "
            f"{a['corr_note_intercept']:>6.3f} | {a['corr_note_factor']:>6.3f} | "
            f"{r_rater:>6.3f} | {a['scored_notes']:>12} | {f'{crh}/{crnh}/{nmr}':>17} | "
            f"{a['iterations']}"
        )


if __name__ == "__main__":
    main()
