"""The personalized helpfulness model (PHM), pure torch (CPU unless trained with `device=`): P(helpful),
P(somewhat), P(not helpful) for a (post, note, rater) triple.

Inputs: the note embedding, the post embedding (zeros plus a "no post text" flag when the post has
no text), the note's features (`crowdnotes_site.lib.communitynotes.supernotes.features`: sources, length and specificity,
classification and reasons, the writer's record; standardised with the training data's mean and
spread, which are saved with the model) and the rater's intercept and factor from the scorer. The
note tower maps a note to a small hidden vector h; the head sees [h, i_u, f_u, f_u·h], so the
rater's factor can flip how a note's "side" is received (the structure of the matrix-factorization
model).

Also here: the held-out AUC (helpful vs not helpful), the calibration table, save/load with a
format number, the inputs and a description of the training data (a model saved in an older
format is refused, never misread), and `hashing_embed` (a text-free bag-of-words embedding for
tests and offline runs; labelled as such in the model's metadata).

torch loads inside the functions that build, train, run, save or load a net (it costs seconds to
import): importing this module, as the Supernotes services and the web process do, loads numpy only.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from crowdnotes_site.lib.communitynotes.supernotes import features as note_features

if TYPE_CHECKING:
    import torch
    from torch import nn

HIDDEN = 32
CALIBRATION_BINS = 10
EVAL_ROWS = 65_536  # held-out ratings per forward pass when measuring AUC
# Version 2: the note features (and their standardisation) joined the inputs. A model saved in
# another format has other inputs: `load` refuses it.
FORMAT = 2


class OldModelError(ValueError):
    """A stored PHM of another format (its inputs differ): retrain it."""


@functools.cache
def _net_class() -> type[nn.Module]:
    """The PHMNet class, defined on the first net: it subclasses torch's nn.Module."""
    import torch
    from torch import nn

    class PHMNet(nn.Module):
        def __init__(self, dim: int, n_features: int = 0, hidden: int = HIDDEN, dropout: float = 0.0) -> None:
            super().__init__()
            self.note = nn.Sequential(
                nn.Dropout(dropout), nn.Linear(2 * dim + 1 + n_features, hidden), nn.ReLU(), nn.Linear(hidden, hidden),
                nn.Tanh(),
            )  # fmt: skip
            self.head = nn.Sequential(nn.Linear(2 * hidden + 2, hidden), nn.ReLU(), nn.Linear(hidden, 3))

        def note_hidden(
            self, note_emb: torch.Tensor, post_emb: torch.Tensor, has_post: torch.Tensor, feats: torch.Tensor
        ) -> torch.Tensor:
            return self.note(torch.cat([note_emb, post_emb, has_post[:, None], feats], dim=1))

        def logits(self, h: torch.Tensor, ri: torch.Tensor, rf: torch.Tensor) -> torch.Tensor:
            return self.head(torch.cat([h, ri[..., None], rf[..., None], rf[..., None] * h], dim=-1))

        def grid_logits(self, h: torch.Tensor, ri: torch.Tensor, rf: torch.Tensor) -> torch.Tensor:
            """`logits` for every (note, rater) pair: h (C, H), ri and rf (J,) or (C, J) -> (C, J, 3).
            The head's first layer is linear in [h, ri, rf, rf·h], so its note parts are computed once
            per note, not once per pair (the same numbers as `logits` on the expanded grid, 2-3x faster)."""
            first, hidden = self.head[0], h.shape[1]
            assert isinstance(first, nn.Linear)
            w = first.weight  # (H', 2H + 2): columns for h, ri, rf, rf·h
            per_note = h @ w[:, :hidden].T + first.bias  # (C, H')
            times_rf = h @ w[:, hidden + 2 :].T  # (C, H')
            c = h.shape[0]
            ri3 = ri.expand(c, ri.shape[-1])[..., None]
            rf3 = rf.expand(c, rf.shape[-1])[..., None]
            pre = per_note[:, None, :] + ri3 * w[:, hidden] + rf3 * (w[:, hidden + 1] + times_rf[:, None, :])
            return self.head[2](self.head[1](pre))

    return PHMNet


def PHMNet(dim: int, n_features: int = 0, hidden: int = HIDDEN, dropout: float = 0.0) -> Any:
    """The network (a torch nn.Module): a note tower (the note and post embeddings, the no-post flag
    and the note features to a hidden vector h) and a head ([h, i_u, f_u, f_u·h] to three logits)."""
    return _net_class()(dim, n_features, hidden, dropout)


@dataclass
class TrainingData:
    """Ratings as rows: note index into `note_emb`/`post_emb`/`note_features`, rater parameters,
    label (0 helpful, 1 somewhat, 2 not helpful). `feature_names` names the columns of
    `note_features` (raw values; the model standardises them)."""

    note_emb: np.ndarray  # (N_notes, D)
    post_emb: np.ndarray  # (N_notes, D), zeros where the post has no text
    has_post: np.ndarray  # (N_notes,)
    note: np.ndarray  # (R,)
    rater_intercept: np.ndarray  # (R,)
    rater_factor: np.ndarray  # (R,)
    label: np.ndarray  # (R,)
    note_features: np.ndarray | None = None  # (N_notes, F)
    feature_names: list[str] = field(default_factory=list)

    def features(self) -> np.ndarray:
        if self.note_features is None:
            return np.zeros((len(self.note_emb), 0), dtype=np.float32)
        return np.asarray(self.note_features, dtype=np.float32)


@dataclass
class PHMMeta:
    version: str
    embedder: str
    dim: int
    trained_on: str
    n_ratings: int
    n_notes: int
    holdout_ratings: int
    auc: float
    calibration: list[dict[str, Any]]
    train_seconds: float
    epochs: int
    extra: dict[str, Any] = field(default_factory=dict)
    format: int = FORMAT
    inputs: list[str] = field(default_factory=list)  # what the model sees, in words
    features: list[str] = field(default_factory=list)  # the note feature columns, in order
    feature_mean: list[float] = field(default_factory=list)
    feature_std: list[float] = field(default_factory=list)
    hidden: int = HIDDEN


def describe_inputs(embedder: str, feature_names: Sequence[str]) -> list[str]:
    groups = [g for g, names in note_features.GROUPS.items() if set(names) <= set(feature_names)]
    return [f"note text embedding ({embedder})", "post text embedding (zeros when the post has no text)",
            *(f"note features: {g}" for g in groups), "rater intercept and factor (scorer)"]  # fmt: skip


@dataclass
class PHM:
    net: Any  # a PHMNet
    meta: PHMMeta

    def standardise(self, raw: np.ndarray | None, rows: int) -> np.ndarray:
        n = len(self.meta.features)
        if n == 0:
            return np.zeros((rows, 0), dtype=np.float32)
        if raw is None or raw.shape != (rows, n):
            got = None if raw is None else raw.shape
            raise ValueError(f"this PHM needs {n} note features per note ({', '.join(self.meta.features)}); got {got}")
        mean, std = np.asarray(self.meta.feature_mean), np.asarray(self.meta.feature_std)
        return ((raw - mean) / std).astype(np.float32)

    def probabilities(
        self,
        note_emb: np.ndarray,
        post_emb: np.ndarray | None,
        rater_intercept: np.ndarray,
        rater_factor: np.ndarray,
        note_features: np.ndarray | None = None,
    ) -> np.ndarray:
        """(C, J, 3) probabilities for C notes (one post, or `post_emb` per note) and J raters.
        `note_features`: (C, F) raw values of `meta.features` (required when the model has any).

        Inputs go to the device the net lives on and the result comes back with .cpu()."""
        import torch

        with torch.no_grad():
            device = model_device(self.net)
            ne = torch.as_tensor(np.asarray(note_emb, dtype=np.float32), device=device)
            c = ne.shape[0]
            fe = torch.as_tensor(self.standardise(note_features, c), device=device)
            if post_emb is None:
                pe = torch.zeros_like(ne)
                hp = torch.zeros(c, device=device)
            else:
                post = np.broadcast_to(np.asarray(post_emb, dtype=np.float32), ne.shape).copy()
                pe = torch.as_tensor(post, device=device)
                hp = torch.ones(c, device=device)
            h = self.net.note_hidden(ne, pe, hp, fe)  # (C, H)
            ri = torch.as_tensor(np.asarray(rater_intercept, dtype=np.float32), device=device)
            rf = torch.as_tensor(np.asarray(rater_factor, dtype=np.float32), device=device)
            logits = self.net.grid_logits(h, ri, rf)
            return torch.softmax(logits, dim=-1).cpu().numpy().astype(np.float64)


@dataclass
class PHMEnsemble:
    """k PHMs trained alike on the same data with different seeds (initialisation, batch order and
    the early-stopping share); the per-rater probability is the mean of the members'. Averaging
    lowers the variance of one small net trained on a few thousand ratings; the jury uses it as it
    uses one PHM (sampled jurors, sampled ratings, projection)."""

    members: list[PHM]

    @property
    def meta(self) -> PHMMeta:
        return self.members[0].meta

    def probabilities(
        self,
        note_emb: np.ndarray,
        post_emb: np.ndarray | None,
        rater_intercept: np.ndarray,
        rater_factor: np.ndarray,
        note_features: np.ndarray | None = None,
    ) -> np.ndarray:
        """The members' (C, J, 3) probabilities, averaged."""
        return np.mean(
            [m.probabilities(note_emb, post_emb, rater_intercept, rater_factor, note_features) for m in self.members],
            axis=0,
        )


# Member m of an ensemble is trained with seed + MEMBER_SEED_STEP * m: member 0 is the single model.
MEMBER_SEED_STEP = 1000


def train_ensemble(data: TrainingData, *, members: int, seed: int = 0, **kwargs: Any) -> PHMEnsemble:
    """`members` PHMs by `train` (same arguments) with seeds seed, seed + MEMBER_SEED_STEP, ..."""
    if members < 1:
        raise ValueError("an ensemble needs at least one member")
    return PHMEnsemble([train(data, seed=seed + MEMBER_SEED_STEP * m, **kwargs) for m in range(members)])


def model_device(net: nn.Module) -> torch.device:
    """Where the net's weights are: every tensor fed to it is created there."""
    return next(net.parameters()).device


def auc(scores: np.ndarray, positive: np.ndarray) -> float:
    """Area under the ROC curve (Mann-Whitney, ties counted half)."""
    pos, neg = scores[positive], scores[~positive]
    if len(pos) == 0 or len(neg) == 0:
        return float("nan")
    values = np.concatenate([pos, neg])
    _, inv, counts = np.unique(values, return_inverse=True, return_counts=True)
    ranks = (np.cumsum(counts) - (counts - 1) / 2.0)[inv]  # 1-based, ties averaged
    r_pos = ranks[: len(pos)]
    return float((r_pos.sum() - len(pos) * (len(pos) + 1) / 2) / (len(pos) * len(neg)))


def calibration_table(
    p_helpful: np.ndarray, is_helpful: np.ndarray, bins: int = CALIBRATION_BINS
) -> list[dict[str, Any]]:
    """Per probability bin of P(helpful): count, mean predicted, observed share of Helpful."""
    edges = np.linspace(0, 1, bins + 1)
    which = np.clip(np.digitize(p_helpful, edges) - 1, 0, bins - 1)
    rows = []
    for b in range(bins):
        m = which == b
        if m.any():
            rows.append({
                "bin": f"{edges[b]:.1f}-{edges[b + 1]:.1f}",
                "count": int(m.sum()),
                "mean_predicted": round(float(p_helpful[m].mean()), 4),
                "observed": round(float(is_helpful[m].mean()), 4),
            })  # fmt: skip
    return rows


def train(
    data: TrainingData,
    *,
    embedder: str,
    trained_on: str,
    epochs: int = 8,
    batch_size: int = 512,
    lr: float = 3e-3,
    holdout: float = 0.2,
    validation: float = 0.0,
    weight_decay: float = 1e-5,
    dropout: float = 0.0,
    hidden: int = HIDDEN,
    seed: int = 0,
    device: str = "cpu",
) -> PHM:
    """Train on the ratings of the notes not held out; AUC and calibration on the `holdout` share of
    the notes' ratings (nan when 0). With `validation` > 0 another share of the notes is set apart
    and the weights of the epoch with the lowest loss on it are kept (early stopping chosen inside
    the training data).

    `device` is where the net and its data live while training; the model is returned on the CPU."""
    import torch
    from torch import nn

    started = time.monotonic()
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    draw = rng.random(len(data.note_emb))
    held_note = draw < holdout
    valid_note = (draw >= holdout) & (draw < holdout + validation)
    test, valid = held_note[data.note], valid_note[data.note]
    train_idx = np.flatnonzero(~test & ~valid)
    dim = data.note_emb.shape[1]
    raw = data.features()
    fit_notes = np.unique(data.note[train_idx])
    mean = raw[fit_notes].mean(axis=0) if len(fit_notes) else np.zeros(raw.shape[1], np.float32)
    std = raw[fit_notes].std(axis=0) if len(fit_notes) else np.ones(raw.shape[1], np.float32)
    std = np.where(std > 1e-6, std, 1.0)
    net = PHMNet(dim, raw.shape[1], hidden=hidden, dropout=dropout).to(device)
    ne = torch.as_tensor(data.note_emb, dtype=torch.float32, device=device)
    pe = torch.as_tensor(data.post_emb, dtype=torch.float32, device=device)
    hp = torch.as_tensor(data.has_post, dtype=torch.float32, device=device)
    fe = torch.as_tensor((raw - mean) / std, dtype=torch.float32, device=device)
    note = torch.as_tensor(data.note, dtype=torch.long, device=device)
    ri = torch.as_tensor(data.rater_intercept, dtype=torch.float32, device=device)
    rf = torch.as_tensor(data.rater_factor, dtype=torch.float32, device=device)
    y = torch.as_tensor(data.label, dtype=torch.long, device=device)
    opt = torch.optim.Adam(net.parameters(), lr=lr, weight_decay=weight_decay)
    loss_fn = nn.CrossEntropyLoss()

    def forward(rows: torch.Tensor) -> torch.Tensor:
        n = note[rows]
        return net.logits(net.note_hidden(ne[n], pe[n], hp[n], fe[n]), ri[rows], rf[rows])

    valid_rows = torch.as_tensor(np.flatnonzero(valid), device=device)
    best: tuple[float, int, dict[str, torch.Tensor]] | None = None
    for epoch in range(epochs):
        net.train()
        perm = torch.as_tensor(rng.permutation(train_idx), device=device)
        for start in range(0, len(perm), batch_size):
            loss = loss_fn(forward(perm[start : start + batch_size]), y[perm[start : start + batch_size]])
            opt.zero_grad()
            loss.backward()
            opt.step()
        if len(valid_rows):
            net.eval()
            with torch.no_grad():
                v = float(loss_fn(forward(valid_rows), y[valid_rows]))
            if best is None or v < best[0]:
                best = (v, epoch + 1, {k: t.detach().clone() for k, t in net.state_dict().items()})
    if best is not None:
        net.load_state_dict(best[2])
    net.eval()
    test_idx = np.flatnonzero(test)
    with torch.no_grad():  # in slices: the held-out share of millions of ratings at once would not fit
        probs = np.concatenate([
            torch.softmax(forward(torch.as_tensor(test_idx[s : s + EVAL_ROWS], device=device)), -1).cpu().numpy()
            for s in range(0, len(test_idx), EVAL_ROWS)
        ] or [np.zeros((0, 3), np.float32)])  # fmt: skip
    labels = data.label[test_idx]
    binary = labels != 1
    a = auc(probs[binary, 0], labels[binary] == 0)
    calib = calibration_table(probs[:, 0], labels == 0)
    digest = hashlib.sha256(f"{trained_on}|{len(data.label)}|{seed}".encode()).hexdigest()[:8]
    meta = PHMMeta(
        version=f"phm-{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}-{digest}",
        embedder=embedder,
        dim=dim,
        trained_on=trained_on,
        n_ratings=len(train_idx),
        n_notes=len(fit_notes),
        holdout_ratings=len(test_idx),
        auc=round(a, 4),
        calibration=calib,
        train_seconds=round(time.monotonic() - started, 2),
        epochs=best[1] if best is not None else epochs,
        extra={"max_epochs": epochs, "validation_ratings": int(valid.sum()), "weight_decay": weight_decay},
        inputs=describe_inputs(embedder, data.feature_names),
        features=list(data.feature_names),
        feature_mean=[float(x) for x in mean],
        feature_std=[float(x) for x in std],
        hidden=hidden,
    )
    return PHM(net.cpu(), meta)


def save(model: PHM, directory: Path) -> Path:
    import torch

    target = directory / model.meta.version
    target.mkdir(parents=True, exist_ok=True)
    torch.save(model.net.state_dict(), target / "model.pt")
    (target / "meta.json").write_text(json.dumps(asdict(model.meta), indent=2))
    return target


def load(path: Path) -> PHM:
    """The model stored in `path`; a model of another format (other inputs) raises OldModelError."""
    import torch

    raw = json.loads((path / "meta.json").read_text())
    if raw.get("format") != FORMAT:
        raise OldModelError(
            f"The stored PHM {raw.get('version', path.name)} was saved in format {raw.get('format', 1)} "
            f"(inputs: the note embedding and the rater's parameters only); this version reads format {FORMAT} "
            "(note features beside the embedding). Retrain it: python manage.py train_phm."
        )
    meta = PHMMeta(**raw)
    if len(meta.features) != len(meta.feature_mean) or len(meta.features) != len(meta.feature_std):
        raise OldModelError(f"The stored PHM {meta.version} has an incomplete feature description: retrain it.")
    net = PHMNet(meta.dim, len(meta.features), hidden=meta.hidden)
    # map_location: a model trained on a GPU loads on a CPU-only web or worker process.
    net.load_state_dict(torch.load(path / "model.pt", weights_only=True, map_location="cpu"))
    net.eval()
    return PHM(net, meta)


def latest(directory: Path) -> Path | None:
    """The newest stored model folder (versions sort by their UTC timestamp)."""
    if not directory.is_dir():
        return None
    found = sorted(p for p in directory.iterdir() if (p / "meta.json").exists())
    return found[-1] if found else None


_TOKEN_RE = re.compile(r"[a-z0-9]+")
HASHING = "hashing-bow-256"


def hashing_embed(texts: Sequence[str], dim: int = 256) -> np.ndarray:
    """A bag-of-words hashing embedding (no model; offline runs and tests), L2-normalised."""
    out = np.zeros((len(texts), dim), dtype=np.float32)
    for i, text in enumerate(texts):
        for tok in _TOKEN_RE.findall(text.lower()):
            out[i, int(hashlib.blake2b(tok.encode(), digest_size=4).hexdigest(), 16) % dim] += 1.0
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    return out / np.where(norms == 0, 1, norms)
