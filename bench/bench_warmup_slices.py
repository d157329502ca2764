"""How long one slice of the warm-up's pre-filter table takes: the longest a person's task waits
behind the warm-up on a worker that runs one task at a time (evidence/warmup.py queues the next
slice behind what people queued meanwhile). Also the whole table in one process, for comparison.

    HF_HUB_OFFLINE=1 flock /tmp/heavy.lock .venv/bin/python bench/bench_warmup_slices.py \
        [--model all-mpnet-base-v2] [--slices 3] [--whole]

The table is built in a temporary folder (the unpacked model is linked from MODEL_CACHE_DIR or
~/.cache/crowdnotes/models), so an existing table is neither read nor replaced. No database.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from evidence.embedding import MPNET, default_cache_dir, load_model  # noqa: E402
from evidence.matching import TABLE_BATCH, static_table_slice, static_vectors, table_plan  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=MPNET)
    parser.add_argument("--slices", type=int, default=3)
    parser.add_argument("--whole", action="store_true", help="also build the whole table in this process")
    args = parser.parse_args()
    models = Path(os.environ.get("MODEL_CACHE_DIR") or default_cache_dir())
    with tempfile.TemporaryDirectory() as tmp:
        cache = Path(tmp)
        if (models / args.model).is_dir():
            (cache / args.model).symlink_to(models / args.model)
        started = time.perf_counter()
        model = load_model(args.model, max_seq_length=512, cache_dir=cache)
        print(
            f"model {args.model}: loaded in {time.perf_counter() - started:.1f} s; vocabulary {len(model.tokenizer):,} tokens"
        )
        table_plan(args.model, cache)
        seconds = []
        for _ in range(args.slices):
            started = time.perf_counter()
            progress = static_table_slice(model, args.model, cache, batches=1)
            seconds.append(time.perf_counter() - started)
            print(f"slice of {TABLE_BATCH} tokens: {seconds[-1]:.2f} s ({progress.done:,} / {progress.total:,})")
        print(
            f"n={len(seconds)} slices: median {statistics.median(seconds):.2f} s, max {max(seconds):.2f} s; "
            f"load average {os.getloadavg()[0]:.1f}"
        )
        if args.whole:
            whole = cache / "whole"
            whole.mkdir()
            if (models / args.model).is_dir():
                (whole / args.model).symlink_to(models / args.model)
            started = time.perf_counter()
            static_vectors(model, args.model, whole)
            print(f"whole table in one process: {time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()
