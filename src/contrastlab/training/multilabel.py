"""Multi-label supervised contrastive training, trained to convergence on a validation split.

Representation phase (Sim-Dis paper, Huang et al., App. C.4; MulSupCon, Zhang & Wu 2024,
official code's vector-data recipe): each mini-batch of ``B`` training rows gives two views
per row by feature masking (every feature is zeroed independently with probability
``mask_rate``; the features are z-scored, so 0 is the training mean); an MLP encoder +
two-layer projection head map each view to ``z = normalize(Proj(Enc(view)))``
``[B, 2, D_P]`` and the registry loss is ``loss_fn(z, y, temperature=T)``. With a memory
queue (``queue > 0``, MoCo-style, He et al. 2020, without the momentum encoder) the
projections and labels of the last ``queue`` rows of past batches (detached) are appended
after the batch as ``contrast_features``/``contrast_labels``: they enter every anchor's
denominator (and positive set) but are never anchors. AdamW, linear warm-up then cosine decay
over ``max_steps`` steps. Every ``eval_every`` steps the encoder is scored on the validation
split by a closed-form ridge probe (validation mAP); training stops after ``patience`` checks
without improvement and the best encoder is kept (early stopping on validation mAP).

Classifier phase: the projection head is dropped, the encoder frozen, and a linear layer
``H -> C`` is fitted to convergence on ``h = Enc(x)`` with full-batch L-BFGS on mean BCE +
``clf_l2 |W|^2`` (Khosla et al. 2020 linear evaluation).

Baselines: ``bce`` (encoder + linear layer trained end to end with BCE, same steps, early
stopping on its own validation mAP), ``logreg`` (binary-relevance logistic regression,
scikit-learn liblinear, one classifier per label, C picked from the log grid ``logreg_c`` by
validation mAP; a choice at the grid's edge extends the grid by a decade, at most
``logreg_extend`` times, then raises), ``extratrees`` / ``randomforest`` (scikit-learn's
native multi-output Extremely Randomized Trees, Geurts, Ernst & Wehenkel, Mach. Learn. 2006,
and Random Forest, Breiman, Mach. Learn. 2001; ``n_jobs = 1``), ``hgb`` (binary-relevance
histogram gradient boosting, :mod:`contrastlab.training.multilabel_hgb`) and ``knn`` (a
label-averaging k-nearest-neighbour scorer, cosine or Euclidean, uniform or inverse-distance
weights; deterministic, so its seeds give identical outputs). Their hyperparameters
(``cfg.model``) are tuned on validation like the losses.

Thresholds: F1 is reported at 0.5 (``micro_f1``, ``macro_f1``) and at one global threshold
chosen on validation (``micro_f1_val_t``, ``macro_f1_val_t``: the threshold in 0.05..0.95
maximising the mean of validation micro- and macro-F1); per-label thresholds (each label's
validation-F1 maximiser) are optional (``*_label_t``).

Everything random is seeded from the seed argument: on CPU a rerun gives identical numbers,
whatever the number of worker processes (each seed runs alone in one process).
"""

from __future__ import annotations

import copy
import math
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ..errors import InputError, UnknownNameError
from ..evaluation.multilabel import (choose_threshold, knn_label_purity, label_thresholds,
                                     mean_average_precision, multilabel_metrics)
from ..models.mlp import ProjectionHead, build_encoder

#: ``needs`` of the registry losses this module loads (read by scripts/stage_deps.py).
LOSS_NEEDS = ("multilabels",)

__all__ = ["TrainConfig", "SeedResult", "warmup_cosine", "mask_views", "MemoryQueue",
           "ridge_probe_scores", "train_contrastive", "fit_linear", "train_bce", "train_logreg",
           "knn_scores", "forest_scores", "run_seed", "run_seeds", "resolve_loss", "summarize",
           "make_config", "TUNABLE", "SKLEARN_BASELINES", "HYBRIDS", "cv_folds", "tuning_rows",
           "cv_objective"]

#: Baselines fitted by scikit-learn in :func:`run_seed` (no encoder, no optimiser steps).
SKLEARN_BASELINES = ("logreg", "extratrees", "randomforest", "knn", "hgb")


#: scikit-learn distances of the kNN baseline (the first is the default).
KNN_METRICS = ("cosine", "euclidean")  # not a loss name


@dataclass
class TrainConfig:
    """Hyper-parameters of one (data set, variant) run; see ``params/multilabel.py``.

    ``variant`` is the model name (``logreg``, ``bce``, ``extratrees``, ``randomforest``,
    ``knn``, a contrastive variant or a hybrid of :data:`HYBRIDS`); ``loss`` is the registry
    loss of a contrastive variant or of a hybrid's encoder (``None`` for the baselines);
    ``model`` the scikit-learn baseline's (or the hybrid forest's) hyperparameters; ``hybrid``
    ``""``, ``"concat"`` or ``"et"`` (see :data:`HYBRIDS`).
    """

    variant: str
    loss: str | None
    temperature: float = 0.1
    loss_kwargs: dict[str, Any] = field(default_factory=dict)
    encoder: str = "mlp"
    hidden: list[int] = field(default_factory=lambda: [256])
    enc_dim: int = 256
    proj_dim: int = 128
    dropout: float = 0.1
    batch_size: int = 128
    max_steps: int = 1500
    eval_every: int = 50
    patience: int = 6
    lr: float = 1e-3
    weight_decay: float = 1e-4
    warmup: float = 0.05
    mask_rate: float = 0.5
    queue: int = 0
    clf_max_iter: int = 300
    clf_l2: float = 1e-4
    threshold: float = 0.5
    per_label_thresholds: bool = False
    logreg_c: list[float] = field(default_factory=lambda: [1e-4, 1e-3, 1e-2, 1e-1, 1.0, 10.0, 100.0, 1000.0])
    logreg_extend: int = 3
    model: dict[str, Any] = field(default_factory=dict)
    hybrid: str = ""
    precision_at: list[int] = field(default_factory=list)
    knn_k: int = 5
    threads: int = 1
    device: str = "cpu"


@dataclass
class SeedResult:
    """One seed: test metrics, curves, validation choices, test scores, wall seconds.

    ``curve`` maps ``step`` / ``loss`` (mean training loss since the previous check) /
    ``val_map`` to equal-length lists (for ``logreg``: ``C`` / ``val_map`` of the grid).
    ``scores``: float32 ``[N_test, C]`` test probabilities; ``thresholds``: ``{"global": t,
    "per_label": [C] or None}`` chosen on validation.
    """

    seed: int
    metrics: dict[str, float]
    curve: dict[str, list[float]]
    scores: np.ndarray
    thresholds: dict[str, Any]
    chosen: dict[str, float]
    time_s: float


def warmup_cosine(total_steps: int, warmup_frac: float) -> Callable[[int], float]:
    """LR multiplier: linear warm-up over ``ceil(warmup_frac * total)`` steps, then cosine to 0.

    ``step`` counts optimizer steps from 0. Source: the "standard cosine learning rate
    scheduler with a 0.05 warm-up period" of the Sim-Dis paper, App. C.4.
    """
    warm = int(math.ceil(warmup_frac * total_steps))

    def f(step: int) -> float:
        if warm > 0 and step < warm:
            return (step + 1) / warm
        t = (step - warm) / max(1, total_steps - warm)
        return 0.5 * (1.0 + math.cos(math.pi * min(1.0, t)))

    return f


def mask_views(x: torch.Tensor, rate: float, gen: torch.Generator, n_views: int = 2) -> torch.Tensor:
    """``n_views`` feature-masked copies of ``x`` ``[B, F]`` -> ``[B, n_views, F]``.

    Each entry is kept with probability ``1 - rate`` and set to 0 otherwise, independently
    per view (the MulSupCon official code's mask transform for vector data). ``rate = 0``
    returns unmasked copies.
    """
    v = x.unsqueeze(1).expand(-1, n_views, -1)
    if rate <= 0:
        return v.clone()
    keep = torch.rand(v.shape, generator=gen) >= rate
    return v * keep


class MemoryQueue:
    """FIFO memory of past projections (MoCo-style, He et al. 2020) and their labels.

    Holds at most ``size`` rows of ``[n_views, D]`` detached features and ``[C]`` labels;
    :meth:`contrast` returns the batch followed by the queue, the form the multi-label losses
    take as ``contrast_features`` / ``contrast_labels`` (with ``anchor_offset = 0`` the batch
    rows are the anchors; queue rows are only contrast rows).
    """

    def __init__(self, size: int):
        if size < 0:
            raise InputError(f"queue size must be >= 0, got {size}")
        self.size = size
        self.feats: torch.Tensor | None = None
        self.labels: torch.Tensor | None = None

    def __len__(self) -> int:
        return 0 if self.feats is None else len(self.feats)

    def contrast(self, z: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(cat([z, queue_feats]), cat([y, queue_labels]))``."""
        if not len(self):
            return z, y
        return torch.cat([z, self.feats]), torch.cat([y, self.labels])

    def push(self, z: torch.Tensor, y: torch.Tensor) -> None:
        """Enqueue a batch (detached), dropping the oldest rows beyond ``size``."""
        if self.size == 0:
            return
        z, y = z.detach(), y.detach()
        if self.feats is None:
            self.feats, self.labels = z[-self.size:], y[-self.size:]
        else:
            self.feats = torch.cat([z, self.feats])[: self.size]
            self.labels = torch.cat([y, self.labels])[: self.size]


def resolve_loss(name: str, kwargs: dict[str, Any] | None = None) -> Callable[..., torch.Tensor]:
    """``get_loss(name)`` with ``kwargs`` bound; raises ``ValueError`` naming a keyword the
    loss does not accept."""
    import functools
    import inspect

    from ..losses import get_loss

    fn = get_loss(name)
    if not kwargs:
        return fn
    sig = inspect.signature(fn.func if isinstance(fn, functools.partial) else fn)
    bad = [k for k in kwargs if k not in sig.parameters]
    if bad:
        raise InputError(f"loss {name!r} has no keyword argument(s) {bad}; "
                         f"it accepts {[p for p in sig.parameters if p not in ('features', 'labels')]}")
    return functools.partial(fn, **kwargs)


def ridge_probe_scores(htr: torch.Tensor, ytr: torch.Tensor, hva: torch.Tensor, lam: float = 1.0) -> np.ndarray:
    """Closed-form ridge regression ``[h, 1] -> y`` fitted on ``(htr, ytr)``, applied to ``hva``.

    The cheap validation probe of early stopping (the reported numbers use the L-BFGS
    logistic layer of :func:`fit_linear`). Returns float64 ``[N_val, C]`` scores.
    """
    a = torch.cat([htr, torch.ones(len(htr), 1)], 1).double()
    g = a.T @ a + lam * torch.eye(a.shape[1], dtype=torch.float64)
    w = torch.linalg.solve(g, a.T @ ytr.double())
    return (torch.cat([hva, torch.ones(len(hva), 1)], 1).double() @ w).numpy()


def _schedule(opt: torch.optim.Optimizer, cfg: TrainConfig):
    return torch.optim.lr_scheduler.LambdaLR(opt, warmup_cosine(cfg.max_steps, cfg.warmup))


def _loop(step_loss: Callable[[torch.Tensor], torch.Tensor], opt, n: int, cfg: TrainConfig,
          gen: torch.Generator, val_map: Callable[[], float], snapshot: Callable[[], Any],
          name: str) -> tuple[Any, dict[str, list[float]]]:
    """Shared step loop with early stopping; returns (best snapshot, curve).

    Raises:
        FloatingPointError: a non-finite loss (naming ``name`` and the step).
    """
    sched = _schedule(opt, cfg)
    bs = min(cfg.batch_size, n)
    curve: dict[str, list[float]] = {"step": [], "loss": [], "val_map": []}
    best, best_state, bad, step = -1.0, None, 0, 0
    acc, cnt = 0.0, 0
    while step < cfg.max_steps:
        perm = torch.randperm(n, generator=gen)
        nb = max(1, n // bs)  # drop the ragged last batch: contrastive losses need in-batch pairs
        for b in range(nb):
            idx = perm[b * bs:(b + 1) * bs]
            loss = step_loss(idx)
            if not torch.isfinite(loss):
                raise FloatingPointError(f"loss {name!r} is {loss.item()} at step {step + 1}")
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
            step += 1
            acc += float(loss.detach())
            cnt += 1
            if step % cfg.eval_every == 0 or step == cfg.max_steps:
                m = val_map()
                curve["step"].append(step)
                curve["loss"].append(acc / max(1, cnt))
                curve["val_map"].append(m)
                acc, cnt = 0.0, 0
                if m > best + 1e-6:
                    best, best_state, bad = m, snapshot(), 0
                else:
                    bad += 1
                if bad >= cfg.patience:
                    return best_state, curve
            if step >= cfg.max_steps:
                break
    return best_state, curve


def train_contrastive(x: torch.Tensor, y: torch.Tensor, xva: torch.Tensor, yva: np.ndarray,
                      cfg: TrainConfig, gen: torch.Generator,
                      loss_fn: Callable[..., torch.Tensor] | None = None) -> tuple[nn.Module, dict[str, list[float]]]:
    """Representation phase (see the module docstring).

    Args:
        x: float32 ``[N, F]``; y: float32 multi-hot ``[N, C]`` (training part).
        xva: float32 ``[N_val, F]``; yva: {0,1} ``[N_val, C]`` (validation part).
        loss_fn: defaults to ``resolve_loss(cfg.loss, cfg.loss_kwargs)``; called as
            ``loss_fn(z [B, 2, D], y [B, C], temperature=T[, contrast_features=[B+Q, 2, D],
            contrast_labels=[B+Q, C]])``.

    Returns:
        ``(encoder, curve)``: the encoder at the best validation mAP (frozen, eval mode;
        projection head discarded) and the curve (``step``, ``loss``, ``val_map``).

    Raises:
        FloatingPointError: the loss became NaN/inf (names the loss and the step).
    """
    if loss_fn is None:
        loss_fn = resolve_loss(cfg.loss, cfg.loss_kwargs)
    enc = build_encoder(cfg.encoder, x.shape[1], cfg.hidden, cfg.enc_dim, cfg.dropout)
    proj = ProjectionHead(cfg.enc_dim, cfg.proj_dim)
    opt = torch.optim.AdamW(list(enc.parameters()) + list(proj.parameters()), lr=cfg.lr,
                            weight_decay=cfg.weight_decay)
    queue = MemoryQueue(cfg.queue)
    enc.train()
    proj.train()

    def step_loss(idx: torch.Tensor) -> torch.Tensor:
        v = mask_views(x[idx], cfg.mask_rate, gen)
        b, nv, f = v.shape
        z = F.normalize(proj(enc(v.reshape(b * nv, f))), dim=1).reshape(b, nv, -1)
        yb = y[idx]
        if cfg.queue:
            cf, cl = queue.contrast(z, yb)
            loss = loss_fn(z, yb, temperature=cfg.temperature, contrast_features=cf, contrast_labels=cl)
            queue.push(z, yb)
            return loss
        return loss_fn(z, yb, temperature=cfg.temperature)

    def val_map() -> float:
        enc.eval()
        with torch.no_grad():
            s = ridge_probe_scores(enc(x), y, enc(xva))
        enc.train()
        return mean_average_precision(yva, s)

    best, curve = _loop(step_loss, opt, len(x), cfg, gen, val_map,
                        lambda: copy.deepcopy(enc.state_dict()), cfg.variant)
    if best is not None:
        enc.load_state_dict(best)
    enc.eval()
    for p in enc.parameters():
        p.requires_grad_(False)
    return enc, curve


def fit_linear(h: torch.Tensor, y: torch.Tensor, l2: float, max_iter: int) -> nn.Linear:
    """Linear layer ``H -> C`` fitted to convergence with full-batch L-BFGS (strong Wolfe line
    search) on mean BCE + ``l2 * |W|^2`` (bias unpenalised); ``h`` float32 ``[N, H]``,
    ``y`` float32 ``[N, C]``."""
    clf = nn.Linear(h.shape[1], y.shape[1])
    nn.init.zeros_(clf.weight)
    p = y.mean(0).clamp(1e-4, 1 - 1e-4)
    with torch.no_grad():
        clf.bias.copy_(torch.log(p / (1 - p)))
    opt = torch.optim.LBFGS(clf.parameters(), lr=1.0, max_iter=max_iter, tolerance_grad=1e-6,
                            tolerance_change=1e-9, history_size=20, line_search_fn="strong_wolfe")

    def closure() -> torch.Tensor:
        opt.zero_grad()
        loss = F.binary_cross_entropy_with_logits(clf(h), y) + l2 * clf.weight.pow(2).sum()
        loss.backward()
        return loss

    opt.step(closure)
    return clf


def train_bce(x: torch.Tensor, y: torch.Tensor, xva: torch.Tensor, yva: np.ndarray, cfg: TrainConfig,
              gen: torch.Generator) -> tuple[Callable[[torch.Tensor], torch.Tensor], dict[str, list[float]]]:
    """BCE MLP baseline: encoder + linear layer trained end to end (same steps, schedule,
    masking rate of its own variant, early stopping on validation mAP). Returns
    ``(predict_proba, curve)``."""
    enc = build_encoder(cfg.encoder, x.shape[1], cfg.hidden, cfg.enc_dim, cfg.dropout)
    clf = nn.Linear(cfg.enc_dim, y.shape[1])
    model = nn.Sequential(enc, clf)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    model.train()

    def step_loss(idx: torch.Tensor) -> torch.Tensor:
        xb = mask_views(x[idx], cfg.mask_rate, gen, n_views=1)[:, 0]
        return F.binary_cross_entropy_with_logits(model(xb), y[idx])

    def val_map() -> float:
        model.eval()
        with torch.no_grad():
            s = torch.sigmoid(model(xva)).numpy()
        model.train()
        return mean_average_precision(yva, s)

    best, curve = _loop(step_loss, opt, len(x), cfg, gen, val_map,
                        lambda: copy.deepcopy(model.state_dict()), "bce")
    if best is not None:
        model.load_state_dict(best)
    model.eval()

    def predict(a: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            return torch.sigmoid(model(a))

    return predict, curve


def train_logreg(x: np.ndarray, y: np.ndarray, xva: np.ndarray, yva: np.ndarray, grid: list[float],
                 seed: int, extend: int = 3) -> tuple[Callable[[np.ndarray], np.ndarray], dict[str, list[float]], float]:
    """Binary-relevance logistic regression (scikit-learn ``LogisticRegression``, liblinear,
    L2), one classifier per label; ``C`` from ``grid`` by validation mAP (the smallest C on
    ties). A label constant in the training part gets its training frequency as score.

    ``grid`` must be increasing and log-spaced by a constant factor. When the best C is the
    grid's smallest or largest value, the grid grows by one factor in that direction (at most
    ``extend`` times): a maximiser on the edge means the grid did not bracket it. A choice
    still on an edge after ``extend`` extensions raises.

    Returns:
        ``(predict_proba [N, C], curve {C, val_map} in evaluation order, best C)``.

    Raises:
        InputError: fewer than 3 grid points, a grid not increasing, or the best C on an
        edge of the fully extended grid.
    """
    from sklearn.linear_model import LogisticRegression

    grid = [float(c) for c in grid]
    if len(grid) < 3 or any(b <= a for a, b in zip(grid, grid[1:])) or grid[0] <= 0:
        raise InputError(f"logreg_c must hold >= 3 increasing positive values, got {grid}")
    factor = grid[-1] / grid[-2]

    def fit(c: float):
        models = []
        for j in range(y.shape[1]):
            col = y[:, j]
            if col.min() == col.max():
                models.append(float(col[0]))
            else:
                models.append(LogisticRegression(C=c, solver="liblinear", random_state=seed,
                                                 max_iter=1000).fit(x, col))

        def predict(a: np.ndarray) -> np.ndarray:
            return np.stack([np.full(len(a), m) if isinstance(m, float) else m.predict_proba(a)[:, 1]
                             for m in models], axis=1)
        return predict

    curve: dict[str, list[float]] = {"C": [], "val_map": []}
    fitted: dict[float, tuple[float, Any]] = {}

    def score(c: float) -> None:
        if c not in fitted:
            pred = fit(c)
            m = mean_average_precision(yva, pred(xva))
            fitted[c] = (m, pred)
            curve["C"].append(c)
            curve["val_map"].append(m)

    for c in grid:
        score(c)
    for _ in range(extend + 1):
        cs = sorted(fitted)
        best_c = max(cs, key=lambda c: (fitted[c][0], -c))  # smallest C on ties
        if cs[0] < best_c < cs[-1]:
            return fitted[best_c][1], curve, float(best_c)
        if _ == extend:
            break
        score(best_c / factor if best_c == cs[0] else best_c * factor)
    raise InputError(f"logistic regression: validation mAP is best at C = {best_c:g}, the edge of the "
                     f"grid {sorted(fitted)} after {extend} extension(s); widen multilabel.train.logreg_c")


def knn_scores(x: np.ndarray, y: np.ndarray, xq: np.ndarray, k: int, weights: str = "uniform",
               metric: str = KNN_METRICS[0]) -> np.ndarray:
    """Label scores of a k-nearest-neighbour multi-label scorer: for each query row the
    (weighted) mean of its ``k`` nearest training rows' label vectors (the posterior of the
    multi-label kNN rule before ML-kNN's Bayesian correction; Zhang & Zhou, Pattern Recognit.
    2007, Sec. 3). Exact search (scikit-learn ``NearestNeighbors``, brute force).

    Args:
        x: float ``[N, F]`` training features; y: {0,1} ``[N, C]``; xq: float ``[M, F]`` queries.
        k: neighbours (capped at ``N``).
        weights: ``uniform``, or ``distance`` (weight 1/d; a query at distance 0 from some
            training rows takes the mean of those rows only, as scikit-learn does).
        metric: ``cosine`` (1 - cosine similarity) or ``euclidean``.

    Returns:
        float64 ``[M, C]`` scores in [0, 1].

    Raises:
        InputError: unknown weights/metric, k < 1, or shapes that disagree.
    """
    from sklearn.neighbors import NearestNeighbors

    x, xq = np.asarray(x, dtype=np.float64), np.asarray(xq, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if weights not in ("uniform", "distance") or metric not in KNN_METRICS:
        raise InputError(f"knn: weights {weights!r} / metric {metric!r}; expected uniform|distance / cosine|euclidean")
    if k < 1 or x.ndim != 2 or xq.ndim != 2 or len(x) != len(y) or x.shape[1] != xq.shape[1]:
        raise InputError(f"knn: k={k}, x {x.shape}, y {y.shape}, queries {xq.shape}")
    k = min(int(k), len(x))
    d, idx = NearestNeighbors(n_neighbors=k, metric=metric, algorithm="brute").fit(x).kneighbors(xq)
    if weights == "uniform":
        w = np.ones_like(d)
    else:
        d = np.maximum(d, 0.0)  # cosine distances may round below 0
        zero = d <= 1e-12
        w = np.where(zero.any(1, keepdims=True), zero.astype(np.float64), 1.0 / np.maximum(d, 1e-12))
    return np.einsum("mk,mkc->mc", w, y[idx]) / w.sum(1, keepdims=True)


def forest_scores(kind: str, x: np.ndarray, y: np.ndarray, queries: list[np.ndarray], params: dict[str, Any],
                  seed: int, chunk: int = 100) -> list[np.ndarray]:
    """Positive-class probabilities of a scikit-learn multi-output forest (``kind``:
    ``extratrees`` = ``ExtraTreesClassifier``, ``randomforest`` = ``RandomForestClassifier``;
    ``n_jobs = 1``).

    The ``n_estimators`` trees are grown in forests of ``chunk`` trees (seeds drawn from
    ``seed``) whose class probabilities are averaged: the same estimator as one forest (a forest's
    probability is the mean of its trees'), with the memory of ``chunk`` trees at a time.

    Args:
        x: float ``[N, F]``; y: {0,1} ``[N, C]``; queries: float arrays ``[M_i, F]``.
        params: ``n_estimators``, ``max_depth`` (0 = unlimited), ``max_features`` (``sqrt``,
            ``log2`` or a fraction), ``min_samples_leaf``.

    Returns:
        One float64 ``[M_i, C]`` array per query array (a label constant in training scores
        its constant).

    Raises:
        InputError: unknown ``kind`` or hyperparameter values scikit-learn rejects.
    """
    from sklearn.ensemble import ExtraTreesClassifier, RandomForestClassifier

    cls = {"extratrees": ExtraTreesClassifier, "randomforest": RandomForestClassifier}.get(kind)
    if cls is None:
        raise InputError(f"forest_scores: unknown kind {kind!r}")
    n_trees = int(params.get("n_estimators", 500))
    mf = params.get("max_features", "sqrt")
    mf = mf if isinstance(mf, str) else (1.0 if float(mf) >= 1.0 else float(mf))
    depth = int(params.get("max_depth") or 0) or None
    y = np.asarray(y).astype(np.int64)
    out = [np.zeros((len(q), y.shape[1])) for q in queries]
    rng = np.random.default_rng(seed)
    done = 0
    while done < n_trees:
        n = min(chunk, n_trees - done)
        try:
            m = cls(n_estimators=n, max_depth=depth, max_features=mf,
                    min_samples_leaf=int(params.get("min_samples_leaf", 1)), n_jobs=1,
                    random_state=int(rng.integers(0, 2**31 - 1))).fit(x, y)
        except ValueError as e:
            raise InputError(f"{kind}: {e}") from None
        for o, q in zip(out, queries):
            probs = m.predict_proba(q)
            for j, (pj, cj) in enumerate(zip(probs, m.classes_)):
                o[:, j] += n * (pj[:, list(cj).index(1)] if 1 in cj else 0.0)
        done += n
    return [o / n_trees for o in out]


def run_seed(data: dict[str, np.ndarray], cfg: TrainConfig, seed: int) -> SeedResult:
    """Train one seed of one variant; choose thresholds on validation; score the test split.

    Args:
        data: ``x_train``/``y_train``, ``x_val``/``y_val``, ``x_test``/``y_test`` numpy
            arrays (``[N, F]`` float32 / ``[N, C]`` {0,1}); optional ``g_train``/``g_test``
            group ids for the kNN purity (HumanEval).
        cfg: the variant's :class:`TrainConfig`.
        seed: seeds torch/numpy/python for this run.

    Returns:
        :class:`SeedResult`; metrics: ``micro_f1``/``macro_f1`` at 0.5, ``*_val_t`` at the
        validation threshold (``threshold_val``), ``*_label_t`` with per-label thresholds,
        ``map``, ``val_map``, precision@k, ``steps`` (best checkpoint's step).
    """
    from ..utils import seed_everything

    torch.set_num_threads(max(1, cfg.threads))
    t0 = time.perf_counter()
    gen = seed_everything(seed)
    xtr = torch.as_tensor(data["x_train"], dtype=torch.float32)
    ytr = torch.as_tensor(data["y_train"], dtype=torch.float32)
    xva = torch.as_tensor(data["x_val"], dtype=torch.float32)
    xte = torch.as_tensor(data["x_test"], dtype=torch.float32)
    yva = np.asarray(data["y_val"])
    chosen: dict[str, float] = {}
    enc = None
    if cfg.variant == "logreg":
        pred, curve, c = train_logreg(data["x_train"], data["y_train"], data["x_val"], yva, cfg.logreg_c,
                                      seed, cfg.logreg_extend)
        s_val, s_te = pred(data["x_val"]), pred(data["x_test"])
        chosen["C"] = c
    elif cfg.variant in ("extratrees", "randomforest"):
        s_val, s_te = forest_scores(cfg.variant, data["x_train"], data["y_train"],
                                    [data["x_val"], data["x_test"]], cfg.model, seed)
        curve = {}
    elif cfg.variant == "hgb":
        from .multilabel_hgb import hgb_scores

        s_val, s_te = hgb_scores(data["x_train"], data["y_train"], [data["x_val"], data["x_test"]], cfg.model,
                                 seed, cfg.threads)
        curve = {}
    elif cfg.variant == "knn":
        s_val, s_te = (knn_scores(data["x_train"], data["y_train"], q, int(cfg.model.get("k", 10)),
                                  str(cfg.model.get("weights", "uniform")), str(cfg.model.get("metric", KNN_METRICS[0])))
                       for q in (data["x_val"], data["x_test"]))
        curve = {}
    elif cfg.variant == "bce":
        pred, curve = train_bce(xtr, ytr, xva, yva, cfg, gen)
        s_val, s_te = pred(xva).numpy(), pred(xte).numpy()
    else:
        enc, curve = train_contrastive(xtr, ytr, xva, yva, cfg, gen)
        with torch.no_grad():
            htr, hva, hte = enc(xtr), enc(xva), enc(xte)
        if cfg.hybrid:
            # raw features beside the learned ones; h standardised with training statistics
            mu, sd = htr.mean(0), htr.std(0).clamp_min(1e-6)
            htr, hva, hte = (torch.cat([a, (h - mu) / sd], 1) for a, h in ((xtr, htr), (xva, hva), (xte, hte)))
        if cfg.hybrid == "et":
            s_val, s_te = forest_scores("extratrees", htr.numpy(), data["y_train"], [hva.numpy(), hte.numpy()],
                                        cfg.model, seed)
        else:
            with torch.no_grad():
                clf = fit_linear(htr, ytr, cfg.clf_l2, cfg.clf_max_iter)
                s_val = torch.sigmoid(clf(hva)).numpy()
                s_te = torch.sigmoid(clf(hte)).numpy()
    if "step" in curve and curve["step"]:
        chosen["best_step"] = float(curve["step"][int(np.argmax(curve["val_map"]))])
        chosen["steps_run"] = float(curve["step"][-1])
    t_glob = choose_threshold(yva, s_val)
    t_lab = label_thresholds(yva, s_val) if cfg.per_label_thresholds else None
    y_te = data["y_test"]
    metrics = multilabel_metrics(y_te, s_te, cfg.threshold, cfg.precision_at)
    at_val = multilabel_metrics(y_te, s_te, t_glob)
    metrics["micro_f1_val_t"] = at_val["micro_f1"]
    metrics["macro_f1_val_t"] = at_val["macro_f1"]
    metrics["threshold_val"] = t_glob
    if t_lab is not None:
        at_lab = multilabel_metrics(y_te, s_te, t_lab)
        metrics["micro_f1_label_t"] = at_lab["micro_f1"]
        metrics["macro_f1_label_t"] = at_lab["macro_f1"]
    metrics["val_map"] = mean_average_precision(yva, s_val)
    if "g_train" in data and enc is not None:
        with torch.no_grad():
            metrics["knn_purity"] = knn_label_purity(enc(xtr).numpy(), data["g_train"], enc(xte).numpy(),
                                                     data["g_test"], cfg.knn_k)
    return SeedResult(seed, metrics, {k: list(map(float, v)) for k, v in curve.items()},
                      np.asarray(s_te, dtype=np.float32),
                      {"global": t_glob, "per_label": None if t_lab is None else t_lab.tolist()},
                      chosen, time.perf_counter() - t0)


def cv_folds(y: np.ndarray, n_folds: int, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """``n_folds`` (train rows, validation rows) index pairs of an iterative-stratification
    k-fold split (Sechidis, Tsoumakas & Vlahavas, ECML PKDD 2011; ``iterstrat``'s
    ``MultilabelStratifiedKFold``, shuffled with ``seed``): every row is in exactly one
    validation part and each label's positives are spread evenly over the folds.

    Raises:
        InputError: fewer than 2 folds or more folds than rows.
    """
    from iterstrat.ml_stratifiers import MultilabelStratifiedKFold

    y = np.asarray(y).astype(np.int64)
    if not 2 <= n_folds <= len(y):
        raise InputError(f"cv_folds: need 2 <= folds <= {len(y)} rows, got {n_folds}")
    kf = MultilabelStratifiedKFold(n_splits=n_folds, shuffle=True, random_state=seed)
    return [(np.sort(tr), np.sort(va)) for tr, va in kf.split(np.zeros((len(y), 1)), y)]


def tuning_rows(arrays) -> tuple[np.ndarray, np.ndarray]:
    """The training part of a built data set for tuning: ``x_train``/``x_val`` and
    ``y_train``/``y_val`` stacked (``[N_train + N_val, F]`` / ``[., C]``). Reads no other key,
    so the test split is never touched."""
    x = np.concatenate([np.asarray(arrays["x_train"]), np.asarray(arrays["x_val"])])
    y = np.concatenate([np.asarray(arrays["y_train"]), np.asarray(arrays["y_val"])])
    return x, y


def cv_objective(x: np.ndarray, y: np.ndarray, folds: list[tuple[np.ndarray, np.ndarray]], cfg: TrainConfig,
                 run_seeds: list[int], report: Callable[[int, float], None] | None = None) -> tuple[float, float]:
    """Cross-validated tuning objective: fold ``f`` trains :func:`run_seed` with seed
    ``run_seeds[f % len(run_seeds)]`` on the fold's training rows, its held-out rows acting as
    the validation split (early stopping, logistic-regression C, thresholds) and the objective
    being their mAP. ``report(f, running mean)`` after each fold (for a pruner).

    Returns:
        ``(mean, standard error)`` of the folds' validation mAP (se = sample std / sqrt(k)).
    """
    vals = []
    for f, (tr, va) in enumerate(folds):
        d = {"x_train": x[tr], "y_train": y[tr], "x_val": x[va], "y_val": y[va],
             "x_test": x[va], "y_test": y[va]}
        vals.append(run_seed(d, cfg, int(run_seeds[f % len(run_seeds)])).metrics["val_map"])
        if report is not None:
            report(f, float(np.mean(vals)))
    v = np.asarray(vals)
    return float(v.mean()), float(v.std(ddof=1) / math.sqrt(len(v))) if len(v) > 1 else 0.0


def _run_seed_star(args: tuple) -> SeedResult:
    return run_seed(*args)


def run_seeds(data: dict[str, np.ndarray], cfg: TrainConfig, seeds: list[int], workers: int = 1,
              progress: Callable[[SeedResult], None] | None = None) -> list[SeedResult]:
    """Run :func:`run_seed` for every seed, in ``workers`` forked processes when > 1.

    Results come back in ``seeds`` order and do not depend on ``workers``.
    """
    jobs = [(data, cfg, s) for s in seeds]
    if workers <= 1 or len(seeds) == 1:
        out = []
        for j in jobs:
            out.append(run_seed(*j))
            if progress:
                progress(out[-1])
        return out
    import multiprocessing as mp

    import sklearn.metrics  # noqa: F401  (imported once here, inherited by the forked workers)

    ctx = mp.get_context("fork")
    with ProcessPoolExecutor(max_workers=min(workers, len(seeds)), mp_context=ctx) as pool:
        out = []
        for r in pool.map(_run_seed_star, jobs):
            out.append(r)
            if progress:
                progress(r)
    return out


def summarize(results: list[SeedResult]) -> dict[str, Any]:
    """Flat metrics JSON: ``<metric>`` (mean), ``<metric>_std`` (sample std, ddof=1),
    ``<metric>_seed<s>`` per seed, ``n_seeds``."""
    out: dict[str, Any] = {"n_seeds": len(results)}
    keys = [k for k in results[0].metrics if k != "map_labels_skipped"]
    for k in keys:
        vals = np.array([r.metrics[k] for r in results], dtype=np.float64)
        out[k] = float(vals.mean())
        out[f"{k}_std"] = float(vals.std(ddof=1)) if len(vals) > 1 else 0.0
        for r in results:
            out[f"{k}_seed{r.seed}"] = float(r.metrics[k])
    out["map_labels_skipped"] = float(results[0].metrics.get("map_labels_skipped", 0.0))
    for k in results[0].chosen:
        out[k] = float(np.mean([r.chosen[k] for r in results]))
    return out


#: Hyperparameters a tuned-choices JSON may set for a contrastive variant or ``bce`` (the rest
#: of the config is fixed); the scikit-learn baselines take the keys of
#: ``params.multilabel.MODEL_KEYS`` instead (into ``TrainConfig.model``).
TUNABLE = ("temperature", "lr", "mask_rate", "queue", "weight_decay", "clf_l2")
#: Exploratory hybrids of a contrastive encoder and the raw features (not tuned themselves:
#: they reuse the tuned choices of ``multilabel.hybrid_base`` and, for ``et``, of
#: ``extratrees``). ``hybrid_concat``: the linear probe on ``[x, h]``; ``hybrid_et``:
#: ExtraTrees on ``[x, h]`` (``h`` standardised with training statistics).
HYBRIDS = {"hybrid_concat": "concat", "hybrid_et": "et"}


def make_config(ml, dataset: str, variant: str, encoder: str = "mlp",
                choices: dict[str, Any] | None = None, model_choices: dict[str, Any] | None = None) -> TrainConfig:
    """:class:`TrainConfig` for one (data set, variant) from the ``multilabel`` params section:
    ``train`` <- ``data.<dataset>`` overrides <- ``variants.<variant>`` (temperature, lr,
    mask_rate, queue, kwargs, model) <- ``choices`` (tuned values: keys in :data:`TUNABLE`,
    or in ``MODEL_KEYS[variant]`` for a scikit-learn baseline).

    A hybrid of :data:`HYBRIDS` takes its encoder configuration from the variant
    ``ml.hybrid_base`` (``choices`` = that variant's tuned choices) and, for ``hybrid_et``,
    its forest from ``extratrees`` (``model_choices`` = ExtraTrees' tuned choices).

    Raises:
        UnknownNameError: unknown data set / variant. InputError: a choice that is not tunable.
    """
    from ..params.multilabel import MODEL_DEFAULTS, MODEL_KEYS, variant_loss

    if variant in HYBRIDS:
        cfg = make_config(ml, dataset, ml.hybrid_base, encoder, choices)
        cfg.variant, cfg.hybrid = variant, HYBRIDS[variant]
        if cfg.hybrid == "et":
            cfg.model = make_config(ml, dataset, "extratrees", encoder, model_choices).model
        return cfg
    if variant not in ml.variants:
        raise UnknownNameError(f"multilabel.variants has no entry {variant!r}")
    if dataset not in ml.data:
        raise UnknownNameError(f"multilabel.data has no entry {dataset!r}")
    t, d, v = ml.train, ml.data[dataset], ml.variants[variant]
    cfg = TrainConfig(
        variant=variant, loss=variant_loss(variant)[0], temperature=v.temperature,
        loss_kwargs=dict(v.kwargs), encoder=encoder, hidden=list(t.hidden), enc_dim=t.enc_dim,
        proj_dim=t.proj_dim, dropout=t.dropout, batch_size=d.batch_size or t.batch_size,
        max_steps=t.max_steps, eval_every=t.eval_every, patience=t.patience,
        lr=v.lr if v.lr is not None else t.lr, weight_decay=t.weight_decay, warmup=t.warmup,
        mask_rate=v.mask_rate if v.mask_rate is not None else t.mask_rate,
        queue=v.queue if v.queue is not None else t.queue, clf_max_iter=t.clf_max_iter,
        clf_l2=t.clf_l2, threshold=t.threshold, per_label_thresholds=t.per_label_thresholds,
        logreg_c=list(t.logreg_c), logreg_extend=t.logreg_extend, precision_at=list(d.precision_at),
        knn_k=t.knn_k, threads=t.threads_per_worker, device=t.device,
        model={**MODEL_DEFAULTS.get(variant, {}), **v.model})
    keys = MODEL_KEYS.get(variant)
    for k, val in (choices or {}).items():
        if keys is not None:
            if k not in keys:
                raise InputError(f"tuned choice {k!r} is not a hyperparameter of {variant} ({keys})")
            cfg.model[k] = val
            continue
        if k not in TUNABLE:
            raise InputError(f"tuned choice {k!r} is not tunable (tunable: {TUNABLE})")
        setattr(cfg, k, type(getattr(cfg, k))(val))
    return cfg
