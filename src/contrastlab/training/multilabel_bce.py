"""The BCE MLP baseline of the multi-label track (variant-table method ``mlp_bce``): the
contrastive variants' encoder and a linear layer trained end to end with binary cross-entropy,
with the same steps, schedule and early stopping (:func:`train_bce`). The same function
fine-tunes a contrastively pre-trained encoder (hybrid method ``finetune``).
"""

from __future__ import annotations

import copy
from typing import Callable

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ..models.mlp import build_encoder
from .multilabel_core import TrainConfig, _fit_best, mask_views

__all__ = ["train_bce"]


def train_bce(x: torch.Tensor, y: torch.Tensor, xva: torch.Tensor, yva: np.ndarray, cfg: TrainConfig,
              gen: torch.Generator, encoder: nn.Module | None = None, picks: dict | None = None,
              ) -> tuple[Callable[[torch.Tensor], torch.Tensor], dict[str, list[float]]]:
    """BCE MLP baseline: encoder + linear layer trained end to end (same steps, schedule,
    masking rate of its own variant, early stopping on validation mAP).

    Args:
        x: float32 ``[N, F]``; y: float32 multi-hot ``[N, C]`` (training part).
        xva: float32 ``[N_val, F]``; yva: {0,1} ``[N_val, C]`` (validation part).
        cfg: ``lr``, ``mask_rate``, ``max_steps``, ... of the run.
        encoder: a trained encoder ``F -> enc_dim`` to start from instead of a fresh one
            (contrastive pre-training, then fine-tuning: Audibert, Gauffre & Amini 2024). It
            is copied, every parameter trainable; the argument itself is left unchanged.
        picks: receives the early-stopping pick's record (``picks["early_stopping"]``).

    Returns:
        ``(predict, curve)``: ``predict(a [M, F]) -> [M, C]`` probabilities of the model at
        its best validation mAP (``predict.model``: that ``nn.Sequential(encoder, linear)``,
        eval mode) and the curve (``step``, ``loss``, ``val_map``).
    """
    if encoder is None:
        enc = build_encoder(cfg.encoder, x.shape[1], cfg.hidden, cfg.enc_dim, cfg.dropout)
    else:
        enc = copy.deepcopy(encoder)
        for p in enc.parameters():
            p.requires_grad_(True)
    clf = nn.Linear(cfg.enc_dim, y.shape[1])
    model = nn.Sequential(enc, clf)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    model.train()

    def step_loss(idx: torch.Tensor) -> torch.Tensor:
        xb = mask_views(x[idx], cfg.mask_rate, gen, n_views=1)[:, 0]
        return F.binary_cross_entropy_with_logits(model(xb), y[idx])

    curve = _fit_best(model, step_loss, opt, len(x), cfg, gen,
                      lambda: torch.sigmoid(model(xva)).numpy(), yva, picks)

    def predict(a: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            return torch.sigmoid(model(a))

    predict.model = model
    return predict, curve
