"""Shared pieces of the multi-label training (:mod:`contrastlab.training.multilabel`): the
run configuration and result, the learning-rate schedule, feature-masked views, the memory
queue, the registry loss with its keyword arguments bound, the ridge validation probe and the
step loop with early stopping on validation mAP that the contrastive encoder and the BCE MLP
share.
"""

from __future__ import annotations

import copy
import functools
import inspect
import math
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import torch

from ..errors import InputError
from ..evaluation.multilabel import mean_average_precision
from ..losses.registry import VariantSpec, track_variants

#: ``needs`` of the registry losses this module loads (read by scripts/stage_deps.py).
LOSS_NEEDS = ("multilabels",)

__all__ = ["TrainConfig", "SeedResult", "warmup_cosine", "mask_views", "MemoryQueue",
           "resolve_loss", "ridge_probe_scores", "track_row"]


def track_row(name: str) -> VariantSpec | None:
    """The multi-label row ``name`` of the variant table (its ``kind``, ``method``,
    ``estimator``, ``model_of``, ...), or None when the table has no such row."""
    return track_variants("multilabel").get(name)

@dataclass
class TrainConfig:
    """Hyper-parameters of one (data set, variant) run; see ``params/multilabel.py``.

    ``variant`` is the row name (a baseline, a contrastive variant or a hybrid of the variant
    table); ``loss`` is the registry loss of a contrastive variant or of a hybrid's encoder
    (``None`` for the baselines); ``model`` the scikit-learn baseline's (or the hybrid
    forest's) hyperparameters; ``finetune_lr`` / ``finetune_mask_rate`` a fine-tuning hybrid's
    learning rate and masking rate of its BCE phase (``None`` otherwise); ``hybrid`` ``""``
    or the hybrid's ``method`` (``"concat"``, ``"et"``, ``"finetune"``; see
    :data:`contrastlab.training.multilabel.HYBRIDS`).
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
    finetune_lr: float | None = None
    finetune_mask_rate: float | None = None
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
    "per_label": [C] or None}`` chosen on validation. ``picks``: each validation pick's record
    (``threshold``, ``early_stopping``, ``early_stopping_pretrain``, ``C``:
    :func:`contrastlab.evaluation.picks.pick_record`).
    """

    seed: int
    metrics: dict[str, float]
    curve: dict[str, list[float]]
    scores: np.ndarray
    thresholds: dict[str, Any]
    chosen: dict[str, float]
    time_s: float
    picks: dict[str, dict] = field(default_factory=dict)


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
          name: str) -> tuple[Any, dict[str, list[float]], int]:
    """Shared step loop with early stopping; returns (best snapshot, curve, index of the kept
    check in the curve; -1 when none was kept).

    Raises:
        FloatingPointError: a non-finite loss (naming ``name`` and the step).
    """
    sched = _schedule(opt, cfg)
    bs = min(cfg.batch_size, n)
    curve: dict[str, list[float]] = {"step": [], "loss": [], "val_map": []}
    best, best_state, bad, step, kept = -1.0, None, 0, 0, -1
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
                    best, best_state, bad, kept = m, snapshot(), 0, len(curve["step"]) - 1
                else:
                    bad += 1
                if bad >= cfg.patience:
                    return best_state, curve, kept
            if step >= cfg.max_steps:
                break
    return best_state, curve, kept


def _fit_best(module: torch.nn.Module, step_loss: Callable[[torch.Tensor], torch.Tensor], opt,
              n: int, cfg: TrainConfig, gen: torch.Generator, scores: Callable[[], np.ndarray],
              yva: np.ndarray, picks: dict | None = None) -> dict[str, list[float]]:
    """:func:`_loop` with early stopping on the validation mAP of ``scores()`` against ``yva``
    (computed with ``module`` in eval mode and no gradients, then back in train mode) and
    ``module``'s state as the snapshot; loads the best state (if any) into ``module`` and
    leaves it in eval mode. Returns the curve. With ``picks`` (a dict), the kept step's record
    (:func:`contrastlab.evaluation.picks.pick_record`: margin in validation rows over every
    other checked step) goes to ``picks["early_stopping"]``."""
    from ..evaluation.picks import loo_mean_average_precision, pick_record

    loos: list[tuple[float, np.ndarray]] = []

    def val_map() -> float:
        module.eval()
        with torch.no_grad():
            s = scores()
        module.train()
        if picks is not None:
            loos.append(loo_mean_average_precision(yva, s))
        return mean_average_precision(yva, s)

    best, curve, kept = _loop(step_loss, opt, n, cfg, gen, val_map,
                              lambda: copy.deepcopy(module.state_dict()), cfg.variant)
    if best is not None:
        module.load_state_dict(best)
    module.eval()
    if picks is not None and loos:
        picks["early_stopping"] = pick_record("validation mAP", curve["step"],
                                              np.array([f for f, _ in loos]),
                                              np.stack([l for _, l in loos]), kept)
    return curve
