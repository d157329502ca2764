"""Compare crowdnotes_site/lib/communitynotes/scoring/ with the reference core scorer (twitter/communitynotes MFCoreScorer).

The reference is not part of this project: give its checkout and a Python that can run it
(pandas + torch). This script drives the reference through its public classes in a separate
process; no reference code is copied here.

    /work/venv/bin/python bench/compare_reference.py \
        --ref /work/ref/communitynotes --ref-python /work/refvenv/bin/python \
        --dataset colin-fraser --dataset synthetic --workdir /tmp/cn-compare

For each dataset it writes the inputs, scores them with ours and with the reference, and prints
correlation / max |diff| of note and rater intercepts and factors, and status agreement.
"""

from __future__ import annotations

import argparse
import csv
import itertools
import json
import math
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import cast

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from crowdnotes_site.lib import status as names  # noqa: E402
from crowdnotes_site.lib.communitynotes import scoring  # noqa: E402
from crowdnotes_site.lib.communitynotes.data import ratings as cnr  # noqa: E402
from crowdnotes_site.lib.communitynotes.data import scorer_input as scoring_tsv  # noqa: E402
from crowdnotes_site.lib.communitynotes.data import synthetic  # noqa: E402
from crowdnotes_site.lib.communitynotes.data import tsv as cio  # noqa: E402
from crowdnotes_site.lib.communitynotes.scoring import pipeline, rules, solver  # noqa: E402

SHARED = ROOT.parent.parent / "shared" / "data" / "communitynotes"
DISPLAYED = {names.FIRM_REJECT: names.NEEDS_MORE_RATINGS, names.NEEDS_YOUR_HELP: names.NEEDS_MORE_RATINGS}


# ------------------------------------------------------------------ reference worker (refvenv)


def _reference_inputs(
    notes_path: Path, ratings_path: Path, outdir: Path, history_path: Path | None = None
) -> dict[str, Path]:
    """Rewrite public TSVs in the exact column layout the reference's loader expects."""
    import numpy as np
    import scoring.constants as c  # the reference package, importable in the worker only

    def default(col: str, mapping: dict[str, object]) -> str:
        dtype = mapping.get(col)
        if dtype in (np.int64, np.int32, np.int8, np.int16, "Int64", "Int8"):
            return "0"
        return ""

    outdir.mkdir(parents=True, exist_ok=True)
    paths = {k: outdir / f"{k}.tsv" for k in ("notes", "ratings", "status", "enrollment")}
    notes = list(cio.ReadReport().rows(cio.read_notes(notes_path)))
    tweet_of = {n.note_id: n.tweet_id for n in notes}
    participants: set[str] = set()
    with paths["notes"].open("w", newline="") as fh:
        w = csv.writer(fh, delimiter="\t", lineterminator="\n", quoting=csv.QUOTE_NONE, escapechar="\\")
        w.writerow(c.noteTSVColumns)
        for n in notes:
            participants.add(n.author_id)
            values = {
                "noteId": n.note_id,
                "noteAuthorParticipantId": n.author_id,
                "createdAtMillis": n.created_at_ms,
                "tweetId": n.tweet_id or "0",
                "classification": n.classification,
                "trustworthySources": int(bool(n.trustworthy_sources)),
                "summary": n.summary.replace("\t", " ").replace('"', "'"),
                "isMediaNote": 0,
                "isCollaborativeNote": 0,
            }
            w.writerow([values.get(col, default(col, c.noteTSVTypeMapping)) for col in c.noteTSVColumns])
    with paths["ratings"].open("w", newline="") as fh:
        w = csv.writer(fh, delimiter="\t", lineterminator="\n")
        w.writerow(c.publicRatingTSVColumns)
        for r in cio.ReadReport().rows(cnr.read_ratings(ratings_path)):
            participants.add(r.rater_id)
            row: dict[str, object] = {
                "noteId": r.note_id,
                "raterParticipantId": r.rater_id,
                "createdAtMillis": r.created_at_ms,
                "version": 2,
                "helpfulnessLevel": r.level,
                "ratedOnTweetId": tweet_of.get(r.note_id, "0") or "0",
                "ratingSourceBucketed": "DEFAULT",
            }
            for tag in r.tags:
                row[tag] = 1
            w.writerow([row.get(col, default(col, c.publicRatingTSVTypeMapping)) for col in c.publicRatingTSVColumns])
    with paths["status"].open("w", newline="") as fh:
        w = csv.writer(fh, delimiter="\t", lineterminator="\n")
        w.writerow(c.noteStatusHistoryTSVColumns)
        history = {}
        if history_path is not None:
            history = {h.note_id: h for h in cio.ReadReport().rows(cio.read_status_history(history_path))}
        for n in notes:
            values = {
                "noteId": n.note_id,
                "noteAuthorParticipantId": n.author_id,
                "createdAtMillis": n.created_at_ms,
                "currentStatus": names.NEEDS_MORE_RATINGS,
            }
            h = history.get(n.note_id)
            if h is not None:
                # Status and timing columns of the (possibly older) status history, by name.
                values.update(
                    {
                        "currentStatus": h.current_status or names.NEEDS_MORE_RATINGS,
                        "firstNonNMRStatus": h.first_non_nmr_status,
                        "timestampMillisOfFirstNonNMRStatus": h.first_non_nmr_ms or "",
                        "timestampMillisOfCurrentStatus": h.current_status_ms or "",
                        "timestampMillisOfLatestNonNMRStatus": h.most_recent_non_nmr_ms or "",
                        "mostRecentNonNMRStatus": h.most_recent_non_nmr_status,
                    }
                )
            w.writerow(
                [
                    values.get(col, default(col, c.noteStatusHistoryTSVTypeMapping))
                    for col in c.noteStatusHistoryTSVColumns
                ]
            )
    with paths["enrollment"].open("w", newline="") as fh:
        w = csv.writer(fh, delimiter="\t", lineterminator="\n")
        w.writerow(c.userEnrollmentTSVColumns)
        for p in sorted(participants):
            # Everyone in modeling group 13, the group the core scorer initialises from.
            values = {
                "participantId": p,
                "enrollmentState": "earnedIn",
                "successfulRatingNeededToEarnIn": 5,
                "timestampOfLastStateChange": 0,
                "timestampOfLastEarnOut": 1,
                "modelingPopulation": "CORE",
                "modelingGroup": 13,
                "numberOfTimesEarnedOut": 0,
            }
            w.writerow(
                [values.get(col, default(col, c.userEnrollmentTSVTypeMapping)) for col in c.userEnrollmentTSVColumns]
            )
    return paths


def run_reference_worker(
    notes_path: Path,
    ratings_path: Path,
    outdir: Path,
    seed: int,
    history_path: Path | None = None,
    pseudoraters: bool = True,
) -> None:
    """Runs inside the reference's Python: prescore + final score with MFCoreScorer only."""
    import logging

    import pandas as pd
    import scoring.constants as c
    from scoring.mf_core_scorer import MFCoreScorer
    from scoring.process_data import LocalDataLoader

    paths = _reference_inputs(notes_path, ratings_path, outdir / "ref_inputs", history_path)
    # The reference's own log (epochs and loss of each Adam fit) goes to the worker's stderr,
    # which main() keeps as <dataset>-ref.log; fit_log() reads it back.
    logging.basicConfig(level=logging.INFO, format="%(name)s %(message)s")
    t0 = time.perf_counter()
    loader = LocalDataLoader(
        str(paths["notes"]), str(paths["ratings"]), str(paths["status"]), str(paths["enrollment"]), True,
        normalizeParticipantIds=True,
    )  # fmt: skip
    _notes, ratings, history, enrollment = loader.get_data()
    ratings[c.correlatedRaterKey] = False
    ratings = ratings.sort_values([c.highVolumeRaterKey, c.correlatedRaterKey], kind="stable").reset_index(drop=True)
    topics = pd.DataFrame({c.noteIdKey: pd.Series([], dtype="int64"), c.noteTopicKey: pd.Series([], dtype=object)})
    # saveIntermediateState keeps the first-round fit and the reputation filter's inputs and
    # outputs on the scorer, for reputation_check below.
    scorer = MFCoreScorer(
        seed=seed, pseudoraters=pseudoraters, useStableInitialization=True, saveIntermediateState=True
    )
    pre = scorer.prescore(c.PrescoringArgs(topics, ratings, history, enrollment))
    note_out = pre.scoredNotes.copy()
    note_out[c.scorerNameKey] = scorer.get_name()
    rater_out = pre.helpfulnessScores.copy()
    rater_out[c.scorerNameKey] = scorer.get_name()
    meta = c.PrescoringMetaOutput(metaScorerOutput={scorer.get_name(): pre.metaScores})
    final = scorer.score_final(
        c.FinalScoringArgs(topics, ratings, history, enrollment, note_out, rater_out, meta, None)
    )
    elapsed = time.perf_counter() - t0
    reverse = loader.get_participant_id_reverse_mapping() or {}
    sn = final.scoredNotes
    keep = [c.noteIdKey, c.coreNoteInterceptKey, c.coreNoteFactor1Key, c.coreRatingStatusKey]
    keep += [col for col in (c.coreActiveRulesKey, c.coreNoteInterceptMaxKey) if col in sn.columns]
    sn[keep].to_csv(outdir / "scored_notes.tsv", sep="\t", index=False)
    hs = final.helpfulnessScores[[c.raterParticipantIdKey, c.coreRaterInterceptKey, c.coreRaterFactor1Key]].copy()
    hs[c.raterParticipantIdKey] = hs[c.raterParticipantIdKey].map(lambda v: reverse.get(v, v))
    hs.to_csv(outdir / "helpfulness_scores.tsv", sep="\t", index=False)
    (outdir / "timing.json").write_text(json.dumps({"seconds": elapsed, "ratings": len(ratings)}))
    # The prescoring fit (after the reputation filter), to check the solver on identical data.
    pn = pre.scoredNotes[[c.noteIdKey, c.internalNoteInterceptKey, c.internalNoteFactor1Key]]
    pn.to_csv(outdir / "prescoring_notes.tsv", sep="\t", index=False)
    pr = pre.helpfulnessScores[[c.raterParticipantIdKey, c.internalRaterInterceptKey, c.internalRaterFactor1Key]].copy()
    pr[c.raterParticipantIdKey] = pr[c.raterParticipantIdKey].map(lambda v: reverse.get(v, v))
    pr.to_csv(outdir / "prescoring_raters.tsv", sep="\t", index=False)
    (outdir / "prescoring_meta.json").write_text(json.dumps({"mu": pre.metaScores.globalIntercept}))

    # The first-round fit (before the reputation filter), the preliminary statuses computed from
    # it and the reputation filter's verdict per rater (reputation_check).
    def ids(frame: pd.DataFrame, col: str) -> pd.DataFrame:
        frame = frame.copy()
        frame[col] = frame[col].map(lambda v: reverse.get(v, v))
        return frame

    scorer.noteParamsUnfiltered[[c.noteIdKey, c.internalNoteInterceptKey, c.internalNoteFactor1Key]].to_csv(
        outdir / "first_round_notes.tsv", sep="\t", index=False
    )
    ids(
        scorer.raterParamsUnfiltered[[c.raterParticipantIdKey, c.internalRaterInterceptKey, c.internalRaterFactor1Key]],
        c.raterParticipantIdKey,
    ).to_csv(outdir / "first_round_raters.tsv", sep="\t", index=False)
    scorer.prescoringScoredNotes[[c.noteIdKey, c.internalRatingStatusKey]].to_csv(
        outdir / "first_round_statuses.tsv", sep="\t", index=False
    )
    ids(
        scorer.helpfulnessScores[[c.raterParticipantIdKey, c.aboveHelpfulnessThresholdKey]], c.raterParticipantIdKey
    ).to_csv(outdir / "reputation.tsv", sep="\t", index=False)


# ------------------------------------------------------------------ comparison (project venv)


def _read_table(path: Path, key: str) -> dict[str, dict[str, str]]:
    with path.open(newline="") as fh:
        return {row[key]: row for row in csv.DictReader(fh, delimiter="\t")}


def _num(value: str | None) -> float:
    try:
        return float(value) if value not in (None, "") else math.nan
    except ValueError:
        return math.nan


def _stats(pairs: list[tuple[float, float]]) -> tuple[int, float, float]:
    pairs = [(a, b) for a, b in pairs if not (math.isnan(a) or math.isnan(b))]
    if len(pairs) < 2:
        return len(pairs), math.nan, math.nan
    xs, ys = zip(*pairs, strict=True)
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    sxy = sum((x - mx) * (y - my) for x, y in pairs)
    sxx = sum((x - mx) ** 2 for x in xs)
    syy = sum((y - my) ** 2 for y in ys)
    corr = sxy / math.sqrt(sxx * syy) if sxx > 0 and syy > 0 else math.nan
    return len(pairs), corr, max(abs(x - y) for x, y in pairs)


def compare(ours_dir: Path, ref_dir: Path) -> dict[str, object]:
    ours_n = _read_table(ours_dir / "scored_notes.tsv", "noteId")
    ref_n = _read_table(ref_dir / "scored_notes.tsv", "noteId")
    ours_r = _read_table(ours_dir / "helpfulness_scores.tsv", "raterParticipantId")
    ref_r = _read_table(ref_dir / "helpfulness_scores.tsv", "raterParticipantId")
    common = [k for k in ref_n if k in ours_n]
    out: dict[str, object] = {}
    for label, col in (("note intercept", "coreNoteIntercept"), ("note factor", "coreNoteFactor1")):
        out[label] = _stats([(_num(ours_n[k][col]), _num(ref_n[k][col])) for k in common])
    raters = [k for k in ref_r if k in ours_r]
    for label, col in (("rater intercept", "coreRaterIntercept"), ("rater factor", "coreRaterFactor1")):
        out[label] = _stats([(_num(ours_r[k][col]), _num(ref_r[k][col])) for k in raters])
    ref_scored = {k for k in ref_n if not math.isnan(_num(ref_n[k]["coreNoteIntercept"]))}
    ours_scored = {k for k in ours_n if not math.isnan(_num(ours_n[k]["coreNoteIntercept"]))}
    ref_raters = {k for k in ref_r if not math.isnan(_num(ref_r[k]["coreRaterFactor1"]))}
    ours_raters = {k for k in ours_r if not math.isnan(_num(ours_r[k]["coreRaterFactor1"]))}
    out["notes scored (ours/ref/both)"] = (len(ours_scored), len(ref_scored), len(ours_scored & ref_scored))
    out["raters scored (ours/ref/both)"] = (len(ours_raters), len(ref_raters), len(ours_raters & ref_raters))

    def shown(row: dict[str, str]) -> str:  # a no-op for ours; compare() also takes two reference runs
        raw = row["coreRatingStatus"] or names.NEEDS_MORE_RATINGS
        return DISPLAYED.get(raw, raw)

    agree = 0
    confusion: Counter[tuple[str, str]] = Counter()
    causes: Counter[tuple[str, str]] = Counter()
    for k in common:
        mine, theirs = shown(ours_n[k]), shown(ref_n[k])
        ref_raw = ref_n[k]["coreRatingStatus"] or names.NEEDS_MORE_RATINGS
        agree += mine == theirs
        if mine != theirs:
            confusion[(mine, ref_raw)] += 1
            # Which of our rules decided, and the reference's last active rule.
            ref_rule = (ref_n[k].get("coreActiveRules") or "").split(",")[-1].strip()
            causes[(ours_n[k].get("decidedBy", ""), ref_rule)] += 1
    out["status agreement"] = (agree, len(common))
    out["status disagreements (ours, reference)"] = dict(confusion)
    out["disagreements by deciding rule (ours, reference)"] = dict(causes.most_common(12))
    table: Counter[tuple[str, str]] = Counter((shown(ours_n[k]), shown(ref_n[k])) for k in common)
    out["confusion (ours, reference displayed)"] = dict(table)
    out["status counts ours"] = dict(Counter(ours_n[k]["coreRatingStatus"] for k in common))
    out["status counts ref"] = dict(Counter(ref_n[k]["coreRatingStatus"] for k in common))
    return out


def solver_check(ref_dir: Path) -> dict[str, object]:
    """Fit our solver on exactly the reference's prescoring training set and compare the
    optimum reached (loss and parameters) with the reference's Adam fit."""
    import numpy as np

    notes = _read_table(ref_dir / "prescoring_notes.tsv", "noteId")
    raters = _read_table(ref_dir / "prescoring_raters.tsv", "raterParticipantId")
    mu_ref = json.loads((ref_dir / "prescoring_meta.json").read_text())["mu"]
    notes = {k: v for k, v in notes.items() if not math.isnan(_num(v["internalNoteIntercept"]))}
    raters = {k: v for k, v in raters.items() if not math.isnan(_num(v["internalRaterIntercept"]))}
    n_index = {k: i for i, k in enumerate(notes)}
    r_index = {k: i for i, k in enumerate(raters)}
    u_l, n_l, y_l = [], [], []
    for r in cio.ReadReport().rows(cnr.read_ratings(ref_dir / "ref_inputs" / "ratings.tsv")):
        u, n = r_index.get(r.rater_id), n_index.get(str(r.note_id))
        if u is not None and n is not None:
            u_l.append(u)
            n_l.append(n)
            y_l.append(r.value)
    u_a, n_a, y = np.array(u_l), np.array(n_l), np.array(y_l)
    present_u, present_n = np.bincount(u_a, minlength=len(raters)) > 0, np.bincount(n_a, minlength=len(notes)) > 0
    cfg = scoring.ScoringConfig(tol=1e-7, max_iter=5000)
    ref = scoring.MFParams(
        mu_ref,
        np.array([_num(v["internalRaterIntercept"]) for v in raters.values()]),
        np.array([_num(v["internalRaterFactor1"]) for v in raters.values()]),
        np.array([_num(v["internalNoteIntercept"]) for v in notes.values()]),
        np.array([_num(v["internalNoteFactor1"]) for v in notes.values()]),
    )
    if not (present_u.all() and present_n.all()):
        return {"solver check": "reference training set could not be rebuilt"}
    ours = scoring.flip_for_identification(scoring.fit_mf(u_a, n_a, y, len(raters), len(notes), cfg))
    warm = scoring.flip_for_identification(scoring.fit_mf(u_a, n_a, y, len(raters), len(notes), cfg, init=ref))
    loss_ref = scoring.mf_loss(ref, u_a, n_a, y, cfg)
    return {
        "training ratings": len(y),
        "loss reference (Adam)": loss_ref,
        "loss ours (ALS, cold start)": scoring.mf_loss(ours, u_a, n_a, y, cfg),
        "loss ours (ALS from the reference's solution)": scoring.mf_loss(warm, u_a, n_a, y, cfg),
        "mu ours / ref": (ours.mu, mu_ref),
        "note intercept": _stats(list(zip(ours.note_intercept.tolist(), ref.note_intercept.tolist(), strict=True))),
        "note factor": _stats(list(zip(ours.note_factor.tolist(), ref.note_factor.tolist(), strict=True))),
        "rater factor": _stats(list(zip(ours.rater_factor.tolist(), ref.rater_factor.tolist(), strict=True))),
    }


def reputation_check(notes_path: Path, ratings_path: Path, ref_dir: Path) -> dict[str, object]:
    """Our preliminary status rules and rater reputation filter applied to the reference's own
    first-round fit, against the reference's preliminary statuses and kept raters; then the
    reference's first-round fit against ours on the same training set, and the final statuses
    we get when our pipeline starts from the reference's first-round fit (diagnostic only)."""
    import numpy as np

    if not (ref_dir / "first_round_notes.tsv").exists():
        return {"reputation check": "no first-round files (re-run the reference with this script)"}
    data = scoring_tsv.load(notes_path, ratings_path)
    ratings, meta, cfg = data.ratings, data.meta, scoring.ScoringConfig()
    n_raters, n_notes = len(data.participant_ids), meta.n_notes
    note_index = {str(n): i for i, n in enumerate(data.note_ids)}
    rater_index = {p: i for i, p in enumerate(data.participant_ids)}
    ni, nf = np.full(n_notes, np.nan), np.full(n_notes, np.nan)
    ri, rf = np.full(n_raters, np.nan), np.full(n_raters, np.nan)
    for k, row in _read_table(ref_dir / "first_round_notes.tsv", "noteId").items():
        ni[note_index[k]], nf[note_index[k]] = _num(row["internalNoteIntercept"]), _num(row["internalNoteFactor1"])
    for k, row in _read_table(ref_dir / "first_round_raters.tsv", "raterParticipantId").items():
        u = rater_index[k]
        ri[u], rf[u] = _num(row["internalRaterIntercept"]), _num(row["internalRaterFactor1"])
    codes = scoring_tsv.STATUS_CODES
    ref_prelim = {
        note_index[k]: codes[row["internalRatingStatus"]]
        for k, row in _read_table(ref_dir / "first_round_statuses.tsv", "noteId").items()
    }
    num_ratings = np.bincount(ratings.note, minlength=n_notes)
    prelim = scoring.compute_statuses(
        note_intercept=ni, note_factor=nf, num_ratings=num_ratings, meta=meta,
        sides=rules._side_stats(ratings, rf, n_notes), cfg=cfg, final_round=False,
    )  # fmt: skip
    same = sum(int(prelim[i]) == s for i, s in ref_prelim.items())
    kept = set(np.flatnonzero(scoring.rater_reputation(ratings, meta, ni, prelim, n_raters, cfg)).tolist())
    ref_kept = {
        rater_index[k]
        for k, row in _read_table(ref_dir / "reputation.tsv", "raterParticipantId").items()
        if row["aboveHelpfulnessThreshold"] == "True"
    }
    # The first-round training set, the reference's fit on it (μ at its optimum given the rest)
    # and ours.
    train = scoring.filter_ratings(ratings.rater, ratings.note, n_raters, n_notes, cfg)
    u_c, u_orig = solver._compact(ratings.rater[train], n_raters)
    n_c, n_orig = solver._compact(ratings.note[train], n_notes)
    y = ratings.value[train]
    resid = y - ri[u_orig][u_c] - ni[n_orig][n_c] - rf[u_orig][u_c] * nf[n_orig][n_c]
    ref_fit = scoring.MFParams(
        float(resid.mean() / (1 + cfg.lambda_intercept)), ri[u_orig], rf[u_orig], ni[n_orig], nf[n_orig]
    )
    ours = scoring.flip_for_identification(scoring.fit_mf(u_c, n_c, y, len(u_orig), len(n_orig), cfg))
    # Our whole pipeline, but with the reference's first-round fit in place of ours.
    real_fit = pipeline._fit_subset
    first = [True]

    def with_reference_first_round(
        r: scoring.Ratings, mask: np.ndarray, nr: int, nn: int, c: scoring.ScoringConfig, init: object = None
    ) -> tuple[scoring.MFParams, np.ndarray, np.ndarray]:
        if first[0]:
            first[0] = False
            _p, r_o, n_o = real_fit(r, mask, nr, nn, c, None)
            return scoring.MFParams(ref_fit.mu, ri[r_o], rf[r_o], ni[n_o], nf[n_o]), r_o, n_o
        return real_fit(r, mask, nr, nn, c, init)  # type: ignore[arg-type]

    pipeline._fit_subset = with_reference_first_round  # type: ignore[assignment]
    try:
        injected = scoring.score(ratings, meta, n_raters, cfg)
    finally:
        pipeline._fit_subset = real_fit  # type: ignore[assignment]
    ref_final = _read_table(ref_dir / "scored_notes.tsv", "noteId")
    names_by_code = {v: k for k, v in scoring_tsv.STATUS_CODES.items()}
    agree = sum(
        names_by_code[int(injected.status[note_index[k]])]
        == DISPLAYED.get(row["coreRatingStatus"], row["coreRatingStatus"])
        for k, row in ref_final.items()
    )
    return {
        "preliminary statuses equal (our rules on the reference's first-round fit)": (same, len(ref_prelim)),
        "raters kept by the reputation filter (ours on that fit / ref / both)": (
            len(kept),
            len(ref_kept),
            len(kept & ref_kept),
        ),
        "first-round loss, reference's fit / ours": (
            scoring.mf_loss(ref_fit, u_c, n_c, y, cfg),
            scoring.mf_loss(ours, u_c, n_c, y, cfg),
        ),
        "first-round mu, reference / ours": (ref_fit.mu, ours.mu),
        "first-round note intercept, ours vs reference": _stats(
            list(zip(ours.note_intercept.tolist(), ni[n_orig].tolist(), strict=True))
        ),
        "final statuses equal when we start from the reference's first-round fit": (agree, len(ref_final)),
    }


def fit_log(log_path: Path) -> list[tuple[float, int, float]]:
    """(learning rate, epochs, final loss) of each Adam fit, in order, from the reference's log."""
    fits: list[tuple[float, int, float]] = []
    lr, epochs = math.nan, -1
    if not log_path.exists():
        return fits
    for line in log_path.read_text().splitlines():
        words = line.split()
        if "learning rate set to :" in line:
            lr, epochs = float(line.rsplit(":", 1)[1]), -1
        elif "Num epochs:" in line:
            epochs = int(words[-1])
        elif epochs >= 0 and len(words) == 4 and words[1] == "epoch" and words[2] == str(epochs):
            fits.append((lr, epochs, float(words[3])))
            epochs = -1
    return fits


def _print(name: str, result: dict[str, object], times: dict[str, float]) -> None:
    print(f"\n## {name}")
    print(f"time: ours {times['ours']:.2f} s, reference {times['ref']:.2f} s")
    print(f"{'quantity':<18} {'n':>7} {'corr':>9} {'max|diff|':>10}")
    for label in ("note intercept", "note factor", "rater intercept", "rater factor"):
        n, corr, diff = cast(tuple[int, float, float], result[label])
        print(f"{label:<18} {n:>7} {corr:>9.6f} {diff:>10.2e}")
    for key in (
        "notes scored (ours/ref/both)",
        "raters scored (ours/ref/both)",
        "status agreement",
        "status disagreements (ours, reference)",
        "disagreements by deciding rule (ours, reference)",
        "confusion (ours, reference displayed)",
        "status counts ours",
        "status counts ref",
    ):
        print(f"{key}: {result[key]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ref", type=Path, help="checkout of twitter/communitynotes")
    parser.add_argument("--ref-python", default="/work/refvenv/bin/python")
    parser.add_argument("--dataset", action="append", choices=["colin-fraser", "synthetic"])
    parser.add_argument("--synthetic-ratings", type=int, default=50_000)
    parser.add_argument("--workdir", type=Path, default=ROOT / "var" / "cn-compare")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--ref-seed", type=int, action="append",
        help="seed of the reference's own run (its torch initialisation); repeat to run it several times on the "
        "same files and compare the runs with each other (default: --seed)",
    )  # fmt: skip
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--notes", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--ratings", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--outdir", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--status-history", type=Path, help="for colin-fraser: a noteStatusHistory TSV (e.g. mcroston)")
    parser.add_argument(
        "--no-pseudoraters", action="store_true", help="reference without its confidence bounds (production has them)"
    )
    parser.add_argument(
        "--reuse-reference", action="store_true", help="keep the reference's outputs already in --workdir"
    )
    args = parser.parse_args()
    if args.worker:
        run_reference_worker(
            args.notes, args.ratings, args.outdir, args.seed, args.status_history, not args.no_pseudoraters
        )
        return
    for name in args.dataset or ["colin-fraser", "synthetic"]:
        work = args.workdir / name
        if name == "colin-fraser":
            notes_path = SHARED / "colin-fraser" / "notes-00000.tsv"
            ratings_path = SHARED / "colin-fraser" / "ratings-00000.tsv"
        else:
            data = synthetic.generate(args.synthetic_ratings, seed=args.seed)
            notes_path, ratings_path = synthetic.write_tsv(data, work / "input")
        t0 = time.perf_counter()
        history = args.status_history if name == "colin-fraser" else None
        scoring_tsv.score_files(
            notes_path=notes_path, ratings_path=ratings_path, outdir=work / "ours", status_history_path=history
        )
        t_ours = time.perf_counter() - t0
        env = {**os.environ, "PYTHONPATH": f"{args.ref / 'scoring' / 'src'}:{ROOT}"}
        ref_seeds = args.ref_seed or [args.seed]
        # The first reference run keeps the old layout (ref/, <name>-ref.log); others get a suffix.
        runs = [(s, "" if i == 0 else f"-seed{s}") for i, s in enumerate(ref_seeds)]
        for ref_seed, suffix in runs:
            ref_dir = work / f"ref{suffix}"
            if args.reuse_reference and (ref_dir / "timing.json").exists():
                continue
            subprocess.run(
                [args.ref_python, __file__, "--worker", "--notes", str(notes_path), "--ratings", str(ratings_path),
                 "--outdir", str(ref_dir), "--seed", str(ref_seed)]
                + (["--status-history", str(history)] if history else [])
                + (["--no-pseudoraters"] if args.no_pseudoraters else []),
                check=True, env=env, stdout=subprocess.DEVNULL,
                stderr=open(work.parent / f"{name}-ref{suffix}.log", "w"),
            )  # fmt: skip
        t_ref = json.loads((work / "ref" / "timing.json").read_text())["seconds"]
        _print(name, compare(work / "ours", work / "ref"), {"ours": t_ours, "ref": t_ref})
        for ref_seed, suffix in runs:
            fits = fit_log(work.parent / f"{name}-ref{suffix}.log")
            print(f"reference seed {ref_seed}: Adam fits (learning rate, epochs, final loss): {fits}")
        # Ours against every other run, and every two reference runs against each other.
        sides = [("ours", work / "ours")] + [(f"reference seed {s}", work / f"ref{x}") for s, x in runs]
        for (label, left), (other_label, right) in itertools.combinations(sides, 2):
            if left == work / "ours" and right == work / "ref":
                continue  # printed in full above
            other = compare(left, right)
            print(
                f"{label} vs {other_label}: statuses equal {other['status agreement']}, "
                f"note intercept (n, r, max|diff|) {other['note intercept']}, "
                f"confusion {other['confusion (ours, reference displayed)']}"
            )
        print("solver check on the reference's prescoring training set (corr, max|diff|):")
        for key, value in solver_check(work / "ref").items():
            print(f"  {key}: {value}")
        print("reputation check on the reference's first-round fit:")
        for key, value in reputation_check(notes_path, ratings_path, work / "ref").items():
            print(f"  {key}: {value}")


if __name__ == "__main__":
    main()
