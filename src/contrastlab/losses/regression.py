"""Regression baselines for retrieval: predict the target vector itself (the Smooth-L1 and
cosine baselines of the retrieval experiment notes, Exp 1.3; see docs/sources.md).

No negatives: each prediction is compared with its own target only.
"""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor

__all__ = ["smoothl1_loss", "cosine_loss"]


def _check_pair(pred: Tensor, target: Tensor) -> None:
    if pred.dim() != 2 or pred.shape != target.shape:
        raise ValueError(f"pred and target must both be [B, D] of the same shape, got {tuple(pred.shape)} and {tuple(target.shape)}")


def smoothl1_loss(pred: Tensor, target: Tensor, *, beta: float = 1.0, reduction: str = "mean", normalize: bool = False) -> Tensor:
    """Smooth-L1 (Huber with threshold ``beta``) between prediction and target (``torch.nn.SmoothL1Loss``).

    Args:
        pred, target: ``[B, D]`` float tensors (not normalised unless ``normalize=True``).
        beta: switch point between the quadratic and linear parts (``F.smooth_l1_loss``).
        reduction: ``"mean"`` over all B*D elements (as ``nn.SmoothL1Loss``), ``"sum"``, ``"none"``.
        normalize: L2-normalise both inputs first (default False: the raw vectors are compared).

    Returns:
        Scalar tensor (``[B, D]`` for ``"none"``).

    Raises:
        ValueError: shapes differ or are not 2-D.
        TypeError: an unknown keyword (e.g. ``temperature``: this loss has none).
    """
    _check_pair(pred, target)
    if normalize:
        pred, target = F.normalize(pred, dim=-1), F.normalize(target, dim=-1)
    return F.smooth_l1_loss(pred, target, beta=beta, reduction=reduction)


def cosine_loss(pred: Tensor, target: Tensor, *, reduction: str = "mean", eps: float = 1e-8) -> Tensor:
    """``1 - cos(pred_i, target_i)``, the cosine regression objective; scale-invariant.

    Args:
        pred, target: ``[B, D]`` float tensors (any norm; the cosine normalises).
        reduction: ``"mean"`` over B (default), ``"sum"`` or ``"none"`` (``[B]``).
        eps: lower bound of each norm in the cosine (``F.cosine_similarity``).

    Raises:
        ValueError: shapes differ or are not 2-D, unknown reduction.
        TypeError: an unknown keyword.
    """
    _check_pair(pred, target)
    per = 1.0 - F.cosine_similarity(pred, target, dim=-1, eps=eps)
    if reduction == "mean":
        return per.mean()
    if reduction == "sum":
        return per.sum()
    if reduction == "none":
        return per
    raise ValueError(f"reduction must be 'mean', 'sum' or 'none', got {reduction!r}")
