"""Representation phase of the multi-label contrastive variants and their classifier phase
(the module docstring of :mod:`contrastlab.training.multilabel`): :func:`train_contrastive`
(MLP encoder + projection head under a registry loss, early stopping on the ridge probe's
validation mAP) and :func:`fit_linear` (the L-BFGS logistic layer on the frozen encoder).
"""

from __future__ import annotations

from typing import Callable

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ..models.mlp import ProjectionHead, build_encoder
from .multilabel_core import TrainConfig, MemoryQueue, _fit_best, mask_views, resolve_loss, ridge_probe_scores

__all__ = ["train_contrastive", "fit_linear"]


def train_contrastive(x: torch.Tensor, y: torch.Tensor, xva: torch.Tensor, yva: np.ndarray,
                      cfg: TrainConfig, gen: torch.Generator,
                      loss_fn: Callable[..., torch.Tensor] | None = None,
                      picks: dict | None = None) -> tuple[nn.Module, dict[str, list[float]]]:
    """Representation phase (see the module docstring).

    Args:
        x: float32 ``[N, F]``; y: float32 multi-hot ``[N, C]`` (training part).
        xva: float32 ``[N_val, F]``; yva: {0,1} ``[N_val, C]`` (validation part).
        picks: receives the early-stopping pick's record (``picks["early_stopping"]``).
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

    curve = _fit_best(enc, step_loss, opt, len(x), cfg, gen,
                      lambda: ridge_probe_scores(enc(x), y, enc(xva)), yva, picks)
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
