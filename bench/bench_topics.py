"""Accuracy of the offline topic baselines (keywords vs embedding similarity to category
descriptions) on the hand-labelled set tests/data/topics_labelled.jsonl (see tests/data/README.md).

    DEBUG=1 HF_HUB_OFFLINE=1 flock /tmp/heavy.lock .venv/bin/python bench/bench_topics.py

Prints a markdown table: overall accuracy, health-vs-not-health accuracy, per-label recall."""

from __future__ import annotations

import json
import os
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "crowdnotes_site.settings")
DATASET = ROOT / "tests" / "data" / "topics_labelled.jsonl"


def main() -> None:
    import django

    django.setup()
    from crowdnotes_site.lib.llm.steps import topics as step
    from evidence import embedding
    from notes.analytics.topics import topic_value

    rows = [json.loads(line) for line in DATASET.read_text().splitlines() if line.strip()]
    embed = embedding.encoder()
    methods = {
        "keywords-v1": lambda text: step.topic_label_baseline(text=text),
        step.EMBEDDING_NAME: lambda text: step.topic_label_embedding(text=text, embed=embed),
    }
    gold_counts = Counter(r["label"] for r in rows)
    labels = sorted(gold_counts, key=lambda lbl: -gold_counts[lbl])
    print(f"Labelled set: {len(rows)} note texts ({DATASET.relative_to(ROOT)})\n")
    print(
        "| baseline | accuracy | health vs not-health | "
        + " | ".join(f"{lbl} (n={gold_counts[lbl]})" for lbl in labels)
        + " |"
    )
    print("|---|---|---|" + "---|" * len(labels))
    for name, run in methods.items():
        hits: Counter[str] = Counter()
        binary = 0
        for r in rows:
            got = topic_value(run(r["text"]).value)
            hits[r["label"]] += got == r["label"]
            binary += (got == "not_health") == (r["label"] == "not_health")
        total = sum(hits.values())
        cells = " | ".join(f"{hits[lbl]}/{gold_counts[lbl]}" for lbl in labels)
        print(f"| {name} | {total}/{len(rows)} = {total / len(rows):.0%} | {binary / len(rows):.0%} | {cells} |")


if __name__ == "__main__":
    main()
