"""Distributed evaluation of the losses: local anchors against all ranks' rows.

Each rank computes the *sum* of its anchors' losses against the contrast rows gathered
from every rank (with gradient, ``all_gather_with_grad``) and divides by the global number
of terms (``all_reduce_sum`` of the local counts). The ranks' results add up to the
single-process mean over the concatenated batch, and because the gather's backward sums
each slice's gradient over ranks, ``loss.backward()`` on every rank gives each rank's
embeddings exactly the gradient of the one-process loss. Under DDP, which averages
parameter gradients over the W ranks, backpropagate ``loss * ddp_loss_scale()`` (= W).
"""

from __future__ import annotations

from typing import Callable

import torch
from torch import Tensor

from contrastlab import distributed as D

__all__ = ["distributed_loss", "distributed_infonce_loss"]


def distributed_loss(loss: str | Callable, features: Tensor, labels: Tensor | None = None, **kw) -> Tensor:
    """This rank's share of a label-based loss (supcon, all, any, mulsupcon, simdis, ...).

    Args:
        loss: registry name or loss function accepting ``contrast_features``,
            ``contrast_labels``, ``anchor_offset``, ``reduction="sum"``, ``return_stats``.
        features: local ``[n, D]`` / ``[n, n_views, D]``; labels: local ``[n]`` / ``[n, C]``.
        **kw: loss keywords (``temperature``, ``mode``...). For MulSupCon pass
            ``reduction="pairs"`` (default) or ``"anchors"`` to choose the global denominator.

    Returns:
        Scalar; summed over ranks it equals the single-process mean loss. In a single
        process it is the plain loss.
    """
    if isinstance(loss, str):
        from .registry import get_loss

        loss = get_loss(loss)
    if D.world_size() == 1:
        return loss(features, labels, **kw)
    mean_kind = kw.pop("reduction", "mean")
    if mean_kind not in ("mean", "pairs", "anchors"):
        raise ValueError(f"distributed_loss computes a global mean; reduction={mean_kind!r} is not supported")
    gathered = D.all_gather_with_grad(features)
    glabels = D.all_gather_no_grad(labels) if labels is not None else None
    offset = D.rank_offset(features.shape[0], features.device)
    total, stats = loss(features, labels, contrast_features=gathered, contrast_labels=glabels,
                        anchor_offset=offset, reduction="sum", return_stats=True, **kw)
    count = stats.n_anchors if mean_kind == "anchors" else stats.n_terms
    n = D.all_reduce_sum(count.to(torch.float64))
    return total / n.clamp_min(1).to(total.dtype)


def distributed_infonce_loss(pred: Tensor, targets: Tensor, log_temperature: Tensor | float,
                             hard_negatives: Tensor | None = None, *,
                             targets_with_grad: bool | None = None, **kw) -> Tensor:
    """This rank's share of InfoNCE (van den Oord et al. 2018) with the targets of all ranks as negatives.

    ``targets`` (local ``[B, D]``) are gathered with gradient when they require grad (or
    ``targets_with_grad=True``), without otherwise (frozen teacher targets).
    The positive of ``pred[i]`` is the gathered row ``rank_offset + i``.
    """
    from .infonce import infonce_hardneg_loss, infonce_loss

    if targets_with_grad is None:
        targets_with_grad = targets.requires_grad
    if D.world_size() == 1:
        gathered, offset = targets, 0
    else:
        gathered = D.all_gather_with_grad(targets) if targets_with_grad else D.all_gather_no_grad(targets)
        offset = D.rank_offset(pred.shape[0], pred.device)
    if hard_negatives is not None:
        s = infonce_hardneg_loss(pred, gathered, log_temperature, hard_negatives, anchor_offset=offset, reduction="sum", **kw)
    else:
        s = infonce_loss(pred, gathered, log_temperature, anchor_offset=offset, reduction="sum", **kw)
    n = D.all_reduce_sum(torch.tensor(float(pred.shape[0]), dtype=torch.float64, device=pred.device))
    return s / n.to(s.dtype)
