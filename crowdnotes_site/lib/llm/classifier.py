"""A locally trained helpfulness judge: sentence embeddings + logistic regression.

Pure module (no ORM): loaders read public Community Notes files into (text, label) pairs,
`train` fits and evaluates on a held-out split, `save`/`load` keep versioned models on
disk (joblib + JSON metadata). The embedding function is passed in (see evidence.embedding.encoder), so
tests can use a cheap one.
"""

from __future__ import annotations

import csv
import datetime as dt
import json
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from crowdnotes_site.lib import status
from crowdnotes_site.lib.hashing import sha256_hex
from crowdnotes_site.lib.text_rules import find_urls, strip_urls

if TYPE_CHECKING:
    from sklearn.linear_model import LogisticRegression

Embed = Callable[[Sequence[str]], np.ndarray]

HELPFUL, NOT_HELPFUL = status.CURRENTLY_RATED_HELPFUL, status.CURRENTLY_RATED_NOT_HELPFUL
LATEST_FILE = "LATEST"


@dataclass(frozen=True)
class LabelledNote:
    note_id: str
    text: str
    helpful: bool
    source: str


# --- Loading crowd labels -----------------------------------------------------------------


def _tsv(path: Path) -> Iterable[dict[str, str]]:
    csv.field_size_limit(1 << 27)
    with path.open(newline="", encoding="utf-8") as fh:
        # QUOTE_NONE: the dumps are plain TSV; note texts contain stray quotes.
        yield from csv.DictReader(fh, delimiter="\t", quoting=csv.QUOTE_NONE)


def load_statuses(data_dir: Path) -> dict[str, str]:
    """noteId -> latest known status, newest source first (read by header name: the
    layouts changed over time)."""
    statuses: dict[str, str] = {}
    for rel in (
        "shiruken/scoredNotes_2023-02-18.tsv",
        "shiruken/scoredNotes_2022-12-10.tsv",
    ):
        path = data_dir / rel
        if path.exists():
            for row in _tsv(path):
                if row.get("ratingStatus"):
                    statuses.setdefault(row["noteId"], row["ratingStatus"])
    path = data_dir / "mcroston/noteStatusHistory-00000.tsv"
    if path.exists():
        for row in _tsv(path):
            if row.get("currentStatus"):
                statuses.setdefault(row["noteId"], row["currentStatus"])
    return statuses


def load_status_labelled_notes(data_dir: Path) -> list[LabelledNote]:
    """Notes whose text we have and whose scorer status is Helpful or Not Helpful."""
    statuses = load_statuses(data_dir)
    out: list[LabelledNote] = []
    notes_path = data_dir / "colin-fraser/notes-00000.tsv"
    if notes_path.exists():
        for row in _tsv(notes_path):
            status = statuses.get(row["noteId"])
            if status in (HELPFUL, NOT_HELPFUL) and row.get("summary"):
                out.append(
                    LabelledNote(
                        row["noteId"],
                        row["summary"],
                        status == HELPFUL,
                        "colin-fraser+status",
                    )
                )
    factgpt = data_dir / "factgpt/tweets_and_notes_backup.json"
    if factgpt.exists():
        for item in json.loads(factgpt.read_text(encoding="utf-8")):
            note = item.get("community_notes") or {}
            status = statuses.get(str(note.get("noteId")))
            if status in (HELPFUL, NOT_HELPFUL) and note.get("summary"):
                out.append(
                    LabelledNote(
                        str(note["noteId"]),
                        note["summary"],
                        status == HELPFUL,
                        "factgpt+status",
                    )
                )
    saveski = data_dir / "saveski/sampled_notes_round_1.csv"
    if saveski.exists():
        with saveski.open(newline="", encoding="utf-8") as fh:
            for row in csv.DictReader(fh):
                # Every note of this sample reached Helpful (note_hours_crh is its delay).
                if row.get("note_full_text") and row.get("note_hours_crh"):
                    out.append(
                        LabelledNote(
                            f"saveski:{row['tweet_id']}",
                            row["note_full_text"],
                            True,
                            "saveski",
                        )
                    )
    return out


def load_ratio_labelled_notes(
    data_dir: Path,
    *,
    min_ratings: int = 5,
    helpful_at: float = 0.84,
    not_helpful_below: float = 0.29,
) -> list[LabelledNote]:
    """Extra labels from raw 2021 ratings with the early Birdwatch ratio rule (helpful share
    >= 0.84 with >= 5 ratings: Helpful; < 0.29: Not Helpful). Weaker than scorer statuses."""
    counts: dict[str, list[int]] = {}
    ratings = data_dir / "colin-fraser/ratings-00000.tsv"
    notes_path = data_dir / "colin-fraser/notes-00000.tsv"
    if not (ratings.exists() and notes_path.exists()):
        return []
    for row in _tsv(ratings):
        c = counts.setdefault(row["noteId"], [0, 0])
        c[0] += int(row.get("helpful") or 0)
        c[1] += 1
    out = []
    for row in _tsv(notes_path):
        helpful, total = counts.get(row["noteId"], (0, 0))
        if total < min_ratings or not row.get("summary"):
            continue
        ratio = helpful / total
        if ratio >= helpful_at or ratio < not_helpful_below:
            out.append(
                LabelledNote(
                    row["noteId"],
                    row["summary"],
                    ratio >= helpful_at,
                    "colin-fraser+ratio",
                )
            )
    return out


def dedupe(examples: Iterable[LabelledNote]) -> list[LabelledNote]:
    """One example per note id and per normalised text (first wins), so the held-out
    split cannot contain a copy of a training note."""
    seen_ids: set[str] = set()
    seen_texts: set[str] = set()
    out = []
    for ex in examples:
        key = " ".join(ex.text.lower().split())
        if ex.note_id in seen_ids or key in seen_texts:
            continue
        seen_ids.add(ex.note_id)
        seen_texts.add(key)
        out.append(ex)
    return out


# --- Model --------------------------------------------------------------------------------


FEATURES = "text-without-urls+url-count-v2"


def judged_form(text: str) -> tuple[str, int]:
    """A training note as the helpfulness stage judges it: its text without URLs, and how
    many URLs it cites (the stage strips URLs from the text and passes them separately)."""
    return strip_urls(text), len(find_urls(text))


def _features(embeddings: np.ndarray, texts: Sequence[str], url_counts: Sequence[int]) -> np.ndarray:
    # Citing a source is a Community Notes criterion the embedding barely sees: the URL
    # count is a feature of its own, taken from the cited URLs, never from the text.
    extra = np.array([[min(n, 3) / 3.0, math.log1p(len(t)) / 6.0] for t, n in zip(texts, url_counts, strict=True)])
    return np.hstack([embeddings, extra])


@dataclass
class HelpfulnessClassifier:
    version: str
    embedding_model: str
    model: LogisticRegression
    embed: Embed | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    def predict_proba_helpful(self, texts: Sequence[str], urls: Sequence[Sequence[str]]) -> list[float]:
        """P(helpful) of each note text (without URLs, as the stage judges it) citing the
        matching list of URLs."""
        if self.embed is None:
            raise RuntimeError("no embedding function attached")
        x = _features(self.embed(list(texts)), texts, [len(u) for u in urls])
        helpful_col = list(self.model.classes_).index(1)
        return [float(p) for p in self.model.predict_proba(x)[:, helpful_col]]


@dataclass(frozen=True)
class Metrics:
    n_examples: int
    n_helpful: int
    n_not_helpful: int
    n_train: int
    n_test: int
    macro_f1: float
    macro_accuracy: float  # mean per-class recall (balanced accuracy)
    accuracy: float
    cv_macro_f1_mean: float
    cv_macro_f1_std: float
    # The same held-out split scored by simple rules, for comparison.
    baselines_macro_f1: dict[str, float] = field(default_factory=dict)


def _fit(x: np.ndarray, y: np.ndarray, c: float, seed: int) -> LogisticRegression:
    # Deferred: scikit-learn (+ scipy) costs ~2 s to import; only training loads it, not every process.
    from sklearn.linear_model import LogisticRegression

    # Balanced class weights: Helpful notes outnumber Not Helpful ones ~4:1.
    return LogisticRegression(C=c, class_weight="balanced", max_iter=2000, random_state=seed).fit(x, y)


def train(
    examples: Sequence[LabelledNote],
    *,
    embed: Embed,
    embedding_model: str,
    test_size: float = 0.25,
    seed: int = 0,
    c: float = 1.0,
    sources: Sequence[str] = (),
    baselines: dict[str, Callable[[str], bool]] | None = None,
) -> tuple[HelpfulnessClassifier, Metrics]:
    """Fit on a stratified split, report held-out macro-F1/macro-accuracy plus 5-fold CV
    macro-F1 (the held-out set is small), then refit on all examples for the saved model."""
    # Deferred: scikit-learn (+ scipy) costs ~2 s to import; only training loads it, not every process.
    from sklearn.metrics import accuracy_score, balanced_accuracy_score, f1_score
    from sklearn.model_selection import StratifiedKFold, train_test_split

    examples = dedupe(examples)
    judged = [judged_form(ex.text) for ex in examples]
    texts = [t for t, _ in judged]
    y = np.array([1 if ex.helpful else 0 for ex in examples])
    if len(set(y.tolist())) < 2 or min(np.bincount(y)) < 4:
        raise ValueError("need at least 4 examples of each class")
    x = _features(np.asarray(embed(texts)), texts, [n for _, n in judged])
    idx = np.arange(len(y))
    tr, te = train_test_split(idx, test_size=test_size, random_state=seed, stratify=y)
    held = _fit(x[tr], y[tr], c, seed)
    pred = held.predict(x[te])
    folds = StratifiedKFold(n_splits=min(5, int(min(np.bincount(y)))), shuffle=True, random_state=seed)
    cv = [f1_score(y[b], _fit(x[a], y[a], c, seed).predict(x[b]), average="macro") for a, b in folds.split(x, y)]
    metrics = Metrics(
        n_examples=len(y),
        n_helpful=int(y.sum()),
        n_not_helpful=int(len(y) - y.sum()),
        n_train=len(tr),
        n_test=len(te),
        macro_f1=float(f1_score(y[te], pred, average="macro")),
        macro_accuracy=float(balanced_accuracy_score(y[te], pred)),
        accuracy=float(accuracy_score(y[te], pred)),
        cv_macro_f1_mean=float(np.mean(cv)),
        cv_macro_f1_std=float(np.std(cv)),
        baselines_macro_f1={
            name: float(f1_score(y[te], [int(rule(examples[i].text)) for i in te], average="macro"))
            for name, rule in (baselines or {}).items()
        },
    )
    final = _fit(x, y, c, seed)
    digest = sha256_hex("\n".join(f"{ex.note_id}:{int(ex.helpful)}" for ex in examples))[:8]
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%d%H%M%S")
    version = f"helpfulness-lr-{stamp}-{digest}"
    meta = {
        "version": version,
        "embedding_model": embedding_model,
        "features": FEATURES,
        "trained_at": dt.datetime.now(dt.UTC).isoformat(),
        "sources": list(sources) or sorted({ex.source for ex in examples}),
        "params": {
            "C": c,
            "test_size": test_size,
            "seed": seed,
            "class_weight": "balanced",
        },
        "metrics": asdict(metrics),
    }
    return HelpfulnessClassifier(version, embedding_model, final, embed, meta), metrics


def save(clf: HelpfulnessClassifier, directory: Path) -> Path:
    """Write <directory>/<version>/{model.joblib, meta.json} and point LATEST at it."""
    # Deferred with scikit-learn: only saving/loading a model needs joblib.
    import joblib

    target = directory / clf.version
    target.mkdir(parents=True, exist_ok=True)
    joblib.dump(clf.model, target / "model.joblib")
    (target / "meta.json").write_text(json.dumps(clf.metadata, indent=2), encoding="utf-8")
    (directory / LATEST_FILE).write_text(clf.version + "\n", encoding="utf-8")
    return target


def latest_version(directory: Path) -> str | None:
    pointer = directory / LATEST_FILE
    return pointer.read_text(encoding="utf-8").strip() if pointer.exists() else None


def load(directory: Path, *, embed: Embed | None = None, version: str | None = None) -> HelpfulnessClassifier | None:
    """The given (or latest) saved model, or None when none was trained."""
    version = version or latest_version(directory)
    if not version or not (directory / version / "model.joblib").exists():
        return None
    meta = json.loads((directory / version / "meta.json").read_text(encoding="utf-8"))
    # Deferred: unpickling the model imports scikit-learn (~2 s); only a process that judges pays it.
    import joblib

    model = joblib.load(directory / version / "model.joblib")
    return HelpfulnessClassifier(version, meta["embedding_model"], model, embed, meta)
