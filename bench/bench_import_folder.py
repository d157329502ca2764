"""The whole download folder into PostgreSQL, side by side with a raw COPY of the same rows, and
the app's rescoring over it.

    flock /tmp/heavy.lock .venv/bin/python bench/bench_import_folder.py --scale 0.05 \\
        --data /work/data/NAME/s005 --db cn_NAME_bench [--kill-at ratings-00003.tsv] [--rescore]

Steps, each in its own process (peak RSS per process from wait4):
1. generate the synthetic download (`download_synth`) unless the folder exists (`--folder`: an
   existing download, never modified);
2. a fresh database (dropped and created, `migrate`);
3. `manage.py import_communitynotes FOLDER` (timed; `--kill-at SHARD`: killed by SIGKILL once the
   shard's checkpoint has advanced, then run again to resume: both runs recorded);
4. raw COPY: the rows the import wrote are exported (`COPY … TO` a file, text format) and copied
   back with plain `COPY … FROM STDIN` into (a) an empty copy of each live table with its indexes,
   keys and foreign keys (`LIKE … INCLUDING ALL` + the table's foreign keys) and (b) a bare copy
   (no index, no key: the floor); timed per table, then the copies and files are removed.
   `--raw-ratings-rows N`: only the first N ratings (by id: the first shard's rows), for the full
   shape, where a second copy of every rating would not fit the disk; the ratio is then per row;
   `--raw-existing IMPORT_LOG`: only this step, on a database the import already filled (--db, kept
   as it is): every rating and participant, piped by psql from `COPY … TO STDOUT` into a bare copy
   (no dump file: the full shape's second copy needs only its own room), beside the ratings phase
   read from the import's progress log;
5. `--rescore`: `notes.services.notes_rescore()` twice in a fresh process (peak RSS, bytes per
   rating all in and above the process's own base after `django.setup()`).
Prints one table and a content checksum of the rows (public ids); the database is dropped at the
end unless `--keep-db`. `--code CHECKOUT`: that checkout's code migrates and imports (run once with
and once without, alternating, to compare two versions on the same folder and machine).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parent.parent
CODE = ROOT  # the checkout whose code imports and migrates (--code)
PY = sys.executable
PG = "postgres://postgres@127.0.0.1:5432"
TABLES = ("notes_participant", "notes_post", "notes_note", "notes_rating", "notes_notestatuschange",
          "notes_importednotehistory")  # fmt: skip


def _env(db: str) -> dict[str, str]:
    return {
        **os.environ, "DATABASE_URL": f"{PG}/{db}", "SECRET_KEY": os.environ.get("SECRET_KEY", "bench"),
        "DEBUG": "0", "DJANGO_SETTINGS_MODULE": "crowdnotes_site.settings",
    }  # fmt: skip


def _wait(proc: subprocess.Popen[bytes], block: bool = True) -> tuple[int, float] | None:
    """(exit status, peak RSS MiB) of a child process once it has ended (None: still running,
    when not `block`). Reaped here with wait4, for its own resource usage: never by poll()."""
    pid, status, usage = os.wait4(proc.pid, 0 if block else os.WNOHANG)
    if pid == 0:
        return None
    proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, usage.ru_maxrss / 1024


def _load() -> str:
    """The load average (1, 5, 15 min) as printed in the tables."""
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def _free_gb() -> float:
    return shutil.disk_usage("/").free / 2**30


def _db_size(db: str) -> float:
    with psycopg.connect(f"{PG}/{db}") as conn:
        return conn.execute("SELECT pg_database_size(current_database())").fetchone()[0] / 2**30  # type: ignore[index]


def _import(
    folder: Path,
    db: str,
    log: Path,
    kill_at: str | None,
    min_free_gb: float,
    budget_s: float | None = None,
    between: Callable[[], None] | None = None,
) -> list[dict[str, object]]:
    """The import (and, with `kill_at`, its kill and its resumption; `between` runs in between).
    `budget_s`: the resumed (or only) run is stopped after that many seconds."""
    runs: list[dict[str, object]] = []
    for attempt in range(2 if kill_at else 1):
        if attempt and between is not None:
            between()
        t0 = time.perf_counter()
        with log.open("a") as err:
            proc = subprocess.Popen(
                [PY, "manage.py", "import_communitynotes", str(folder)], cwd=CODE, env=_env(db),
                stdout=err, stderr=err,
            )  # fmt: skip
            last = attempt == (1 if kill_at else 0)
            budget = budget_s
            if budget is not None and budget > 1e9:  # an epoch time: stop at that time
                budget = max(budget - time.time(), 1.0)
            why, (code, peak), lowest = _watch(
                proc, db, kill_at if attempt == 0 else None, min_free_gb, budget if last else None
            )
        wall = time.perf_counter() - t0
        runs.append({"run": "killed" if why else "import", "wall": wall, "peak": peak, "code": code,
                     "note": why or "", "free_gb": lowest})  # fmt: skip
        if code not in (0, -signal.SIGKILL):
            raise SystemExit(f"import failed ({code}); see {log}")
        if not why or why.startswith("stopped"):
            break
    return runs


def _watch(
    proc: subprocess.Popen[bytes], db: str, shard: str | None, min_free_gb: float, budget_s: float | None = None
) -> tuple[str | None, tuple[int, float], float]:
    """Wait for the import; SIGKILL it once `shard`'s checkpoint has advanced (a kill to resume
    from), or when the free disk falls below `min_free_gb` (stopped). Returns why it was killed
    (None: it ended by itself), its exit status and peak RSS, and the lowest free disk seen."""
    lowest = _free_gb()
    why = None
    t0 = time.perf_counter()
    with psycopg.connect(f"{PG}/{db}", autocommit=True) as conn:
        while (ended := _wait(proc, block=False)) is None:
            lowest = min(lowest, _free_gb())
            if why is None and budget_s is not None and time.perf_counter() - t0 > budget_s:
                why = f"stopped: time budget of {budget_s:.0f} s"
                proc.send_signal(signal.SIGKILL)
            elif why is None and lowest < min_free_gb:
                why = f"stopped: free disk {lowest:.1f} GiB < {min_free_gb} GiB"
                proc.send_signal(signal.SIGKILL)
            elif why is None and shard:
                row = conn.execute(
                    "SELECT lines_done, bytes_done FROM notes_importcheckpoint "
                    "WHERE key LIKE %s AND lines_done > 0 AND NOT finished",
                    [f"ratings:%/{shard}:%"],
                ).fetchone()
                if row:
                    time.sleep(3)  # a few more chunks, so the kill lands mid-chunk
                    proc.send_signal(signal.SIGKILL)
                    why = f"killed in {shard} after >= {row[0]:,} lines (byte {row[1]:,}) were committed"
            time.sleep(0.5)
    return why, ended, lowest


def _checksum(db: str) -> dict[str, object]:
    """Row counts of every table, and a content checksum of the ratings and the notes by their
    public ids (database ids differ between two imports): equal for two imports of one folder."""
    with psycopg.connect(f"{PG}/{db}") as conn:
        out: dict[str, object] = {
            t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]  # type: ignore[index]  # noqa: S608
            for t in TABLES
        }
        digest = "sum(('x' || substr(md5({}), 1, 15))::bit(60)::bigint)"
        rating = "n.external_id || ':' || p.external_id || ':' || r.level || ':' || r.tags::text || ':' || r.created_at"
        ratings_sql = (
            f"SELECT {digest.format(rating)} FROM notes_rating r JOIN notes_note n ON n.id = r.note_id "  # noqa: S608
            "JOIN notes_participant p ON p.id = r.rater_id"
        )
        note = "n.external_id || ':' || s.external_id || ':' || n.text || ':' || n.status || ':' || n.num_ratings"
        notes_sql = f"SELECT {digest.format(note)} FROM notes_note n JOIN notes_post s ON s.id = n.post_id"  # noqa: S608
        for name, sql in (("ratings checksum", ratings_sql), ("notes checksum", notes_sql)):
            row = conn.execute(sql).fetchone()
            out[name] = str(row[0] if row else None)
    return out


def generate(folder: Path, scale: float) -> float:
    """The synthetic download at `scale` (seed 0) into `folder` unless it is there; seconds taken."""
    if (folder / "notes-00000.tsv").exists():
        return 0.0
    t0 = time.perf_counter()
    subprocess.run([PY, "-m", "crowdnotes_site.lib.communitynotes.data.synthetic_download", str(folder), "--scale", str(scale),
                    "--seed", "0"], cwd=ROOT, check=True, stdout=subprocess.DEVNULL)  # fmt: skip
    return time.perf_counter() - t0


def _fresh(db: str) -> None:
    with psycopg.connect(f"{PG}/postgres", autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {db}")
        conn.execute(f"CREATE DATABASE {db}")
    subprocess.run([PY, "manage.py", "migrate", "-v0"], cwd=CODE, env=_env(db), check=True)


def _shard_ratings(log: Path, shard: str) -> tuple[int, float]:
    """(ratings the import wrote from `shard`, its seconds of chunk work) from the progress log."""
    text = log.read_text()
    counts = re.findall(rf"{re.escape(shard)}: [\d,]+ lines, ([\d,]+) ratings", text)
    done = re.findall(rf"{re.escape(shard)}: done, [\d,]+ lines in ([\d.]+) s", text)
    return (int(counts[-1].replace(",", "")) if counts else 0), (float(done[-1]) if done else 0.0)


def _phases(log: Path) -> dict[str, float]:
    out: dict[str, float] = {}
    for m in re.finditer(r"phase (\w+)[^:]*: ([\d.]+) s", log.read_text()):
        out[m.group(1)] = out.get(m.group(1), 0.0) + float(m.group(2))
    return out


def _raw_copy(db: str, work: Path, ratings_rows: int | None) -> list[tuple[str, int, float, float]]:
    """(table, rows, seconds with keys and indexes, seconds bare) per table."""
    out = []
    with psycopg.connect(f"{PG}/{db}", autocommit=True) as conn:
        for table in TABLES:
            if ratings_rows is not None and table != "notes_rating":
                continue
            where = ""
            if table == "notes_rating" and ratings_rows is not None:
                top = conn.execute(
                    "SELECT max(id) FROM (SELECT id FROM notes_rating ORDER BY id LIMIT %s) t", [ratings_rows]
                ).fetchone()[0]  # type: ignore[index]
                where = f" WHERE id <= {int(top)}"
            dump = work / f"raw-{table}.txt"
            # Table names are this module's constants (TABLES); the row limit an int.
            dump_sql = f"COPY (SELECT * FROM {table}{where}) TO STDOUT"  # noqa: S608
            with dump.open("wb") as fh, conn.cursor().copy(dump_sql) as cp:
                for block in cp:
                    fh.write(block)
            rows = conn.execute(f"SELECT count(*) FROM {table}{where}").fetchone()[0]  # type: ignore[index]  # noqa: S608
            fks = conn.execute(
                "SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE conrelid = %s::regclass AND contype = 'f'",
                [table],
            ).fetchall()
            timings = []
            for kind in ("keys", "bare"):
                copy_table = f"cn_raw_{kind}_{table}"
                conn.execute(f"DROP TABLE IF EXISTS {copy_table}")
                if kind == "keys":
                    conn.execute(f"CREATE TABLE {copy_table} (LIKE {table} INCLUDING ALL)")
                    for (definition,) in fks:
                        conn.execute(f"ALTER TABLE {copy_table} ADD {definition.removesuffix(' NOT VALID')}")
                    if table == "notes_rating":
                        _rating_keys(conn, copy_table)
                else:
                    conn.execute(f"CREATE TABLE {copy_table} (LIKE {table} INCLUDING DEFAULTS)")
                t0 = time.perf_counter()
                with conn.transaction(), dump.open("rb") as fh:
                    with conn.cursor().copy(f"COPY {copy_table} FROM STDIN") as cp:
                        while block := fh.read(1 << 20):
                            cp.write(block)
                timings.append(time.perf_counter() - t0)
                conn.execute(f"DROP TABLE {copy_table}")
            dump.unlink()
            out.append((table, int(rows), timings[0], timings[1]))
    return out


def _raw_piped(db: str, table: str) -> tuple[int, float, float]:
    """(rows, seconds of `COPY table TO STDOUT` alone, seconds of the same stream piped into a
    plain `COPY … FROM STDIN` of a bare copy of the table): psql on both ends, no dump file, so a
    second copy of the full shape's ratings needs only its table's room (the bare copy is dropped)."""
    url = f"{PG}/{db}"
    out_sql = f"COPY {table} TO STDOUT"
    copy_table = f"cn_raw_bare_{table}"
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]  # type: ignore[index]  # noqa: S608
        conn.execute(f"DROP TABLE IF EXISTS {copy_table}")
        conn.execute(f"CREATE TABLE {copy_table} (LIKE {table} INCLUDING DEFAULTS)")
    t0 = time.perf_counter()
    subprocess.run(["psql", "-X", "-q", "-d", url, "-c", out_sql], stdout=subprocess.DEVNULL, check=True)
    read_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    reader = subprocess.Popen(["psql", "-X", "-q", "-d", url, "-c", out_sql], stdout=subprocess.PIPE)
    writer = subprocess.run(["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", url, "-c",
                             f"COPY {copy_table} FROM STDIN"], stdin=reader.stdout, check=False)  # fmt: skip
    if reader.stdout:
        reader.stdout.close()
    if reader.wait() or writer.returncode:
        raise SystemExit(f"raw COPY of {table} failed")
    piped_s = time.perf_counter() - t0
    with psycopg.connect(url, autocommit=True) as conn:
        copied = conn.execute(f"SELECT count(*) FROM {copy_table}").fetchone()[0]  # type: ignore[index]  # noqa: S608
        conn.execute(f"DROP TABLE {copy_table}")
    if copied != rows:
        raise SystemExit(f"raw COPY of {table}: {copied:,} rows, not {rows:,}")
    return int(rows), read_s, piped_s


def raw_existing(db: str, import_log: Path) -> None:
    """`--raw-existing LOG`: the whole ratings phase's rows (ratings and participants) of a database
    the folder import already filled (`--db`, its import's progress log), raw-COPYed piped into bare
    copies (the floor; a copy with keys and indexes does not fit the disk beside the full shape),
    beside the import's own ratings phase from the log."""
    load = _load()
    ours = _phases(import_log).get("ratings", 0.0)
    done = [(t, *_raw_piped(db, t)) for t in ("notes_rating", "notes_participant")]
    print(f"database {db}; load average before: {load}, after: {_load()}")
    print("\n| table | rows | COPY TO alone s | raw COPY piped into a bare copy s | rows/s |")
    print("|---|---:|---:|---:|---:|")
    for table, rows, read_s, piped_s in done:
        print(f"| {table} | {rows:,} | {read_s:.1f} | {piped_s:.1f} | {rows / max(piped_s, 1e-9):,.0f} |")
    bare = sum(r[3] for r in done)
    print(f"\nratings phase of the import (from {import_log.name}): {ours:.1f} s; raw COPY bare, ratings + "
          f"participants: {bare:.1f} s; ours / raw (bare) = {ours / bare:.2f}x")  # fmt: skip


def _rating_keys(conn: psycopg.Connection, table: str) -> None:
    """The ratings table's primary key, unique (note, rater) and rater index, as the migrations
    make them, on `table` where missing (a stopped bulk load leaves them out of notes_rating,
    so LIKE … INCLUDING ALL would not copy them)."""
    names = {row[0] for row in conn.execute("SELECT indexdef FROM pg_indexes WHERE tablename = %s", [table])}
    if not any("(id)" in d for d in names):
        conn.execute(f"ALTER TABLE {table} ADD PRIMARY KEY (id)")
    if not any("(note_id, rater_id)" in d for d in names):
        conn.execute(f"CREATE UNIQUE INDEX ON {table} (note_id, rater_id)")
    if not any("(rater_id)" in d for d in names):
        conn.execute(f"CREATE INDEX ON {table} (rater_id)")


def child_rescore() -> None:
    """notes_rescore() twice; JSON with walls, this process's base and peak RSS."""
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from notes.scoring import services as scoring_services  # Django models: only after setup()

    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    runs = []
    for label in ("first rescoring", "second rescoring")[: int(os.environ.get("BENCH_RESCORE_RUNS", "2"))]:
        t0 = time.perf_counter()
        summary = scoring_services.notes_rescore()
        runs.append((label, time.perf_counter() - t0, summary.get("ratings", 0), summary.get("notes_updated", 0),
                     resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024))  # fmt: skip
    print(json.dumps({"base": base, "runs": runs}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", type=float, help="generate a synthetic download of this scale into --data")
    parser.add_argument("--data", type=Path, help="where to generate it (deleted at the end unless --keep-data)")
    parser.add_argument("--folder", type=Path, help="an existing download folder (read only)")
    parser.add_argument("--db", default="cn_import_bench")
    parser.add_argument("--work", type=Path, help="for the log and the raw COPY's dump (default: beside --data)")
    parser.add_argument("--kill-at", help="kill the import once this ratings shard is under way, then resume")
    parser.add_argument("--raw-ratings-rows", type=int, help="raw COPY only the first N ratings (full shape)")
    parser.add_argument("--rescore", action="store_true")
    parser.add_argument("--rescore-runs", type=int, default=2)
    parser.add_argument(
        "--budget-s",
        type=float,
        help="full shape: stop the resumed import after this many seconds (or, above 1e9, at this epoch time)",
    )
    parser.add_argument("--min-free-gb", type=float, default=6.0, help="stop the import below this much free disk")
    parser.add_argument("--keep-db", action="store_true")
    parser.add_argument("--keep-data", action="store_true")
    parser.add_argument("--code", type=Path, help="another checkout whose code migrates and imports (old vs new)")
    parser.add_argument("--child-rescore", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument(
        "--raw-existing",
        type=Path,
        metavar="IMPORT_LOG",
        help="only the raw COPY, piped into bare copies, on --db as its import left it (see raw_existing)",
    )
    args = parser.parse_args()
    if args.child_rescore:
        return child_rescore()
    if args.raw_existing:
        return raw_existing(args.db, args.raw_existing)
    global CODE  # the one setting the steps read
    CODE = args.code.resolve() if args.code else ROOT
    sys.path.insert(0, str(ROOT))
    folder = args.folder or args.data
    if folder is None:
        raise SystemExit("--folder or --data (with --scale)")
    work = args.work or (args.data.parent if args.data else Path(tempfile.gettempdir()))
    load = [_load()]
    gen_s = generate(folder, args.scale) if args.folder is None else 0.0
    tsv_gb = sum(f.stat().st_size for f in folder.glob("*.tsv")) / 2**30
    log = work / f"{args.db}-import.log"
    log.unlink(missing_ok=True)
    full = args.raw_ratings_rows is not None
    raw: list[tuple[str, int, float, float]] = []
    kill_runs: list[dict[str, object]] = []
    same = None
    clean = None
    try:
        _fresh(args.db)
        if full:
            # The full shape: killed inside a shard, the raw COPY of the first shard's rows (while
            # the disk still has room for its copies), resumed within the time budget.
            def raw_now() -> None:
                rows = args.raw_ratings_rows or _shard_ratings(log, "ratings-00000.tsv")[0]
                raw.extend(_raw_copy(args.db, work, rows))

            runs = _import(folder, args.db, log, args.kill_at, args.min_free_gb, args.budget_s, raw_now)
        else:
            runs = _import(folder, args.db, log, None, args.min_free_gb)
        phases = _phases(log)
        load.append(_load())
        db_gb = _db_size(args.db)
        clean = _checksum(args.db) if not full else None
        with psycopg.connect(f"{PG}/{args.db}") as conn:
            counts = {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in TABLES}  # type: ignore[index]  # noqa: S608
        if not full:
            raw = _raw_copy(args.db, work, None)
        load.append(_load())
        rescore = None
        if args.rescore:
            with psycopg.connect(f"{PG}/{args.db}", autocommit=True) as conn:
                # What a finished import ends with (a stopped one did not get there): the
                # rescoring sizes its arrays from the planner's row estimate.
                conn.execute("ANALYZE notes_rating, notes_note, notes_participant")
            env = {**_env(args.db), "BENCH_RESCORE_RUNS": str(args.rescore_runs)}
            proc = subprocess.Popen([PY, str(Path(__file__).resolve()), "--child-rescore"], cwd=ROOT,
                                    env=env, stdout=subprocess.PIPE)  # fmt: skip
            out = proc.stdout.read() if proc.stdout else b""
            code, peak = _wait(proc)  # type: ignore[misc]
            if code:
                raise SystemExit(f"rescoring failed ({code})")
            rescore = (json.loads(out.decode().strip().splitlines()[-1]), peak)
        if args.kill_at and not full:
            # The same folder again into a fresh database, killed inside a shard and resumed:
            # the same rows as the uninterrupted import (counts and content checksums).
            _fresh(args.db)
            kill_log = work / f"{args.db}-kill.log"
            kill_log.unlink(missing_ok=True)
            kill_runs = _import(folder, args.db, kill_log, args.kill_at, args.min_free_gb)
            resumed = _checksum(args.db)
            same = (clean == resumed, clean, resumed)
    finally:
        if not args.keep_db:
            with psycopg.connect(f"{PG}/postgres", autocommit=True) as conn:
                conn.execute(f"DROP DATABASE IF EXISTS {args.db}")
        if args.data is not None and args.folder is None and not args.keep_data:
            shutil.rmtree(args.data, ignore_errors=True)
    print(f"code: {CODE}")
    _print(folder, gen_s, tsv_gb, runs, phases, db_gb, counts, raw, rescore, load, args.raw_ratings_rows, log)
    if clean is not None:
        print(f"content: {clean}")
    if kill_runs:
        print("\nkilled and resumed, into a fresh database:")
        print("| run | wall s | peak RSS MiB | note |")
        print("|---|---:|---:|---|")
        for r in kill_runs:
            print(f"| {r['run']} | {r['wall']:.1f} | {r['peak']:.0f} | {r['note']} |")
        if same is not None:
            print(f"same rows as the uninterrupted import: {same[0]}; {same[2]}")
            if not same[0]:
                print(f"uninterrupted: {same[1]}")


def _print(folder, gen_s, tsv_gb, runs, phases, db_gb, counts, raw, rescore, load, partial, log) -> None:  # type: ignore[no-untyped-def]
    print(f"folder {folder}: {tsv_gb:.2f} GiB of TSVs" + (f", generated in {gen_s:.1f} s" if gen_s else ""))
    print("rows: " + ", ".join(f"{t.removeprefix('notes_')} {n:,}" for t, n in counts.items()))
    print(f"database after the import: {db_gb:.2f} GiB; load average before / after import / after raw COPY: "
          + " / ".join(load))  # fmt: skip
    print("\n| run | wall s | peak RSS MiB | note |")
    print("|---|---:|---:|---|")
    for r in runs:
        print(
            f"| {r['run']} | {r['wall']:.1f} | {r['peak']:.0f} | {r['note']} (lowest free disk {r['free_gb']:.1f} GiB) |"
        )
    ours = sum(float(r["wall"]) for r in runs)
    print("phases (import runs together): " + ", ".join(f"{k} {v:.1f} s" for k, v in phases.items()))
    print("\n| rows | raw COPY, keys + indexes s | raw COPY, bare s | ours s | ours / raw (keys) | ours / raw (bare) |")
    print("|---|---:|---:|---:|---:|---:|")
    ratings_raw = [r for r in raw if r[0] == "notes_rating"]
    if partial is not None and not ratings_raw:
        print("| (no raw COPY: the import was not killed inside a shard) | | | | | |")
    elif partial is not None and ratings_raw:
        _, rows, keys, bare = ratings_raw[0]
        written, shard_s = _shard_ratings(log, "ratings-00000.tsv")
        ours_r = shard_s * rows / max(written, 1)  # ours pro rata for the rows copied raw
        print(f"| first {rows:,} ratings (ours: ratings-00000.tsv, {written:,} ratings in {shard_s:.1f} s of chunk "
              f"work, pro rata; end steps not included) | {keys:.1f} | {bare:.1f} | {ours_r:.1f} "
              f"| {ours_r / keys:.2f}x | {ours_r / bare:.2f}x |")  # fmt: skip
    else:
        for table, rows, keys, bare in raw:
            print(f"| {table} {rows:,} | {keys:.1f} | {bare:.1f} | | | |")
        keys_all, bare_all = max(sum(r[2] for r in raw), 1e-9), max(sum(r[3] for r in raw), 1e-9)
        if ratings_raw:
            rk = ratings_raw[0][2] + sum(r[2] for r in raw if r[0] == "notes_participant")
            rb = ratings_raw[0][3] + sum(r[3] for r in raw if r[0] == "notes_participant")
            o = phases.get("ratings", 0.0)
            print(
                f"| ratings phase (ratings + participants) | {rk:.1f} | {rb:.1f} | {o:.1f} | {o / rk:.2f}x | {o / rb:.2f}x |"
            )
        print(f"| whole folder (every table) | {keys_all:.1f} | {bare_all:.1f} | {ours:.1f} | {ours / keys_all:.2f}x "
              f"| {ours / bare_all:.2f}x |")  # fmt: skip
    if rescore:
        result, peak = rescore
        base = result["base"]
        print(
            "\n| rescoring | wall s | ratings | notes written | peak RSS MiB | B/rating all in | B/rating above base |"
        )
        print("|---|---:|---:|---:|---:|---:|---:|")
        for label, wall, ratings, written, at_peak in result["runs"]:
            print(f"| {label} | {wall:.1f} | {ratings:,} | {written:,} | {at_peak:.0f} | "
                  f"{at_peak * 2**20 / max(ratings, 1):.1f} | {(at_peak - base) * 2**20 / max(ratings, 1):.1f} |")  # fmt: skip
        print(f"rescoring process: base after django.setup() {base:.0f} MiB, peak {peak:.0f} MiB")


if __name__ == "__main__":
    main()
