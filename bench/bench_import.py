"""The file-by-file import (`import_communitynotes --notes FILE --ratings DIR`) side by side with a
raw COPY of the same ratings files, and with another checkout's import of the same files.

    flock /tmp/heavy.lock .venv/bin/python bench/bench_import.py --scale 0.005 --data DIR \\
        [--other /tmp/old-checkout] [--repeat 3]
    flock /tmp/heavy.lock .venv/bin/python bench/bench_import.py --ratings 1000000 --data DIR ...

1. the data into --data unless it is there: with --scale, the synthetic download (seed 0,
   `download_synth`: notes-00000.tsv and eight ratings shards in today's 23-column schema; scale
   0.005: ~0.92 M ratings); with --ratings, `synthetic.write_tsv` of that many ratings (seed 5:
   one 6-column ratings file, a note per 25 ratings). The ratings are read through a folder of
   links to the shards;
2. a database per checkout (this one, and --other's: `<db>_0`, `<db>_1`), dropped, created and
   migrated by that checkout's code;
3. --repeat rounds, the checkouts alternating within each round: the import's tables emptied
   (TRUNCATE), `manage.py import_communitynotes --notes … --ratings DIR` run from the checkout
   (wall, peak RSS, and its ratings phase from the progress log: each shard's chunk work and the
   end steps), then on the same database and in the same round the raw COPY floors: (a) the
   ratings files themselves, `COPY … FROM STDIN` into a bare table of text columns; (b) the rows
   the import wrote, dumped by `COPY … TO` and copied into bare copies of their tables (no key,
   no index: the floor bench_import_folder.py measures for the folder import), the ratings and
   participants (against the ratings phase) and every table (against the whole command);
4. a content checksum of the ratings and the notes (by public ids) after each import: equal for
   two checkouts that wrote the same rows.
Prints one table (ratios per run, against the raw COPY of the same run) and drops the databases
unless --keep-db.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from crowdnotes_site.lib.communitynotes.data import synthetic  # noqa: E402

PY = sys.executable
PG = "postgres://postgres@127.0.0.1:5432"
TABLES = ("notes_rating", "notes_notestatuschange", "notes_note", "notes_post", "notes_participant",
          "notes_importednotehistory", "notes_importcheckpoint")  # fmt: skip


def _env(db: str) -> dict[str, str]:
    return {
        **os.environ, "DATABASE_URL": f"{PG}/{db}", "SECRET_KEY": os.environ.get("SECRET_KEY", "bench"),
        "DEBUG": "0", "DJANGO_SETTINGS_MODULE": "crowdnotes_site.settings",
    }  # fmt: skip


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def _fresh(db: str, root: Path) -> None:
    with psycopg.connect(f"{PG}/postgres", autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {db}")
        conn.execute(f"CREATE DATABASE {db}")
    subprocess.run([PY, "manage.py", "migrate", "-v0"], cwd=root, env=_env(db), check=True)


def _empty(db: str) -> None:
    with psycopg.connect(f"{PG}/{db}", autocommit=True) as conn:
        conn.execute(f"TRUNCATE {', '.join(TABLES)} CASCADE")


def _import(root: Path, db: str, notes: Path, ratings: Path, log: Path) -> tuple[float, float]:
    """(wall seconds, peak RSS MiB) of the file-by-file import run from `root`."""
    t0 = time.perf_counter()
    with log.open("w") as out:
        proc = subprocess.Popen(
            [PY, "manage.py", "import_communitynotes", "--notes", str(notes), "--ratings", str(ratings)],
            cwd=root, env=_env(db), stdout=out, stderr=out,
        )  # fmt: skip
        _pid, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status):
        raise SystemExit(f"import from {root} failed; see {log}")
    return time.perf_counter() - t0, usage.ru_maxrss / 1024


def _ratings_phase(log: Path) -> float:
    """The ratings' chunk work (each shard's "done … in S s") and end steps, from the progress log."""
    text = log.read_text()
    shards = re.findall(r"ratings-\d+\.tsv: done, [\d,]+ lines in ([\d.]+) s", text)
    steps = re.findall(r"ratings, end step: .*: ([\d.]+) s$", text, flags=re.MULTILINE)
    return sum(float(s) for s in shards + steps)


def _raw_files(db: str, shards: list[Path]) -> float:
    """Seconds to COPY the ratings files (their data lines, as they are) into a bare text table."""
    width = len(shards[0].open("rb").readline().split(b"\t"))
    with psycopg.connect(f"{PG}/{db}", autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS cn_raw_file")
        conn.execute(f"CREATE TABLE cn_raw_file ({', '.join(f'c{i} text' for i in range(width))})")
        t0 = time.perf_counter()
        with conn.transaction():
            for shard in shards:
                with shard.open("rb") as fh, conn.cursor().copy("COPY cn_raw_file FROM STDIN") as cp:
                    fh.readline()
                    while block := fh.read(1 << 20):
                        cp.write(block)
        took = time.perf_counter() - t0
        conn.execute("DROP TABLE cn_raw_file")
    return took


RATINGS_PHASE_TABLES = ("notes_rating", "notes_participant")
WRITTEN_TABLES = (*RATINGS_PHASE_TABLES, "notes_note", "notes_post")


def _raw_rows(db: str, work: Path) -> dict[str, float]:
    """Seconds to COPY the rows the import wrote (dumped first) into bare copies, per table."""
    took: dict[str, float] = {}
    with psycopg.connect(f"{PG}/{db}", autocommit=True) as conn:
        for table in WRITTEN_TABLES:
            dump = work / f"raw-{table}.txt"
            with dump.open("wb") as fh, conn.cursor().copy(f"COPY {table} TO STDOUT") as cp:
                for block in cp:
                    fh.write(block)
            copy_table = f"cn_raw_bare_{table}"
            conn.execute(f"DROP TABLE IF EXISTS {copy_table}")
            conn.execute(f"CREATE TABLE {copy_table} (LIKE {table} INCLUDING DEFAULTS)")
            t0 = time.perf_counter()
            with conn.transaction(), dump.open("rb") as fh, conn.cursor().copy(f"COPY {copy_table} FROM STDIN") as cp:
                while block := fh.read(1 << 20):
                    cp.write(block)
            took[table] = time.perf_counter() - t0
            conn.execute(f"DROP TABLE {copy_table}")
            dump.unlink()
    return took


def _checksum(db: str) -> str:
    """Counts and content checksums of the ratings and the notes by public ids (ids differ)."""
    digest = "sum(('x' || substr(md5({}), 1, 15))::bit(60)::bigint)"
    rating = "n.external_id || ':' || p.external_id || ':' || r.level || ':' || r.tags::text || ':' || r.created_at"
    note = "n.external_id || ':' || s.external_id || ':' || n.text || ':' || n.status || ':' || n.num_ratings"
    with psycopg.connect(f"{PG}/{db}") as conn:
        ratings = conn.execute(
            f"SELECT count(*), {digest.format(rating)} FROM notes_rating r "  # noqa: S608
            "JOIN notes_note n ON n.id = r.note_id JOIN notes_participant p ON p.id = r.rater_id"
        ).fetchone()
        notes = conn.execute(
            f"SELECT count(*), {digest.format(note)} FROM notes_note n JOIN notes_post s ON s.id = n.post_id"  # noqa: S608
        ).fetchone()
    assert ratings is not None and notes is not None
    return f"ratings {ratings[0]:,} / {ratings[1]}, notes {notes[0]:,} / {notes[1]}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", type=float, default=0.005, help="the download's shape at this scale")
    parser.add_argument("--ratings", type=int, help="instead, synthetic.write_tsv's shape with this many ratings")
    parser.add_argument("--data", type=Path, required=True, help="the download folder (generated unless there)")
    parser.add_argument("--other", type=Path, help="another checkout whose import runs beside this one's")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--db", default="cn_bench_import")
    parser.add_argument("--keep-db", action="store_true")
    args = parser.parse_args()
    if not (args.data / "notes-00000.tsv").exists() and args.ratings:
        synthetic.write_tsv(synthetic.generate(args.ratings, seed=5), args.data)
    elif not (args.data / "notes-00000.tsv").exists():
        subprocess.run([PY, "-m", "crowdnotes_site.lib.communitynotes.data.synthetic_download", str(args.data),
                        "--scale", str(args.scale), "--seed", "0"], cwd=ROOT, check=True, stdout=subprocess.DEVNULL)  # fmt: skip
    shards = sorted(args.data.glob("ratings-*.tsv"))
    work = Path(tempfile.mkdtemp(prefix="cn_bench_import_"))
    ratings = work / "ratings"
    ratings.mkdir()
    for shard in shards:
        (ratings / shard.name).symlink_to(shard.resolve())
    roots = [ROOT] + ([args.other.resolve()] if args.other else [])
    dbs = [f"{args.db}_{k}" for k in range(len(roots))]
    rows: list[tuple[str, int, float, float, float, float, dict[str, float]]] = []
    sums: dict[str, str] = {}
    load = [_load()]
    try:
        for root, db in zip(roots, dbs, strict=True):
            _fresh(db, root)
        for rnd in range(args.repeat):
            for root, db in zip(roots, dbs, strict=True):
                _empty(db)
                log = work / f"import-{db}-{rnd}.log"
                wall, peak = _import(root, db, args.data / "notes-00000.tsv", ratings, log)
                rows.append((str(root), rnd, wall, peak, _ratings_phase(log), _raw_files(db, shards),
                             _raw_rows(db, work)))  # fmt: skip
                sums[str(root)] = _checksum(db)
        load.append(_load())
    finally:
        if not args.keep_db:
            with psycopg.connect(f"{PG}/postgres", autocommit=True) as conn:
                for db in dbs:
                    conn.execute(f"DROP DATABASE IF EXISTS {db}")
        shutil.rmtree(work, ignore_errors=True)
    lines = sum(1 for s in shards for _ in s.open("rb")) - len(shards)
    print(
        f"{args.data}: {lines:,} rating lines in {len(shards)} shards; load average before / after: {' / '.join(load)}"
    )
    print("\n| checkout | run | wall s | peak RSS MiB | ratings phase s | raw COPY: the ratings files s | raw "
          "COPY, bare: ratings + participants s / every table written s | ratings phase / raw (ratings + "
          "participants) | wall / raw (every table) | wall / raw (the ratings files) |")  # fmt: skip
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    ratios: list[tuple[str, float, float, float]] = []
    for root, rnd, wall, peak, phase, raw_f, raw in rows:
        raw_r, raw_all = sum(raw[t] for t in RATINGS_PHASE_TABLES), sum(raw.values())
        ratios.append((root, phase / raw_r, wall / raw_all, wall / raw_f))
        print(f"| {root} | {rnd + 1} | {wall:.1f} | {peak:.0f} | {phase:.1f} | {raw_f:.1f} | {raw_r:.1f} / "
              f"{raw_all:.1f} | {ratios[-1][1]:.2f}× | {ratios[-1][2]:.2f}× | {ratios[-1][3]:.2f}× |")  # fmt: skip
    for root in roots:
        mine = [r for r in ratios if r[0] == str(root)]
        medians = [statistics.median(float(r[k]) for r in mine) for k in (1, 2, 3)]
        print(f"\n{root}: medians {medians[0]:.2f}× (ratings phase), {medians[1]:.2f}× (wall, every table), "
              f"{medians[2]:.2f}× (wall, the files); {sums[str(root)]}")  # fmt: skip
    if len(roots) == 2:
        print(f"same rows: {sums[str(roots[0])] == sums[str(roots[1])]}")


if __name__ == "__main__":
    main()
