"""The revision checks' similarity bounds (notes/living/checks.py) on labelled cases: does a
revision that stays on its post pass, and one about another post or another claim fail?

Run (no database; loads MiniLM):
    .venv/bin/python bench/bench_revision_checks.py [--posts 400]

Cases:
- on the post: real posts with their text and two notes (`../shared/data/communitynotes/real/notes.tsv`):
  the first note as the current text, and as the revision that note with the first sentence of the
  second note added (a revision starts from the current text and adds what suggesters bring);
- rewrite (reported, not used to choose): the second note whole as the "revision" of the first;
- another post: the same current text, with a note of another real post as the "revision";
- another claim, written by hand (bench/data/revision_checks_labelled.jsonl): a revision on the
  post's topic that answers another claim or drops the note's point (the CDC's SIDS finding for a
  note on intermittent fasting, and the like), with four on-the-post revisions beside them.
Posts are split by a hash of their id: the bounds are chosen on the first half (each the highest
value that keeps 95% of its on-the-post cases) and reported on the second half and the hand cases.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import re
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from evidence import embedding  # noqa: E402
from notes.living import checks  # noqa: E402

REAL = ROOT.parent / "shared" / "data" / "communitynotes" / "real" / "notes.tsv"
HAND = ROOT / "bench" / "data" / "revision_checks_labelled.jsonl"
KEEP = 0.95  # share of on-the-post cases a bound must keep (training half)


def _first_sentence(text: str) -> str:
    return re.split(r"(?<=[.!?])\s+", text.strip(), maxsplit=1)[0]


def real_cases(path: Path, limit: int) -> list[dict[str, str]]:
    """(post, current, candidate, label, half) from posts with text and two or more English notes."""
    csv.field_size_limit(1 << 24)
    by_post: dict[str, tuple[str, list[str]]] = {}
    with path.open(encoding="utf-8", newline="") as f:
        for row in csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE):
            if not row["postText"].strip() or not row["summary"].strip() or row["lang"] not in ("", "en"):
                continue
            post = by_post.setdefault(row["tweetId"], (row["postText"], []))
            post[1].append(row["summary"])
    posts = sorted(
        (pid for pid, (_t, notes) in by_post.items() if len(notes) >= 2),
        key=lambda pid: hashlib.sha256(pid.encode()).hexdigest(),
    )[:limit]
    cases = []
    for k, pid in enumerate(posts):
        text, notes = by_post[pid]
        half = "choose" if int(hashlib.sha256(pid.encode()).hexdigest(), 16) % 2 == 0 else "report"
        other = by_post[posts[(k + 1) % len(posts)]][1][0]
        added = f"{notes[0]} {_first_sentence(notes[1])}"
        cases.append({"post": text, "current": notes[0], "candidate": added, "kind": "on the post", "half": half})
        cases.append({"post": text, "current": notes[0], "candidate": notes[1], "kind": "rewrite", "half": half})
        cases.append({"post": text, "current": notes[0], "candidate": other, "kind": "another post", "half": half})
    return cases


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--posts", type=int, default=400, help="real posts with two notes to use")
    args = parser.parse_args()
    cases = real_cases(REAL, args.posts)
    for line in HAND.read_text(encoding="utf-8").splitlines():
        if line.strip():
            cases.append({**json.loads(line), "half": "hand"})

    texts = sorted({t for c in cases for t in (c["post"], c["current"], c["candidate"])})
    vectors = dict(zip(texts, embedding.encode(texts, model=checks.MODEL), strict=True))

    def embed(batch: Sequence[str]) -> np.ndarray:
        return np.stack([vectors[t] for t in batch])

    sims = np.array([checks.similarities(embed, post_text=c["post"], current_text=c["current"],
                                         candidate=c["candidate"]) for c in cases])  # fmt: skip
    kinds = np.array([c["kind"] for c in cases])
    halves = np.array([c["half"] for c in cases])
    choose_on = (halves == "choose") & (kinds == "on the post")
    bound_post = float(np.quantile(sims[choose_on, 0], 1 - KEEP))
    bound_text = float(np.quantile(sims[choose_on, 1], 1 - KEEP))
    print(f"bounds chosen on {int(choose_on.sum())} on-the-post cases of the first half (keep {KEEP:.0%}): "
          f"post >= {bound_post:.3f}, current text >= {bound_text:.3f}")  # fmt: skip
    print(f"bounds in notes/living/checks.py: post >= {checks.MIN_POST_SIMILARITY}, "
          f"current text >= {checks.MIN_TEXT_SIMILARITY}\n")  # fmt: skip
    print("| half | cases | n | passes 'about the post' | passes 'keeps the point' | passes both |")
    print("|---|---|---:|---:|---:|---:|")
    for half in ("choose", "report", "hand"):
        for kind in ("on the post", "rewrite", "another post", "another claim"):
            rows = (halves == half) & (kinds == kind)
            n = int(rows.sum())
            if not n:
                continue
            a = sims[rows, 0] >= checks.MIN_POST_SIMILARITY
            b = sims[rows, 1] >= checks.MIN_TEXT_SIMILARITY
            print(f"| {half} | {kind} | {n} | {a.mean():.1%} | {b.mean():.1%} | {(a & b).mean():.1%} |")
    print("\nhand cases (cosine with the post, with the current text):")
    for c, (to_post, to_note) in zip(cases, sims, strict=True):
        if c["half"] == "hand":
            print(f"- {c['kind']}: {to_post:.3f}, {to_note:.3f}: {c['candidate'][:70]}")


if __name__ == "__main__":
    main()
