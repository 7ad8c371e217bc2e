"""Two-phase multi-label supervised contrastive training (Sim-Dis paper, Appendix C.4).

Phase 1 (representation): encoder + two-layer projection head to ``D_P`` (256), trained with
a multi-label contrastive loss from the registry,
``get_loss(name)(z, y, temperature=T)`` where ``z = normalize(Proj(Enc(x)))`` ``[B, D_P]`` and
``y`` is the multi-hot ``[B, C]`` float label matrix of the batch; AdamW with a cosine
learning-rate schedule after a linear warm-up over the first 5% of the steps; T = 0.07.
Phase 2 (classifier): the projection head is dropped, the encoder is frozen, and a linear
layer ``H -> C`` is trained on ``h = Enc(x)`` with BCE (Khosla et al. 2020 protocol).
Baseline (``loss="bce"``): no contrastive phase; encoder + linear layer trained end-to-end
with BCE for the same number of epochs.

Everything random is seeded from the seed argument: on CPU a rerun gives identical numbers,
whatever the number of worker processes (each seed runs alone in one process).
"""

from __future__ import annotations

import math
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ..errors import InputError
from ..evaluation.multilabel import knn_label_purity, multilabel_metrics
from ..models.mlp import ProjectionHead, build_encoder

__all__ = ["TrainConfig", "SeedResult", "warmup_cosine", "train_contrastive", "train_linear",
           "train_bce", "run_seed", "run_seeds", "resolve_loss", "summarize"]
#: ``needs`` of the registry losses this module loads (read by scripts/stage_deps.py).
LOSS_NEEDS = ("multilabels",)


@dataclass
class TrainConfig:
    """Hyper-parameters of one (data set, loss) variant; see ``params/multilabel.py``."""

    loss: str = "simdis"
    temperature: float = 0.07
    loss_kwargs: dict[str, Any] = field(default_factory=dict)
    encoder: str = "mlp"
    hidden: list[int] = field(default_factory=lambda: [512])
    enc_dim: int = 256
    proj_dim: int = 256
    dropout: float = 0.1
    batch_size: int = 256
    epochs: int = 30
    lr: float = 1e-3
    weight_decay: float = 1e-4
    warmup: float = 0.05
    clf_epochs: int = 40
    clf_lr: float = 5e-3
    threshold: float = 0.5
    precision_at: list[int] = field(default_factory=list)
    knn_k: int = 5
    threads: int = 1
    device: str = "cpu"


@dataclass
class SeedResult:
    """What one seed returns: test metrics, per-epoch histories, wall seconds."""

    seed: int
    metrics: dict[str, float]
    history: list[float]
    clf_history: list[float]
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


def _batches(n: int, bs: int, gen: torch.Generator) -> list[torch.Tensor]:
    perm = torch.randperm(n, generator=gen)
    if n > bs:  # drop the ragged last batch: contrastive losses need enough in-batch pairs
        return list(perm[: (n // bs) * bs].split(bs))
    return [perm]


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


def train_contrastive(x: torch.Tensor, y: torch.Tensor, cfg: TrainConfig, gen: torch.Generator,
                      loss_fn: Callable[..., torch.Tensor] | None = None,
                      on_epoch: Callable[[int, float], None] | None = None) -> tuple[nn.Module, list[float]]:
    """Phase 1: train ``Enc`` + ``Proj`` with the contrastive loss ``cfg.loss``.

    Args:
        x: float32 ``[N, F]``; y: float32 multi-hot ``[N, C]``.
        loss_fn: defaults to ``contrastlab.losses.get_loss(cfg.loss)``; called as
            ``loss_fn(z, y_batch, temperature=cfg.temperature)`` with ``z`` L2-normalised.

    Returns:
        ``(encoder, history)``: the encoder (projection head discarded) and the mean loss of
        each epoch.

    Raises:
        FloatingPointError: the loss became NaN/inf (names the loss and the epoch).
    """
    if loss_fn is None:
        loss_fn = resolve_loss(cfg.loss, cfg.loss_kwargs)
    enc = build_encoder(cfg.encoder, x.shape[1], cfg.hidden, cfg.enc_dim, cfg.dropout)
    proj = ProjectionHead(cfg.enc_dim, cfg.proj_dim)
    params = list(enc.parameters()) + list(proj.parameters())
    opt = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=cfg.weight_decay)
    enc.train()
    proj.train()

    def batch_loss(idx: torch.Tensor) -> torch.Tensor:
        z = F.normalize(proj(enc(x[idx])), dim=1)
        return loss_fn(z, y[idx], temperature=cfg.temperature)

    history = _fit(opt, batch_loss, len(x), cfg.epochs, cfg, gen, name=cfg.loss, on_epoch=on_epoch)
    enc.eval()
    for p in enc.parameters():
        p.requires_grad_(False)
    return enc, history


def _fit(opt: torch.optim.Optimizer, batch_loss: Callable[[torch.Tensor], torch.Tensor],
         n: int, epochs: int, cfg: TrainConfig, gen: torch.Generator, *, name: str,
         on_epoch: Callable[[int, float], None] | None = None) -> list[float]:
    """The shared mini-batch loop: ``epochs`` passes over ``n`` rows in seeded batches,
    AdamW-style step plus the warm-up/cosine schedule per step; returns the per-epoch mean loss.

    Raises:
        FloatingPointError: a non-finite loss (naming ``name`` and the epoch).
    """
    steps = epochs * len(_batches(n, cfg.batch_size, torch.Generator().manual_seed(0)))
    sched = torch.optim.lr_scheduler.LambdaLR(opt, warmup_cosine(steps, cfg.warmup))
    history: list[float] = []
    for epoch in range(epochs):
        total, count = 0.0, 0
        for idx in _batches(n, cfg.batch_size, gen):
            loss = batch_loss(idx)
            if not torch.isfinite(loss):
                raise FloatingPointError(f"loss {name!r} is {loss.item()} at epoch {epoch + 1}")
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
            total += float(loss.detach())
            count += 1
        history.append(total / max(1, count))
        if on_epoch:
            on_epoch(epoch + 1, history[-1])
    return history


def train_linear(h: torch.Tensor, y: torch.Tensor, cfg: TrainConfig, gen: torch.Generator) -> tuple[nn.Linear, list[float]]:
    """Phase 2: a linear layer ``H -> C`` on frozen features ``h`` ``[N, H]`` with BCE (AdamW,
    cosine schedule); returns the layer and the per-epoch mean BCE."""
    clf = nn.Linear(h.shape[1], y.shape[1])
    opt = torch.optim.AdamW(clf.parameters(), lr=cfg.clf_lr, weight_decay=cfg.weight_decay)
    hist = _fit(opt, lambda idx: F.binary_cross_entropy_with_logits(clf(h[idx]), y[idx]),
                len(h), cfg.clf_epochs, cfg, gen, name="linear classifier (BCE)")
    return clf, hist


def train_bce(x: torch.Tensor, y: torch.Tensor, cfg: TrainConfig, gen: torch.Generator) -> tuple[nn.Module, nn.Linear, list[float]]:
    """Baseline: encoder + linear layer trained end-to-end with BCE for ``cfg.epochs``."""
    enc = build_encoder(cfg.encoder, x.shape[1], cfg.hidden, cfg.enc_dim, cfg.dropout)
    clf = nn.Linear(cfg.enc_dim, y.shape[1])
    opt = torch.optim.AdamW(list(enc.parameters()) + list(clf.parameters()), lr=cfg.lr,
                            weight_decay=cfg.weight_decay)
    enc.train()
    hist = _fit(opt, lambda idx: F.binary_cross_entropy_with_logits(clf(enc(x[idx])), y[idx]),
                len(x), cfg.epochs, cfg, gen, name="bce")
    enc.eval()
    return enc, clf, hist


def run_seed(data: dict[str, np.ndarray], cfg: TrainConfig, seed: int) -> SeedResult:
    """Train and evaluate one seed of one variant.

    Args:
        data: ``x_train`` ``[N, F]``, ``y_train`` ``[N, C]``, ``x_test``, ``y_test`` (numpy);
            optional ``g_train``/``g_test`` ``[N]`` group ids for the kNN purity (HumanEval).
        cfg: the variant's :class:`TrainConfig` (``cfg.loss == "bce"`` is the baseline).
        seed: seeds torch/numpy/python for this run.

    Returns:
        :class:`SeedResult` with test metrics (see :func:`multilabel_metrics`, plus
        ``knn_purity`` when groups are given).
    """
    from ..utils import seed_everything

    torch.set_num_threads(max(1, cfg.threads))
    t0 = time.perf_counter()
    gen = seed_everything(seed)
    xtr = torch.as_tensor(data["x_train"], dtype=torch.float32)
    ytr = torch.as_tensor(data["y_train"], dtype=torch.float32)
    xte = torch.as_tensor(data["x_test"], dtype=torch.float32)
    if cfg.loss == "bce":
        enc, clf, hist = train_bce(xtr, ytr, cfg, gen)
        clf_hist: list[float] = []
    else:
        enc, hist = train_contrastive(xtr, ytr, cfg, gen)
        with torch.no_grad():
            htr = enc(xtr)
        clf, clf_hist = train_linear(htr, ytr, cfg, gen)
    with torch.no_grad():
        hte = enc(xte)
        scores = torch.sigmoid(clf(hte)).numpy()
    metrics = multilabel_metrics(data["y_test"], scores, cfg.threshold, cfg.precision_at)
    if "g_train" in data:
        with torch.no_grad():
            htr = enc(xtr)
        metrics["knn_purity"] = knn_label_purity(htr.numpy(), data["g_train"], hte.numpy(),
                                                 data["g_test"], cfg.knn_k)
    return SeedResult(seed, metrics, hist, clf_hist, time.perf_counter() - t0)


def _warmup(cfg: TrainConfig) -> None:
    """Pay the one-off lazy-initialisation costs (optimizer step machinery, loss module
    import) once in the parent, single-threaded, so forked workers inherit them."""
    torch.set_num_threads(max(1, cfg.threads))
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(8, 4, generator=gen)
    y = (torch.rand(8, 3, generator=gen) > 0.5).float()
    small = TrainConfig(**{**cfg.__dict__, "hidden": [4], "enc_dim": 4, "proj_dim": 4, "epochs": 1,
                           "clf_epochs": 1, "batch_size": 8})
    if cfg.loss == "bce":
        train_bce(x, y, small, gen)
    else:
        enc, _ = train_contrastive(x, y, small, gen)
        with torch.no_grad():
            h = enc(x)
        train_linear(h, y, small, gen)


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

    _warmup(cfg)
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
    ``<metric>_seed<s>`` per seed, ``n_seeds``, ``map_labels_skipped``, ``final_loss``."""
    out: dict[str, Any] = {"n_seeds": len(results)}
    keys = [k for k in results[0].metrics if k != "map_labels_skipped"]
    for k in keys:
        vals = np.array([r.metrics[k] for r in results], dtype=np.float64)
        out[k] = float(vals.mean())
        out[f"{k}_std"] = float(vals.std(ddof=1)) if len(vals) > 1 else 0.0
        for r in results:
            out[f"{k}_seed{r.seed}"] = float(r.metrics[k])
    out["map_labels_skipped"] = float(results[0].metrics.get("map_labels_skipped", 0.0))
    out["final_loss"] = float(np.mean([r.history[-1] for r in results]))
    return out
