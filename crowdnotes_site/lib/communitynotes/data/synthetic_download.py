"""A synthetic public Community Notes download: today's schema and file layout, the real
download's shape, planted structure with known answers (pure numpy; no Django).

Shape at scale 1.0 (the March 2026 public snapshot): 2,494,377 notes; 206,052,876 ratings in 8
shards; 2,690,287 status-history rows (the notes plus deleted ones); 1,406,498 enrollment rows;
394,052 note requests. Every count scales linearly with `scale`.

Planted structure (written to synthetic-truth.json beside the files):
- two rater camps (60 % / 40 %) with opposite factors;
- note kinds: "good" (high intercept, factor near 0: Helpful to both camps), "partisan" (one
  camp likes it: stays Needs More Ratings), "bad" (low intercept: Not Helpful);
- ratings per note: log-normal, median 12, mean ≈ 83 (most notes under 20 ratings, a long tail);
  ratings per rater: log-normal activity weights (heavy tail);
- post -> note delays and note -> first verdict delays: log-normal with stated medians;
- spike days: on each, posts (and so notes) arrive at `spike_factor` times the base rate, with
  a spike word in the note texts;
- a few ratings of notes in no file (deleted notes: the scorer drops them, counted).

Ratings are written as bytes assembled in numpy matrices (no per-rating Python objects), in
chunks of notes, so the full shape takes minutes and bounded memory.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import numpy as np

from crowdnotes_site.lib.communitynotes.data import files as download_file
from crowdnotes_site.lib.xids import X_EPOCH_MS

FULL = {
    "notes": 2_494_377,
    "ratings": 206_052_876,
    "status_history": 2_690_287,
    "enrollment": 1_406_498,
    "note_requests": 394_052,
}
RATING_SHARDS = 8
START_MS = 1_672_531_200_000  # 2023-01-01 UTC
DAYS = 790
DAY_MS = 86_400_000
HOUR_MS = 3_600_000
SPIKE_WORDS = ("eclipse", "ballot", "hurricane", "vaccine", "wildfire")
NOTE_KINDS = ("good", "partisan", "bad")

NOTE_COLUMNS = (
    "noteId", "noteAuthorParticipantId", "createdAtMillis", "tweetId", "classification", "believable",
    "harmful", "validationDifficulty", "misleadingOther", "misleadingFactualError",
    "misleadingManipulatedMedia", "misleadingOutdatedInformation", "misleadingMissingImportantContext",
    "misleadingUnverifiedClaimAsFact", "misleadingSatire", "notMisleadingOther",
    "notMisleadingFactuallyCorrect", "notMisleadingOutdatedButNotWhenWritten", "notMisleadingClearlySatire",
    "notMisleadingPersonalOpinion", "trustworthySources", "summary", "isMediaNote",
)  # fmt: skip
HELPFUL_TAGS = (
    "helpfulOther", "helpfulInformative", "helpfulClear", "helpfulEmpathetic", "helpfulGoodSources",
    "helpfulUniqueContext", "helpfulAddressesClaim", "helpfulImportantContext", "helpfulUnbiasedLanguage",
)  # fmt: skip
NOT_HELPFUL_TAGS = (
    "notHelpfulOther", "notHelpfulIncorrect", "notHelpfulSourcesMissingOrUnreliable",
    "notHelpfulOpinionSpeculationOrBias", "notHelpfulMissingKeyPoints", "notHelpfulOutdated",
    "notHelpfulHardToUnderstand", "notHelpfulArgumentativeOrBiased", "notHelpfulOffTopic",
    "notHelpfulSpamHarassmentOrAbuse", "notHelpfulIrrelevantSources", "notHelpfulOpinionSpeculation",
    "notHelpfulNoteNotNeeded",
)  # fmt: skip
RATING_COLUMNS = (
    "noteId", "raterParticipantId", "createdAtMillis", "version", "agree", "disagree", "helpful",
    "notHelpful", "helpfulnessLevel", *HELPFUL_TAGS, *NOT_HELPFUL_TAGS, "ratedOnTweetId",
)  # fmt: skip
STATUS_COLUMNS = (
    "noteId", "noteAuthorParticipantId", "createdAtMillis", "timestampMillisOfFirstNonNMRStatus",
    "firstNonNMRStatus", "timestampMillisOfCurrentStatus", "currentStatus",
    "timestampMillisOfLatestNonNMRStatus", "mostRecentNonNMRStatus", "timestampMillisOfStatusLock",
    "lockedStatus", "timestampMillisOfRetroLock", "currentCoreStatus", "currentExpansionStatus",
    "currentGroupStatus", "currentDecidedBy", "currentModelingGroup",
)  # fmt: skip
ENROLLMENT_COLUMNS = (
    "participantId", "enrollmentState", "successfulRatingNeededToEarnIn", "timestampOfLastStateChange",
    "timestampOfLastEarnOut", "modelingPopulation", "modelingGroup", "numberOfTimesEarnedOut",
)  # fmt: skip
REQUEST_COLUMNS = ("userId", "tweetId", "createdAtMillis", "sourceLink")

LEVELS = (b"NOT_HELPFUL", b"SOMEWHAT_HELPFUL", b"HELPFUL")
POST_DELAY_MEDIAN_H = 6.0  # post -> each note (log-normal, sigma 1.2)
VERDICT_DELAY_MEDIAN_H = 30.0  # note -> first non-NMR status (log-normal, sigma 0.9)
RATING_DELAY_MEDIAN_H = 10.0
UNKNOWN_NOTE_SHARE = 0.001  # ratings of notes in no file
DELETED_NOTE_SHARE = (FULL["status_history"] - FULL["notes"]) / FULL["status_history"]


@dataclass(frozen=True)
class Counts:
    notes: int  # in the notes file
    deleted: int  # in the status history only
    ratings: int  # target (before duplicate removal; the written count is in the truth file)
    enrollment: int
    note_requests: int
    spikes: int

    @classmethod
    def at(cls, scale: float) -> Counts:
        def s(n: int) -> int:
            return max(round(n * scale), 1)

        return cls(
            notes=s(FULL["notes"]),
            deleted=s(FULL["status_history"] - FULL["notes"]),
            ratings=s(FULL["ratings"]),
            enrollment=max(s(FULL["enrollment"]), 50),
            note_requests=s(FULL["note_requests"]),
            spikes=len(SPIKE_WORDS),
        )


def _digits(values: np.ndarray, width: int) -> np.ndarray:
    """Non-negative integers as zero-padded ASCII digits: an (n, width) uint8 matrix."""
    out = np.empty((len(values), width), dtype=np.uint8)
    v = values.astype(np.uint64, copy=True)
    for k in range(width - 1, -1, -1):
        out[:, k] = (v % 10).astype(np.uint8) + 48
        v //= 10
    return out


def _hex_ids(n: int, rng: np.random.Generator) -> np.ndarray:
    """n distinct 64-character upper-case hex participant ids, as an (n, 64) uint8 matrix."""
    raw = rng.integers(0, 16, size=(n, 64), dtype=np.uint8)
    idx = np.arange(n, dtype=np.uint64)
    for k in range(8):  # the first 8 nibbles carry the index (16^8 > any n here): ids are distinct
        raw[:, 7 - k] = ((idx >> np.uint64(4 * k)) & np.uint64(15)).astype(np.uint8)
    table = np.frombuffer(b"0123456789ABCDEF", dtype=np.uint8)
    return table[raw]


def _join_rows(columns: list[np.ndarray]) -> bytes:
    """Rows of tab-separated fields from per-column (n, w) uint8 matrices; zero bytes are padding."""
    n = columns[0].shape[0]
    tab = np.full((n, 1), 9, dtype=np.uint8)
    parts: list[np.ndarray] = []
    for i, col in enumerate(columns):
        parts.append(col)
        parts.append(tab if i < len(columns) - 1 else np.full((n, 1), 10, dtype=np.uint8))
    flat = np.concatenate(parts, axis=1).ravel()
    return flat[flat != 0].tobytes()


def _write_atomic_text(path: Path, header: tuple[str, ...], rows: list[str], zipped: bool) -> None:
    with download_file.write_data(path, zipped=zipped) as fh:
        fh.write(("\t".join(header) + "\n").encode())
        for lo in range(0, len(rows), 10_000):
            fh.write("".join(rows[lo : lo + 10_000]).encode())


def snowflake(ms: np.ndarray, seq: np.ndarray) -> np.ndarray:
    """X ids: (ms - X epoch) << 22 | seq (seq < 2^22)."""
    return ((ms.astype(np.int64) - X_EPOCH_MS) << 22) | (seq.astype(np.int64) & ((1 << 22) - 1))


def generate(
    outdir: str | Path,
    *,
    scale: float = 0.05,
    seed: int = 0,
    note_chunk: int = 10_000,
    progress: Callable[[str], None] | None = None,
    zipped: bool = False,
) -> dict[str, object]:
    """Write the download's files into outdir, each as a TSV or (`zipped`) as X publishes it, a
    zip holding that TSV (the same bytes); returns (and writes) the planted truth."""
    t0 = time.perf_counter()
    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    c = Counts.at(scale)
    say = progress or (lambda _msg: None)
    n_all = c.notes + c.deleted  # deleted notes come last in the note index
    n_raters = c.enrollment

    # Spike days, away from the timeline's edges.
    spike_days = np.sort(rng.choice(np.arange(60, DAYS - 10, 30), size=c.spikes, replace=False))
    spike_factor = 8.0
    # Posts: a daily rate growing over time, boosted on spike days; 1.5 notes per post.
    rate = np.linspace(0.6, 1.4, DAYS)
    rate[spike_days] *= spike_factor
    n_posts = max(int(n_all / 1.5), 1)
    post_day = rng.choice(DAYS, size=n_posts, p=rate / rate.sum())
    # A spike day's posts come in its first 12 hours (a news event), so its notes fall on that day.
    within = np.where(np.isin(post_day, spike_days), DAY_MS // 2, DAY_MS)
    post_ms = START_MS + post_day.astype(np.int64) * DAY_MS + (rng.random(n_posts) * within).astype(np.int64)
    post_of_note = np.sort(rng.integers(0, n_posts, n_all))  # every note on some post
    post_of_note = rng.permutation(post_of_note)
    post_delay_h = np.exp(np.log(POST_DELAY_MEDIAN_H) + 1.2 * rng.standard_normal(n_all))
    note_ms = post_ms[post_of_note] + (post_delay_h * HOUR_MS).astype(np.int64)
    note_id = snowflake(note_ms, np.arange(n_all))
    tweet_id = snowflake(post_ms, np.arange(n_posts))
    spike_word_of_day = {int(d): SPIKE_WORDS[i] for i, d in enumerate(spike_days)}
    note_day = ((note_ms - START_MS) // DAY_MS).astype(np.int64)

    # Raters: camps and heavy-tailed activity.
    camp = (rng.random(n_raters) < 0.4).astype(np.int8)  # 0: majority camp, 1: minority
    rater_factor = np.where(camp == 0, -1.0, 1.0) * rng.uniform(0.5, 1.0, n_raters)
    rater_intercept = rng.normal(0.0, 0.1, n_raters)
    activity = np.exp(1.5 * rng.standard_normal(n_raters))
    cum_activity = np.cumsum(activity / activity.sum())
    cum_activity[-1] = 1.0
    rater_id = _hex_ids(n_raters, rng)

    # Notes: kind, intercept, factor, rating count, classification, author.
    kind = rng.choice(3, size=n_all, p=[0.25, 0.45, 0.30])
    note_intercept = np.select(
        [kind == 0, kind == 1, kind == 2],
        [rng.normal(0.55, 0.08, n_all), rng.normal(0.15, 0.1, n_all), rng.normal(-0.45, 0.1, n_all)],
    )
    note_factor = np.where(
        kind == 1, rng.choice([-1.0, 1.0], n_all) * rng.uniform(0.5, 0.9, n_all), rng.normal(0.0, 0.08, n_all)
    )
    n_ratings = np.exp(np.log(12.0) + 1.97 * rng.standard_normal(n_all))
    cap = min(20_000, n_raters // 2)  # no note is rated by more than half the raters
    for _ in range(8):  # scale to the target total with the cap in force
        n_ratings = np.minimum(n_ratings * (c.ratings / max(n_ratings.sum(), 1.0)), cap)
    n_ratings = np.maximum(np.floor(n_ratings + rng.random(n_all)), 0).astype(np.int64)
    not_misleading = rng.random(n_all) < 0.08
    kind = np.where(not_misleading, 2, kind)  # NOT_MISLEADING notes are never Helpful: planted bad
    note_intercept = np.where(not_misleading, rng.normal(-0.45, 0.1, n_all), note_intercept)
    author = rng.integers(0, n_raters, n_all)

    # Planted first verdicts: decided kinds with at least 5 ratings, after a log-normal delay.
    verdict_h = np.exp(np.log(VERDICT_DELAY_MEDIAN_H) + 0.9 * rng.standard_normal(n_all))
    decided = (kind != 1) & (n_ratings >= 5)
    verdict_ms = np.where(decided, note_ms + (verdict_h * HOUR_MS).astype(np.int64), -1)
    first_status = np.where(kind == 0, "CURRENTLY_RATED_HELPFUL", "CURRENTLY_RATED_NOT_HELPFUL")

    # ---- notes file (the listed notes; deleted ones are in the status history only)
    say(f"notes: {c.notes:,} rows")
    words = np.array(["claim", "photo", "video", "quote", "statistic", "chart", "report", "study"])
    rows = []
    hex_rows = [bytes(r).decode("ascii") for r in rater_id]
    for i in range(c.notes):
        word = spike_word_of_day.get(int(note_day[i]), str(words[i % len(words)]))
        nm = bool(not_misleading[i])
        flags = "0\t" * 7 if nm else "0\t1\t0\t0\t1\t0\t0\t"
        rows.append(
            f"{note_id[i]}\t{hex_rows[author[i]]}\t{note_ms[i]}\t{tweet_id[post_of_note[i]]}\t"
            f"{'NOT_MISLEADING' if nm else 'MISINFORMED_OR_POTENTIALLY_MISLEADING'}\t\t\t\t"
            f"{flags}{'1' if nm else '0'}\t0\t0\t0\t0\t1\t"
            f"Synthetic note {i} on the {word}: context and sources https://example.org/n/{i}\t0\n"
        )
    _write_atomic_text(out / "notes-00000.tsv", NOTE_COLUMNS, rows, zipped)
    del rows

    # ---- status history: every note, listed or deleted
    say(f"noteStatusHistory: {n_all:,} rows")
    rows = []
    for i in range(n_all):
        v = int(verdict_ms[i])
        first = str(first_status[i]) if v > 0 else ""
        current = first or "NEEDS_MORE_RATINGS"
        rows.append(
            f"{note_id[i]}\t{hex_rows[author[i]]}\t{note_ms[i]}\t{v}\t{first}\t{v if v > 0 else note_ms[i]}\t"
            f"{current}\t{v}\t{first}\t-1\t\t-1\t{current}\t\t\t{'CoreModel' if first else ''}\t\n"
        )
    _write_atomic_text(out / "noteStatusHistory-00000.tsv", STATUS_COLUMNS, rows, zipped)
    del rows

    # ---- enrollment and note requests
    say(f"userEnrollment: {n_raters:,} rows")
    states = np.array(["newUser", "earnedIn", "atRisk", "earnedOutNoAcknowledge"])
    state = rng.choice(4, n_raters, p=[0.3, 0.6, 0.05, 0.05])
    changed = START_MS + rng.integers(0, DAYS * DAY_MS, n_raters)
    _write_atomic_text(
        out / "userEnrollment-00000.tsv",
        ENROLLMENT_COLUMNS,
        [f"{hex_rows[u]}\t{states[state[u]]}\t5\t{changed[u]}\t1\tCORE\t{1 + camp[u]}\t0\n" for u in range(n_raters)],
        zipped,
    )
    say(f"noteRequests: {c.note_requests:,} rows")
    req_post = rng.integers(0, n_posts, c.note_requests)
    req_ms = post_ms[req_post] + rng.integers(0, 12 * HOUR_MS, c.note_requests)
    _write_atomic_text(
        out / "noteRequests-00000.tsv",
        REQUEST_COLUMNS,
        [
            f"{hex_rows[int(u)]}\t{tweet_id[p]}\t{ms}\t\n"
            for u, p, ms in zip(
                rng.integers(0, n_raters, c.note_requests).tolist(), req_post.tolist(), req_ms.tolist(), strict=True
            )
        ],
        zipped,
    )

    # ---- ratings, by chunks of notes, each rating to a random shard
    with ExitStack() as files:
        handles = [
            files.enter_context(download_file.write_data(out / f"ratings-{k:05d}.tsv", zipped=zipped))
            for k in range(RATING_SHARDS)
        ]
        written = _write_rating_rows(
            handles, rng, c, n_all, note_id, note_ms, tweet_id[post_of_note], n_ratings, note_intercept,
            note_factor, cum_activity, rater_factor, rater_intercept, rater_id, note_chunk, say,
        )  # fmt: skip

    listed = np.arange(n_all) < c.notes
    truth: dict[str, object] = {
        "seed": seed,
        "scale": scale,
        "notes": c.notes,
        "deleted_notes": c.deleted,
        "status_history_rows": n_all,
        "ratings_written": written["ratings"],
        "ratings_of_unknown_notes": written["unknown"],
        "raters": n_raters,
        "enrollment_rows": n_raters,
        "note_requests": c.note_requests,
        "posts": n_posts,
        "spike_days": [
            str(np.datetime64(START_MS + int(d) * DAY_MS, "ms").astype("datetime64[D]")) for d in spike_days
        ],
        "spike_words": list(SPIKE_WORDS[: len(spike_days)]),
        "spike_factor": spike_factor,
        "post_delay_median_hours": POST_DELAY_MEDIAN_H,
        "verdict_delay_median_hours": VERDICT_DELAY_MEDIAN_H,
        "kind_counts_listed": {k: int(((kind == i) & listed).sum()) for i, k in enumerate(NOTE_KINDS)},
        "notes_under_20_ratings_share": float((n_ratings[listed] < 20).mean()),
        "seconds": round(time.perf_counter() - t0, 1),
    }
    # Per-note planted kind (listed notes), for tests that check statuses against the plant.
    np.save(out / "synthetic-kind.npy", np.stack([note_id, kind.astype(np.int64), n_ratings]))
    (out / "synthetic-truth.json").write_text(json.dumps(truth, indent=1))
    return truth


def _write_rating_rows(
    handles: list[IO[bytes]],
    rng: np.random.Generator,
    c: Counts,
    n_all: int,
    note_id: np.ndarray,
    note_ms: np.ndarray,
    post_id: np.ndarray,
    n_ratings: np.ndarray,
    note_intercept: np.ndarray,
    note_factor: np.ndarray,
    cum_activity: np.ndarray,
    rater_factor: np.ndarray,
    rater_intercept: np.ndarray,
    rater_id: np.ndarray,
    note_chunk: int,
    say: Callable[[str], None],
) -> dict[str, int]:
    header = ("\t".join(RATING_COLUMNS) + "\n").encode()
    for fh in handles:
        fh.write(header)
    level_mat = np.zeros((3, 16), dtype=np.uint8)
    for k, word in enumerate(LEVELS):
        level_mat[k, : len(word)] = np.frombuffer(word, dtype=np.uint8)
    zero, one = np.uint8(48), np.uint8(49)
    total = unknown = 0
    t0 = time.perf_counter()
    for lo in range(0, n_all, note_chunk):
        hi = min(lo + note_chunk, n_all)
        note, rater = _draw_pairs(rng, np.arange(lo, hi), n_ratings[lo:hi], cum_activity)
        n = len(note)
        latent = (
            0.2
            + rater_intercept[rater]
            + note_intercept[note]
            + rater_factor[rater] * note_factor[note]
            + rng.normal(0.0, 0.25, n)
        )
        level = np.where(latent > 0.65, 2, np.where(latent > 0.35, 1, 0)).astype(np.int64)
        delay = np.exp(np.log(RATING_DELAY_MEDIAN_H) + 1.3 * rng.standard_normal(n))
        created = note_ms[note] + (delay * HOUR_MS).astype(np.int64)
        ids = note_id[note].copy()
        lost = rng.random(n) < UNKNOWN_NOTE_SHARE  # a note in no file
        ids[lost] = snowflake(created[lost], np.full(int(lost.sum()), (1 << 22) - 1))
        unknown += int(lost.sum())
        tag_h = np.where(level[:, None] > 0, rng.random((n, len(HELPFUL_TAGS))) < 0.3, False)
        tag_nh = np.where(level[:, None] == 0, rng.random((n, len(NOT_HELPFUL_TAGS))) < 0.12, False)
        empty = np.zeros((n, 0), dtype=np.uint8)
        cols = [
            _digits(ids, 19),
            rater_id[rater],
            _digits(created, 13),
            np.full((n, 1), ord("2"), dtype=np.uint8),
            empty, empty, empty, empty,
            level_mat[level],
            *[np.where(tag_h[:, k : k + 1], one, zero) for k in range(len(HELPFUL_TAGS))],
            *[np.where(tag_nh[:, k : k + 1], one, zero) for k in range(len(NOT_HELPFUL_TAGS))],
            _digits(post_id[note], 19),
        ]  # fmt: skip
        shard = rng.integers(0, RATING_SHARDS, n)
        order = np.argsort(shard, kind="stable")
        bounds = np.searchsorted(shard[order], np.arange(RATING_SHARDS + 1))
        for k in range(RATING_SHARDS):
            sel = order[bounds[k] : bounds[k + 1]]
            if len(sel):
                handles[k].write(_join_rows([col[sel] for col in cols]))
        total += n
        if (lo // note_chunk) % 25 == 0:
            rate = total / max(time.perf_counter() - t0, 1e-9)
            eta = (c.ratings - total) / max(rate, 1.0)
            say(f"ratings: {total:,} written ({rate:,.0f}/s, about {max(eta, 0):,.0f} s left)")
    return {"ratings": total, "unknown": unknown}


def _draw_pairs(
    rng: np.random.Generator, notes: np.ndarray, target: np.ndarray, cum_activity: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Distinct (note, rater) pairs, `target` per note where there are raters enough: raters drawn
    by activity, duplicates dropped and redrawn (three rounds), then each note trimmed to its target."""
    n_raters = len(cum_activity)
    target = np.minimum(target, n_raters)
    pair = np.zeros(0, dtype=np.int64)
    need = target.copy()
    for _ in range(3):
        if not need.any():
            break
        extra = np.ceil(need * 1.3).astype(np.int64)
        note = np.repeat(notes, extra)
        rater = np.searchsorted(cum_activity, rng.random(len(note))).astype(np.int64)
        pair = np.sort(np.concatenate([pair, note * n_raters + rater]))
        pair = pair[np.r_[True, pair[1:] != pair[:-1]]]  # distinct (np.unique's hashing is slower)
        got = np.bincount(pair // n_raters - notes[0], minlength=len(notes))
        need = np.maximum(target - got, 0)
    # pair is sorted by note, then rater index; rater indices are independent of activity, so
    # keeping each note's first `target` pairs is an unbiased trim.
    local = pair // n_raters - notes[0]
    starts = np.r_[0, np.cumsum(np.bincount(local, minlength=len(notes)))[:-1]]
    rank = np.arange(len(pair)) - starts[local]
    pair = pair[rank < target[local]]
    return pair // n_raters, pair % n_raters


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description="Write a synthetic Community Notes download (today's layout).")
    parser.add_argument("outdir")
    parser.add_argument("--scale", type=float, default=0.05, help="1.0 = the full March 2026 download's shape")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--zip",
        action="store_true",
        help="write each file as X publishes it: ratings-00000.zip holding ratings-00000.tsv (no TSV on disk)",
    )
    args = parser.parse_args(argv)
    truth = generate(args.outdir, scale=args.scale, seed=args.seed, progress=print, zipped=args.zip)
    print(json.dumps(truth, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
