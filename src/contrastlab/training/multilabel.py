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
stopping on its own validation mAP) and ``logreg`` (binary-relevance logistic regression,
scikit-learn liblinear, one classifier per label, C picked from ``logreg_c`` by validation mAP).

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
           "run_seed", "run_seeds", "resolve_loss", "summarize", "make_config", "TUNABLE"]


@dataclass
class TrainConfig:
    """Hyper-parameters of one (data set, variant) run; see ``params/multilabel.py``.

    ``variant`` is the model name (``logreg``, ``bce`` or a contrastive variant); ``loss`` is
    the registry loss of a contrastive variant (``None`` for the baselines).
    """

    variant: str = "simdis"
    loss: str | None = "simdis"
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
    logreg_c: list[float] = field(default_factory=lambda: [0.01, 0.1, 1.0, 10.0])
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
                 seed: int) -> tuple[Callable[[np.ndarray], np.ndarray], dict[str, list[float]], float]:
    """Binary-relevance logistic regression (scikit-learn ``LogisticRegression``, liblinear,
    L2), one classifier per label; ``C`` from ``grid`` by validation mAP. A label constant in
    the training part gets its training frequency as score. Returns
    ``(predict_proba [N, C], curve {C, val_map}, best C)``."""
    from sklearn.linear_model import LogisticRegression

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
    best = (-1.0, None, None)
    for c in grid:
        pred = fit(c)
        m = mean_average_precision(yva, pred(xva))
        curve["C"].append(c)
        curve["val_map"].append(m)
        if m > best[0] + 1e-9:
            best = (m, pred, c)
    return best[1], curve, float(best[2])


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
        pred, curve, c = train_logreg(data["x_train"], data["y_train"], data["x_val"], yva, cfg.logreg_c, seed)
        s_val, s_te = pred(data["x_val"]), pred(data["x_test"])
        chosen["C"] = c
    elif cfg.variant == "bce":
        pred, curve = train_bce(xtr, ytr, xva, yva, cfg, gen)
        s_val, s_te = pred(xva).numpy(), pred(xte).numpy()
    else:
        enc, curve = train_contrastive(xtr, ytr, xva, yva, cfg, gen)
        with torch.no_grad():
            clf = fit_linear(enc(xtr), ytr, cfg.clf_l2, cfg.clf_max_iter)
            s_val = torch.sigmoid(clf(enc(xva))).numpy()
            s_te = torch.sigmoid(clf(enc(xte))).numpy()
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


#: Hyperparameters a tuned-choices JSON may set (the rest of the config is fixed).
TUNABLE = ("temperature", "lr", "mask_rate", "queue", "weight_decay", "clf_l2")


def make_config(ml, dataset: str, variant: str, encoder: str = "mlp",
                choices: dict[str, Any] | None = None) -> TrainConfig:
    """:class:`TrainConfig` for one (data set, variant) from the ``multilabel`` params section:
    ``train`` <- ``data.<dataset>`` overrides <- ``variants.<variant>`` (temperature, lr,
    mask_rate, queue, kwargs) <- ``choices`` (tuned values, keys in :data:`TUNABLE`).

    Raises:
        KeyError: unknown data set / variant. ValueError: a choice that is not tunable.
    """
    from ..params.multilabel import variant_loss

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
        logreg_c=list(t.logreg_c), precision_at=list(d.precision_at), knn_k=t.knn_k,
        threads=t.threads_per_worker, device=t.device)
    for k, val in (choices or {}).items():
        if k not in TUNABLE:
            raise InputError(f"tuned choice {k!r} is not tunable (tunable: {TUNABLE})")
        setattr(cfg, k, type(getattr(cfg, k))(val))
    return cfg
