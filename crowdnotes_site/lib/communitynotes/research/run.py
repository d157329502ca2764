"""The research path over the whole public download folder (pure: no Django, no database).

    python -m crowdnotes_site.lib.communitynotes.research.run FOLDER        (or: manage.py research_download FOLDER)

Steps, each resumable (its outputs are written to temporary names and renamed, then a step
record; a rerun skips a step whose record names the same inputs):
1. convert: the TSVs (each a .tsv, or X's .zip of it, read from the zip) to Parquet in
   FOLDER/columnar (crowdnotes_site.lib.communitynotes.data.columnar; only the files whose size or mtime
   changed);
2. score: the core scorer (the same statuses as score_communitynotes) -> scored_notes.tsv,
   helpfulness_scores.tsv;
3. delays: the CrowdNotes+ delay table (post -> first note, note -> first verdict, note -> first
   Helpful, never left Needs More Ratings), with breakdowns by first verdict, classification and
   creation month -> delays.json, delays_by_month.tsv; definitions of crowdnotes_site.lib.communitynotes.research.delays;
4. spikes: daily notes with the rolling threshold and the spikes with their trending terms
   (crowdnotes_site.lib.communitynotes.research.spikes) -> spikes_daily.tsv, spikes.json.
Outputs go to FOLDER/research (or --out).
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import resource
import shutil
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq

from crowdnotes_site.lib.communitynotes.data import columnar
from crowdnotes_site.lib.communitynotes.data import scorer_input as scoring_tsv
from crowdnotes_site.lib.communitynotes.research import delays, outputs, spikes
from crowdnotes_site.lib.xids import X_EPOCH_MS

STEPS = ("convert", "score", "delays", "spikes")
SCORE_RATE_ESTIMATE = 400_000  # ratings/s for the estimate before scoring (about the scorer's rate: bench/README.md)
HELPFUL = "CURRENTLY_RATED_HELPFUL"
NOT_HELPFUL = "CURRENTLY_RATED_NOT_HELPFUL"


def peak_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _inputs_key(col: Path) -> str:
    """What the steps after convert read: the columnar manifests (source size and mtime, rows)."""
    h = hashlib.sha256()
    for m in sorted(col.glob("*.parquet.json")):
        h.update(m.name.encode())
        h.update(m.read_bytes())
    return h.hexdigest()


def step_state(folder: str | Path, step: str, out: str | Path | None = None) -> str:
    """ "current" (the step's record names the columnar form as it is now), "stale" (it ran on an
    earlier one) or "missing" (it never finished): for the commands that read a step's outputs."""
    rec = (Path(out) if out else Path(folder) / "research") / "steps" / f"{step}.json"
    if not rec.exists():
        return "missing"
    saved = json.loads(rec.read_text())
    return "current" if saved.get("inputs") == _inputs_key(Path(folder) / "columnar") else "stale"


def _write(path: Path, text: str) -> None:
    columnar.atomic_write_text(path, text)


def _snowflake_ms(ids: np.ndarray) -> np.ndarray:
    return (ids.astype(np.int64) >> 22) + X_EPOCH_MS


def _hours(ms: np.ndarray) -> np.ndarray:
    return ms.astype(np.float64) / delays.HOUR_MS


# ---------------------------------------------------------------- delays


def delay_tables(col: Path) -> dict[str, Any]:
    """The delay table from the columnar notes and status history (vectorised; the same
    definitions and numbers as crowdnotes_site.lib.communitynotes.research.delays.delays_from_rows on the TSVs)."""
    notes = pq.read_table(
        sorted(col.glob("notes-*.parquet")), columns=["note_id", "created_at_ms", "tweet_id", "not_misleading"]
    )
    n_id = np.asarray(notes["note_id"].to_numpy(), dtype=np.int64)
    n_created = np.asarray(notes["created_at_ms"].to_numpy(), dtype=np.int64)
    tweet = np.asarray(notes["tweet_id"].to_numpy(), dtype=np.int64)
    n_nm = np.asarray(notes["not_misleading"].to_numpy(), dtype=bool)
    n_ms = np.where(n_created > 0, n_created, _snowflake_ms(n_id))
    # post -> first note: per post, the earliest note time minus the post's time.
    has_post = tweet > 0
    t, ms = tweet[has_post], n_ms[has_post]
    order = np.lexsort((ms, t))
    first = np.r_[True, t[order][1:] != t[order][:-1]]
    post_first = order[first]
    post_hours = _hours(ms[post_first] - _snowflake_ms(t[post_first]))
    post_month = _months(_snowflake_ms(t[post_first]))

    status_paths = sorted(col.glob("noteStatusHistory-*.parquet"))
    hist = pq.read_table(status_paths, columns=["note_id", "created_at_ms", "first_non_nmr_ms", "first_non_nmr_status"])
    h_id = np.asarray(hist["note_id"].to_numpy(), dtype=np.int64)
    h_created = np.asarray(hist["created_at_ms"].to_numpy(), dtype=np.int64)
    first_ms = np.asarray(hist["first_non_nmr_ms"].to_numpy(), dtype=np.int64)
    first_status = np.asarray(hist["first_non_nmr_status"].to_numpy(zero_copy_only=False), dtype=object)
    # A status row's note time: its createdAtMillis, else the notes file's, else the id's time.
    sorter = np.argsort(n_id, kind="stable")
    pos = np.searchsorted(n_id, h_id, sorter=sorter).clip(max=max(len(n_id) - 1, 0))
    in_notes = (n_id[sorter[pos]] == h_id) if len(n_id) else np.zeros(len(h_id), dtype=bool)
    from_notes = np.where(in_notes, n_created[sorter[pos]] if len(n_id) else 0, 0)
    created = np.where(h_created > 0, h_created, from_notes)
    h_ms = np.where(created > 0, created, _snowflake_ms(h_id))
    decided = first_ms > 0
    verdict_hours = _hours(first_ms - h_ms)
    h_nm = np.where(in_notes, n_nm[sorter[pos]] if len(n_id) else False, False)
    month = _months(h_ms)

    def verdict_block(sel: np.ndarray) -> dict[str, Any]:
        n = int(sel.sum())
        return {
            "note_to_first_verdict_hours": delays.percentiles(verdict_hours[sel & decided]).as_dict(),
            "never_left_nmr_share": float((sel & ~decided).sum() / n) if n else None,
            "notes": n,
        }

    everything = np.ones(len(h_id), dtype=bool)
    helpful_first = np.array([s == HELPFUL for s in first_status.tolist()], dtype=bool)
    not_helpful_first = np.array([s == NOT_HELPFUL for s in first_status.tolist()], dtype=bool)
    table: dict[str, Any] = {
        "post_to_first_note_hours": delays.percentiles(post_hours).as_dict(),
        **verdict_block(everything),
        "note_to_first_helpful_hours": delays.percentiles(verdict_hours[decided & helpful_first]).as_dict(),
        "note_to_first_not_helpful_hours": delays.percentiles(verdict_hours[decided & not_helpful_first]).as_dict(),
        "posts": len(post_hours),
        "by_classification": {
            "misleading": verdict_block(in_notes & ~h_nm),
            "not_misleading": verdict_block(in_notes & h_nm),
            "not_in_notes_file": verdict_block(~in_notes),
        },
        "definitions": (
            "crowdnotes_site.lib.communitynotes.research.delays: note time = createdAtMillis, else the note id's time; post -> first "
            "note per post; note -> first verdict = timestampMillisOfFirstNonNMRStatus - note time; "
            "note -> first Helpful = the same for notes whose first non-NMR status was Helpful; negative "
            "delays counted in n_negative, left out of the percentiles"
        ),
    }
    months = sorted(set(month.tolist()) | set(post_month.tolist()))
    rows = []
    for m in months:
        sel = month == m
        v = verdict_block(sel)
        p = delays.percentiles(post_hours[post_month == m])
        rows.append(
            {
                "month": m,
                "notes": v["notes"],
                "never_left_nmr_share": v["never_left_nmr_share"],
                "note_to_first_verdict_p50_hours": v["note_to_first_verdict_hours"]["p50"],
                "note_to_first_helpful_p50_hours": delays.percentiles(verdict_hours[sel & decided & helpful_first]).p50,
                "posts": p.n,
                "post_to_first_note_p50_hours": p.p50,
            }
        )
    table["by_month"] = rows
    return table


def _months(ms: np.ndarray) -> np.ndarray:
    return ms.astype("datetime64[ms]").astype("datetime64[M]").astype(str)


# ---------------------------------------------------------------- spikes


def spike_tables(col: Path, *, window: int = spikes.WINDOW_DAYS, k: float = spikes.K_SIGMA) -> dict[str, Any]:
    """Notes per creation day (UTC) with the rolling threshold, and the spikes with the trending
    terms of their note texts (crowdnotes_site.lib.communitynotes.research.spikes: the analytics page's rules)."""
    notes = pq.read_table(sorted(col.glob("notes-*.parquet")), columns=["note_id", "created_at_ms"])
    n_id = np.asarray(notes["note_id"].to_numpy(), dtype=np.int64)
    created = np.asarray(notes["created_at_ms"].to_numpy(), dtype=np.int64)
    ms = np.where(created > 0, created, _snowflake_ms(n_id))
    day = ms // 86_400_000
    if not len(day):
        return {"window": window, "k": k, "rule": spikes.rule_text("notes"), "days": [], "spikes": []}
    first = int(day.min())
    counts = np.bincount(day - first)
    days = [dt.date(1970, 1, 1) + dt.timedelta(days=first + i) for i in range(len(counts))]
    series, found = spikes.detect(days, counts.tolist(), window=window, k=k)
    # Texts only for the days the trending terms read (each spike's 3 days and its baseline).
    wanted: set[int] = set()
    for s in found:
        wanted.update(range(s.index - 1 - window, s.index + 2))
    texts_by_day: dict[dt.date, list[str]] = defaultdict(list)
    if wanted:
        text = pq.read_table(sorted(col.glob("notes-*.parquet")), columns=["summary"])["summary"].to_pylist()
        rel = day - first
        for i in np.flatnonzero(np.isin(rel, np.fromiter(wanted, dtype=np.int64))).tolist():
            texts_by_day[days[int(rel[i])]].append(text[i])
    out_spikes = [
        {
            "day": s.day.isoformat(),
            "count": s.count,
            "mean": round(s.mean, 3),
            "std": round(s.std, 3),
            "threshold": round(s.threshold, 3),
            "terms": [list(t) for t in spikes.trending_terms(texts_by_day, s.day, window=window)],
        }
        for s in found
    ]
    return {
        "window": window,
        "k": k,
        "rule": spikes.rule_text("notes"),
        "days": [
            (d.isoformat(), c, None if m is None else round(m, 3), None if t is None else round(t, 3))
            for d, c, m, t in zip(series.days, series.counts, series.rolling_mean, series.threshold, strict=True)
        ],
        "spikes": out_spikes,
    }


# ---------------------------------------------------------------- the run


class Run:
    def __init__(self, folder: Path, out: Path, say: Callable[[str], None]) -> None:
        self.folder, self.out, self.say = folder, out, say
        self.col = folder / "columnar"
        (out / "steps").mkdir(parents=True, exist_ok=True)

    def _record(self, step: str) -> Path:
        return self.out / "steps" / f"{step}.json"

    def done(self, step: str, key: str) -> dict[str, Any] | None:
        rec = self._record(step)
        if rec.exists():
            saved: dict[str, Any] = json.loads(rec.read_text())
            if saved.get("inputs") == key:
                return saved
        return None

    def finish(self, step: str, key: str, t0: float, rows: int, summary: dict[str, Any]) -> dict[str, Any]:
        seconds = time.perf_counter() - t0
        rec = {"step": step, "inputs": key, "seconds": round(seconds, 2), "rows": rows,
               "rows_per_s": round(rows / max(seconds, 1e-9)), "peak_rss_bytes": peak_rss_bytes(), **summary}  # fmt: skip
        _write(self._record(step), json.dumps(rec, indent=1, default=str))
        self.say(
            f"{step}: {rows:,} rows in {seconds:,.1f} s ({rec['rows_per_s']:,} rows/s), peak RSS {rec['peak_rss_bytes'] / 2**30:.2f} GiB"
        )
        return rec

    def convert(self) -> dict[str, Any]:
        t0 = time.perf_counter()
        done = columnar.convert(self.folder, self.say)
        converted = [d for d in done if not d.reused]
        rows = sum(d.rows for d in converted)
        skipped: dict[str, int] = defaultdict(int)
        for d in done:
            for reason, n in d.skipped.items():
                skipped[f"{Path(d.source).name}: {reason}"] += n
        unknown = {Path(d.source).name: d.unknown_columns for d in done if d.unknown_columns}
        return self.finish("convert", _inputs_key(self.col), t0, rows, {
            "files_converted": len(converted), "files_kept": len(done) - len(converted),
            "skipped_rows": dict(skipped), "unknown_columns": unknown,
            "columnar_bytes": columnar.disk_bytes(self.col),
        })  # fmt: skip

    def score(self, key: str) -> dict[str, Any]:
        t0 = time.perf_counter()
        total = sum(pq.ParquetFile(p).metadata.num_rows for p in sorted(self.col.glob("ratings-*.parquet")))
        self.say(f"score: {total:,} ratings; expected about {total / SCORE_RATE_ESTIMATE:,.0f} s "
                 f"(at ~{SCORE_RATE_ESTIMATE:,} ratings/s)")  # fmt: skip
        data = columnar.load(self.col)
        t_load = time.perf_counter() - t0
        self.say(f"score: loaded {total:,} ratings in {t_load:,.1f} s ({total / max(t_load, 1e-9):,.0f} rows/s), "
                 f"peak RSS {peak_rss_bytes() / 2**30:.2f} GiB; fitting")  # fmt: skip
        part = self.out / "score.part"
        shutil.rmtree(part, ignore_errors=True)
        summary = scoring_tsv.score_loaded(data, part)
        for name in ("scored_notes.tsv", "helpfulness_scores.tsv"):
            (part / name).replace(self.out / name)
        part.rmdir()
        # The page's status counts are the written file's: the scorer's own counts also hold notes
        # known only from ratings (deleted notes), which scored_notes.tsv leaves out.
        statuses = outputs.status_counts(self.out / "scored_notes.tsv")
        summary["statuses"] = statuses
        summary.update(statuses)
        summary["seconds_load"] = round(t_load, 2)
        summary["ratings_read"] = total
        return self.finish("score", key, t0, total, summary)

    def delays(self, key: str) -> dict[str, Any]:
        t0 = time.perf_counter()
        table = delay_tables(self.col)
        lines = ["\t".join(table["by_month"][0].keys())] if table["by_month"] else []
        lines += ["\t".join("" if v is None else str(v) for v in r.values()) for r in table["by_month"]]
        _write(self.out / "delays_by_month.tsv", "\n".join(lines) + "\n")
        _write(self.out / "delays.json", json.dumps(table, indent=1))
        return self.finish("delays", key, t0, int(table["notes"]), {
            "post_to_first_note_p50_hours": table["post_to_first_note_hours"]["p50"],
            "note_to_first_helpful_p50_hours": table["note_to_first_helpful_hours"]["p50"],
        })  # fmt: skip

    def spikes(self, key: str) -> dict[str, Any]:
        t0 = time.perf_counter()
        table = spike_tables(self.col)
        lines = ["day\tnotes\trolling_mean\tthreshold\tspike"]
        spike_days = {s["day"] for s in table["spikes"]}
        lines += [
            f"{d}\t{c}\t{'' if m is None else m}\t{'' if t is None else t}\t{int(d in spike_days)}"
            for d, c, m, t in table["days"]
        ]
        _write(self.out / "spikes_daily.tsv", "\n".join(lines) + "\n")
        _write(self.out / "spikes.json", json.dumps({k: v for k, v in table.items() if k != "days"}, indent=1))
        return self.finish(
            "spikes", key, t0, sum(c for _d, c, _m, _t in table["days"]), {"spikes": len(table["spikes"])}
        )


def run(folder: str | Path, *, out: str | Path | None = None, only: tuple[str, ...] = STEPS,
        say: Callable[[str], None] = print) -> dict[str, dict[str, Any]]:  # fmt: skip
    """Run the steps in order (those in `only`), skipping any already done on the same inputs."""
    src = Path(folder)
    r = Run(src, Path(out) if out else src / "research", say)
    results: dict[str, dict[str, Any]] = {}
    if "convert" in only:
        results["convert"] = r.convert()
    key = _inputs_key(r.col)
    if not key or not any(r.col.glob("ratings-*.parquet")):
        raise columnar.DownloadError(f"{r.col}: no columnar form yet; run the convert step first")
    for step in ("score", "delays", "spikes"):
        if step not in only:
            continue
        earlier = r.done(step, key)
        if earlier is not None:
            say(f"{step}: done earlier on the same inputs ({earlier['seconds']} s), kept")
            results[step] = earlier
            continue
        if r.done(step, "") is None and r._record(step).exists():
            say(
                f"{step}: the download changed since its last run (a converted file differs); running it again "
                "over all files (the fit and the tables are global: no part of them is per file)"
            )
        results[step] = getattr(r, step)(key)
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "folder",
        help="the download folder (notes-*, ratings-*, noteStatusHistory-*, ...: each a .tsv or X's .zip of it)",
    )
    parser.add_argument("--out", help="outputs (default FOLDER/research)")
    parser.add_argument("--only", nargs="+", choices=STEPS, default=list(STEPS), help="run only these steps")
    args = parser.parse_args(argv)
    try:
        run(args.folder, out=args.out, only=tuple(args.only))
    except columnar.DownloadError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
