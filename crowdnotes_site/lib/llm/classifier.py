"""The trained helpfulness judge: a linear model learned from the crowd's own final verdicts.

Pure module (no ORM). Training data: the notes of the real Community Notes folder
(`communitynotes.data.real`) with a mature Helpful / Not Helpful status. Inputs, each as the
helpfulness stage has them: the note's text without its URLs (character n-grams, so every
language reads), the URLs it cites (how many, and their kinds as `lib.categories` files them),
its length, the writer's classification, its language and the post's text where known (whether
there is one, and how much of it the note takes up). Unknown inputs (the app's stage knows no
language) have a value of their own, so the model never guesses them.

`evaluate` reports held-out macro-F1, balanced accuracy and n over folds by post and several
seeds, overall, by language, by year and on the notes that cite a URL, each beside the rules
"cites a URL" and "always helpful". The threshold is 0.5 of a class-balanced fit: nothing is
tuned on the held-out notes. `save`/`load` keep versioned models on disk (joblib + JSON).
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from crowdnotes_site.lib.communitynotes.data import real
from crowdnotes_site.lib.communitynotes.supernotes import features as nf
from crowdnotes_site.lib.hashing import sha256_hex
from crowdnotes_site.lib.text_rules import find_urls, strip_urls

if TYPE_CHECKING:
    from scipy.sparse import csr_matrix
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression

LATEST_FILE = "LATEST"
FEATURES = "char-ngrams+urls+sources+length+classification+lang+post-v3"
NOT_MISLEADING = "NOT_MISLEADING"
# The languages with enough verdicts to learn from; any other (or none known) is a value of its own.
LANGS = ("en", "pt", "ja", "es", "fr")
INPUTS = ("text", "urls", "sources", "length", "classification", "lang", "post")
_WORD = re.compile(r"\w{3,}", re.UNICODE)


@dataclass(frozen=True)
class JudgedNote:
    """A note as the helpfulness stage judges it: text without URLs, the cited URLs apart."""

    text: str
    urls: tuple[str, ...] = ()
    post_text: str = ""
    lang: str = ""
    classification: str = ""

    @classmethod
    def from_summary(cls, summary: str, *, post_text: str = "", lang: str = "", classification: str = "") -> JudgedNote:
        # As the training notes are read: entities decoded, link tags dropped (some sources kept X's HTML).
        summary, post_text = real.plain_text(summary), real.plain_text(post_text or "")
        return cls(strip_urls(summary), tuple(find_urls(summary)), post_text, lang or "", classification or "")


def judged_real(note: real.RealNote) -> JudgedNote:
    return JudgedNote.from_summary(
        note.summary, post_text=note.post_text, lang=note.lang, classification=note.classification
    )


# --- Features -----------------------------------------------------------------------------


def _post_share(text: str, post: str) -> float:
    """How much of the post's vocabulary the note uses (0 without a post)."""
    post_words = {w.lower() for w in _WORD.findall(post)}
    if not post_words:
        return 0.0
    return len(post_words & {w.lower() for w in _WORD.findall(text)}) / len(post_words)


def dense_features(note: JudgedNote, inputs: Sequence[str] = INPUTS) -> list[float]:
    """The numeric inputs of one note (each group only when `inputs` names it)."""
    out: list[float] = []
    n = len(note.urls)
    if "urls" in inputs:
        out += [float(n == 0), float(n == 1), float(n >= 2)]
    if "sources" in inputs:
        sources = nf.source_features(list(note.urls))
        out += [sources[k] for k in nf.SOURCES]
    if "length" in inputs:
        out += [math.log1p(len(note.text)), math.log1p(len(note.text.split()))]
    if "classification" in inputs:
        out += [float(note.classification == NOT_MISLEADING), float(note.classification == "")]
    if "lang" in inputs:
        out += [float(note.lang == code) for code in LANGS] + [float(note.lang == "")]
    if "post" in inputs:
        out += [float(bool(note.post_text)), _post_share(note.text, note.post_text)]
    return out


def _dense(notes: Sequence[JudgedNote], inputs: Sequence[str]) -> np.ndarray:
    """(notes, dense inputs): one row of `dense_features` per note."""
    return np.array([dense_features(n, inputs) for n in notes], dtype=float).reshape(len(notes), -1)


def _vectorizer() -> TfidfVectorizer:
    from sklearn.feature_extraction.text import TfidfVectorizer

    return TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 5), min_df=2, sublinear_tf=True, max_features=100_000)


@dataclass
class _Design:
    """What turns notes into the model's input: the fitted n-gram vocabulary and the dense scaling."""

    inputs: tuple[str, ...]
    vectorizer: Any | None
    mean: np.ndarray
    scale: np.ndarray

    @classmethod
    def fit(cls, notes: Sequence[JudgedNote], inputs: Sequence[str]) -> _Design:
        vectorizer = _vectorizer().fit([n.text for n in notes]) if "text" in inputs else None
        dense = _dense(notes, inputs)
        return cls(tuple(inputs), vectorizer, dense.mean(axis=0), dense.std(axis=0) + 1e-6)

    def matrix(self, notes: Sequence[JudgedNote]) -> csr_matrix:
        from scipy import sparse

        dense = _dense(notes, self.inputs)
        blocks = [sparse.csr_matrix((dense - self.mean) / self.scale)]
        if self.vectorizer is not None:
            blocks.insert(0, self.vectorizer.transform([n.text for n in notes]))
        return sparse.hstack(blocks).tocsr()


def _fit(design: _Design, notes: Sequence[JudgedNote], y: np.ndarray, seed: int) -> LogisticRegression:
    # Deferred: scikit-learn (+ scipy) costs ~2 s to import; only training and judging load it.
    from sklearn.linear_model import LogisticRegression

    # Balanced class weights: Helpful verdicts outnumber Not Helpful ones ~6:1; the threshold stays 0.5.
    return LogisticRegression(C=1.0, class_weight="balanced", max_iter=3000, random_state=seed).fit(
        design.matrix(notes), y
    )


@dataclass
class HelpfulnessClassifier:
    version: str
    design: _Design
    model: LogisticRegression
    metadata: dict[str, Any] = field(default_factory=dict)
    threshold: float = 0.5

    def predict_proba(self, notes: Sequence[JudgedNote]) -> list[float]:
        """P(Helpful) of each note."""
        if not notes:
            return []
        helpful_col = list(self.model.classes_).index(1)
        return [float(p) for p in self.model.predict_proba(self.design.matrix(notes))[:, helpful_col]]


def fit(
    notes: Sequence[JudgedNote], helpful: Sequence[bool], *, inputs: Sequence[str] = INPUTS, seed: int = 0
) -> tuple[_Design, LogisticRegression]:
    y = np.array([int(h) for h in helpful])
    if len(set(y.tolist())) < 2 or min(np.bincount(y)) < 2:
        raise ValueError("need at least 2 notes of each verdict (Helpful and Not Helpful)")
    design = _Design.fit(notes, inputs)
    return design, _fit(design, notes, y, seed)


# --- Held-out evaluation --------------------------------------------------------------------


def macro_f1(truth: Sequence[bool] | np.ndarray, predicted: Sequence[bool] | np.ndarray) -> float:
    from sklearn.metrics import f1_score

    return float(
        f1_score(np.asarray(truth, int), np.asarray(predicted, int), average="macro", labels=[0, 1], zero_division=0)
    )


def balanced_accuracy(truth: Sequence[bool] | np.ndarray, predicted: Sequence[bool] | np.ndarray) -> float:
    t, p = np.asarray(truth, bool), np.asarray(predicted, bool)
    recalls = [float((p[t == c] == c).mean()) for c in (True, False) if (t == c).any()]
    return float(np.mean(recalls)) if recalls else float("nan")


RULES: dict[str, Callable[[JudgedNote], bool]] = {
    "cites a URL": lambda n: bool(n.urls),
    "always helpful": lambda n: True,
}


@dataclass(frozen=True)
class Example:
    note: JudgedNote
    helpful: bool
    post: str  # folds are by post: a post's notes are never split between training and test
    year: int
    lang: str


def real_examples(notes: Sequence[real.RealNote]) -> list[Example]:
    """The notes with a mature Helpful / Not Helpful verdict, as training and test examples."""
    return [
        Example(judged_real(n), bool(n.verdict), n.post_id or n.note_id, n.year, n.lang or "unknown")
        for n in real.verdict_notes(notes)
    ]


def _post_folds(examples: Sequence[Example], folds: int, seed: int) -> np.ndarray:
    posts = sorted({e.post for e in examples})
    order = np.random.default_rng(seed).permutation(len(posts))
    fold_of = {posts[i]: k % folds for k, i in enumerate(order)}
    return np.array([fold_of[e.post] for e in examples])


def held_out_scores(
    examples: Sequence[Example], *, seed: int, folds: int = 5, inputs: Sequence[str] = INPUTS
) -> np.ndarray:
    """Each example's P(Helpful) from a model fitted on the other folds' posts only."""
    fold = _post_folds(examples, folds, seed)
    out = np.zeros(len(examples))
    for k in range(folds):
        test = np.flatnonzero(fold == k).tolist()
        train = np.flatnonzero(fold != k).tolist()
        if not test:
            continue
        design, model = fit([examples[i].note for i in train], [examples[i].helpful for i in train], inputs=inputs)
        clf = HelpfulnessClassifier("fold", design, model)
        out[test] = clf.predict_proba([examples[i].note for i in test])
    return out


def _row(name: str, truth: np.ndarray, predicted: np.ndarray) -> dict[str, Any]:
    return {
        "judge": name,
        "n": len(truth),
        "n_not_helpful": int((~truth).sum()),
        "macro_f1": round(macro_f1(truth, predicted), 4),
        "balanced_accuracy": round(balanced_accuracy(truth, predicted), 4),
    }


def _subsets(examples: Sequence[Example], min_n: int) -> dict[str, np.ndarray]:
    """The report's slices: all, the notes that cite a URL, each language and year with min_n notes."""
    out = {
        "all notes": np.ones(len(examples), bool),
        "notes that cite a URL": np.array([bool(e.note.urls) for e in examples]),
    }
    for label, key in (("language", lambda e: e.lang), ("year", lambda e: str(e.year))):
        groups: dict[str, list[int]] = defaultdict(list)
        for i, e in enumerate(examples):
            groups[key(e)].append(i)
        for value, members in sorted(groups.items()):
            if len(members) >= min_n:
                mask = np.zeros(len(examples), bool)
                mask[members] = True
                out[f"{label} {value}"] = mask
    return out


def evaluate(
    examples: Sequence[Example], *, seeds: int = 5, folds: int = 5, inputs: Sequence[str] = INPUTS, min_n: int = 30
) -> dict[str, Any]:
    """Held-out macro-F1 and balanced accuracy (mean over seeds; folds by post), per slice, beside
    the rules. The model's row also carries its spread over seeds."""
    truth = np.array([e.helpful for e in examples])
    per_seed = [held_out_scores(examples, seed=s, folds=folds, inputs=inputs) >= 0.5 for s in range(seeds)]
    slices = []
    for name, mask in _subsets(examples, min_n).items():
        if not mask.any():
            continue
        t = truth[mask]
        model_rows = [_row("model", t, p[mask]) for p in per_seed]
        row = {
            "judge": "trained judge",
            "n": int(mask.sum()),
            "n_not_helpful": int((~t).sum()),
            "macro_f1": round(float(np.mean([r["macro_f1"] for r in model_rows])), 4),
            "macro_f1_sd": round(float(np.std([r["macro_f1"] for r in model_rows])), 4),
            "balanced_accuracy": round(float(np.mean([r["balanced_accuracy"] for r in model_rows])), 4),
        }
        rules = [
            _row(rule, t, np.array([fn(examples[int(i)].note) for i in np.flatnonzero(mask)]))
            for rule, fn in RULES.items()
        ]
        slices.append({"slice": name, "rows": [row, *rules]})
    return {"seeds": seeds, "folds": folds, "inputs": list(inputs), "n": len(examples), "slices": slices}


def ablations(examples: Sequence[Example], *, seeds: int = 3, folds: int = 5) -> list[dict[str, Any]]:
    """Held-out macro-F1 overall and on the notes that cite a URL, with each input left out."""
    truth = np.array([e.helpful for e in examples])
    cites = np.array([bool(e.note.urls) for e in examples])
    out = []
    for left_out in ("", *INPUTS):
        inputs = [i for i in INPUTS if i != left_out]
        scores = [held_out_scores(examples, seed=s, folds=folds, inputs=inputs) >= 0.5 for s in range(seeds)]
        out.append(
            {
                "inputs": "all" if not left_out else f"without {left_out}",
                "macro_f1": round(float(np.mean([macro_f1(truth, p) for p in scores])), 4),
                "macro_f1_cites_url": round(float(np.mean([macro_f1(truth[cites], p[cites]) for p in scores])), 4),
            }
        )
    return out


def table_lines(report: dict[str, Any]) -> list[str]:
    lines = [
        f"held-out over {report['seeds']} seeds x {report['folds']} folds by post; n = {report['n']} notes "
        "with a mature Helpful / Not Helpful verdict",
        "| slice | judge | n | not helpful | macro-F1 | balanced accuracy |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for block in report["slices"]:
        for row in block["rows"]:
            spread = f" ± {row['macro_f1_sd']:.3f}" if "macro_f1_sd" in row else ""
            lines.append(
                f"| {block['slice']} | {row['judge']} | {row['n']} | {row['n_not_helpful']} | "
                f"{row['macro_f1']:.3f}{spread} | {row['balanced_accuracy']:.3f} |"
            )
    return lines


# --- The saved model ----------------------------------------------------------------------


def train(examples: Sequence[Example], *, source: str, seed: int = 0) -> HelpfulnessClassifier:
    """The model on every example (what `evaluate` measured, fitted once on all of it)."""
    design, model = fit([e.note for e in examples], [e.helpful for e in examples], seed=seed)
    digest = sha256_hex("\n".join(f"{e.post}:{int(e.helpful)}:{e.note.text}" for e in examples))[:8]
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%d%H%M%S")
    version = f"helpfulness-real-{stamp}-{digest}"
    meta = {
        "version": version,
        "features": FEATURES,
        "inputs": list(INPUTS),
        "trained_at": dt.datetime.now(dt.UTC).isoformat(),
        "source": source,
        "n": len(examples),
        "n_not_helpful": sum(not e.helpful for e in examples),
        "years": sorted({e.year for e in examples}),
        "threshold": 0.5,
    }
    return HelpfulnessClassifier(version, design, model, meta)


def save(clf: HelpfulnessClassifier, directory: Path) -> Path:
    """Write <directory>/<version>/{model.joblib, meta.json} and point LATEST at it."""
    import joblib

    target = directory / clf.version
    target.mkdir(parents=True, exist_ok=True)
    joblib.dump({"design": clf.design, "model": clf.model}, target / "model.joblib")
    (target / "meta.json").write_text(json.dumps(clf.metadata, indent=2), encoding="utf-8")
    (directory / LATEST_FILE).write_text(clf.version + "\n", encoding="utf-8")
    return target


def latest_version(directory: Path) -> str | None:
    pointer = directory / LATEST_FILE
    return pointer.read_text(encoding="utf-8").strip() if pointer.exists() else None


def load(directory: Path, *, version: str | None = None) -> HelpfulnessClassifier | None:
    """The given (or latest) saved model, or None when none was trained (or it is of an older kind)."""
    version = version or latest_version(directory)
    if not version or not (directory / version / "model.joblib").exists():
        return None
    meta = json.loads((directory / version / "meta.json").read_text(encoding="utf-8"))
    if meta.get("features") != FEATURES:
        return None
    import joblib

    saved = joblib.load(directory / version / "model.joblib")
    return HelpfulnessClassifier(version, saved["design"], saved["model"], meta, float(meta.get("threshold", 0.5)))
