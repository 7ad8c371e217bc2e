"""InfoNCE for retrieval: predictions against paired targets (van den Oord et al. 2018,
"Representation Learning with Contrastive Predictive Coding", Eq. 4, with cosine logits).

``L_i = -log( exp(p_i . b_{o+i} / tau) / sum_j exp(p_i . b_j / tau) )`` (cross-entropy over
in-batch cosine logits), i.e. ``F.cross_entropy(logits, arange(o, o + B))`` with ``logits = p b^T / tau``.

Both inputs are L2-normalised inside (``normalize=True``, the default; pass
``normalize=False`` only if they already are), so the logits are cosine similarities over
``tau``. The temperature is learnable: ``tau = exp(clamp(log_temperature, log(min_temperature),
log(max_temperature)))``, by default ``tau in [0.01, 1.0]`` (CLIP's cap of the logit
scale at 100, Radford et al. 2021; a lower clamp such as ``1e-4`` allows logits up to 10^4,
which overflow float16/bf16). Outside the clamp range the gradient w.r.t. ``log_temperature``
is 0. ``InfoNCELoss`` holds the parameter, initialised at ``log(0.07)`` (CLIP's initial value).

Distributed (the targets of every rank are negatives): pass the targets of all ranks
(``contrastlab.distributed.all_gather_no_grad`` for frozen targets, ``all_gather_with_grad``
when they are trained) and ``anchor_offset = rank_offset(B)``; with ``reduction="sum"`` divided by
the global batch size each rank holds its share of the global mean (see ``docs/losses.md``).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ._common import check_2d, reduce_terms

__all__ = ["infonce_loss", "infonce_hardneg_loss", "InfoNCELoss", "temperature_from_log"]

DEFAULT_TEMPERATURE = 0.07
MIN_TEMPERATURE = 0.01
MAX_TEMPERATURE = 1.0


def temperature_from_log(log_temperature: Tensor | float, min_temperature: float = MIN_TEMPERATURE,
                         max_temperature: float = MAX_TEMPERATURE, *,
                         like: Tensor | None = None) -> Tensor:
    """``exp(clamp(log_temperature, log(min_temperature), log(max_temperature)))`` (a scalar tensor).

    Args:
        log_temperature: scalar tensor (any float dtype; gradient flows through it) or float.
        min_temperature, max_temperature: the clamp range of tau, ``0 < min <= max``.
        like: the logits' tensor: tau is computed in its dtype (at least float32, so that a
            half-precision input does not round the exponent) on its device, then cast to
            its dtype. ``None``: float32 for a float, the tensor's own dtype otherwise.

    Raises:
        ValueError: bad clamp range, or a ``log_temperature`` with more than one element.
    """
    if not 0 < min_temperature <= max_temperature:
        raise ValueError(f"need 0 < min_temperature <= max_temperature, got {min_temperature}, {max_temperature}")
    dt = None if like is None else torch.promote_types(like.dtype, torch.float32)
    if isinstance(log_temperature, Tensor):
        lt = log_temperature if dt is None else log_temperature.to(device=like.device, dtype=dt)
    else:
        lt = torch.tensor(float(log_temperature), dtype=dt or torch.float32,
                          device=None if like is None else like.device)
    if lt.numel() != 1:
        raise ValueError(f"log_temperature must be a scalar, got shape {tuple(lt.shape)}")
    tau = lt.reshape(()).clamp(math.log(min_temperature), math.log(max_temperature)).exp()
    return tau if like is None else tau.to(like.dtype)


def _prep(pred: Tensor, targets: Tensor, anchor_offset: int, normalize: bool) -> tuple[Tensor, Tensor, Tensor]:
    check_2d("pred", pred)
    check_2d("targets", targets)
    b, m = pred.shape[0], targets.shape[0]
    if pred.shape[1] != targets.shape[1]:
        raise ValueError(f"pred [B, D] and targets [M, D] must share D, got {tuple(pred.shape)} and {tuple(targets.shape)}")
    if not 0 <= anchor_offset or anchor_offset + b > m:
        raise ValueError(f"positives targets[anchor_offset:anchor_offset+B] must exist: "
                         f"anchor_offset={anchor_offset}, B={b}, M={m}")
    if normalize:
        pred = F.normalize(pred, dim=-1)
        targets = F.normalize(targets, dim=-1)
    pos = torch.arange(anchor_offset, anchor_offset + b, device=pred.device)
    return pred, targets, pos


def infonce_loss(pred: Tensor, targets: Tensor,
                 log_temperature: Tensor | float = math.log(DEFAULT_TEMPERATURE), *,
                 anchor_offset: int = 0, reduction: str = "mean", normalize: bool = True,
                 min_temperature: float = MIN_TEMPERATURE, max_temperature: float = MAX_TEMPERATURE,
                 return_stats: bool = False):
    """In-batch InfoNCE over cosine logits (van den Oord et al. 2018, Eq. 4).

    Args:
        pred: ``[B, D]`` float predictions (anchors).
        targets: ``[M, D]`` float targets, ``M >= B`` (e.g. gathered from all ranks); the
            positive of ``pred[i]`` is ``targets[anchor_offset + i]``, every other row is a negative.
        log_temperature: scalar tensor (learnable, see :class:`InfoNCELoss`) or float;
            clamped to ``[log(min_temperature), log(max_temperature)]``.
        anchor_offset: index of this rank's first target (``contrastlab.distributed.rank_offset``;
            the same keyword as the supervised losses).
        reduction: ``"mean"`` over the B anchors, ``"sum"`` or ``"none"`` (``[B]``).
        normalize: L2-normalise ``pred`` and ``targets`` inside (default True).
        return_stats: also return :class:`~contrastlab.losses._common.LossStats`.

    Returns:
        The loss (scalar, or ``[B]`` for ``reduction="none"``); ``(loss, stats)`` with ``return_stats``.

    Raises:
        ValueError: non-2-D inputs, mismatched D, ``anchor_offset + B > M``, bad reduction.
    """
    return infonce_hardneg_loss(pred, targets, log_temperature, None, anchor_offset=anchor_offset,
                                reduction=reduction, normalize=normalize,
                                min_temperature=min_temperature, max_temperature=max_temperature,
                                return_stats=return_stats)


def infonce_hardneg_loss(pred: Tensor, targets: Tensor,
                         log_temperature: Tensor | float = math.log(DEFAULT_TEMPERATURE),
                         hard_negatives: Tensor | None = None, *, anchor_offset: int = 0,
                         hard_negative_mask: Tensor | None = None, reduction: str = "mean",
                         normalize: bool = True, min_temperature: float = MIN_TEMPERATURE,
                         max_temperature: float = MAX_TEMPERATURE, return_stats: bool = False):
    """InfoNCE with K explicit hard negatives per anchor appended to the logits' denominator.

    ``L_i = -log( e^{p_i.b_{o+i}/tau} / (sum_j e^{p_i.b_j/tau} + sum_k e^{p_i.h_ik/tau}) )``.

    Args:
        pred, targets, log_temperature, anchor_offset, reduction, normalize, min/max_temperature,
        return_stats: as :func:`infonce_loss`.
        hard_negatives: ``[B, K, D]`` mined negatives for each anchor (e.g. FAISS top-K of
            the target corpus without the anchor's own target; L2-normalised inside when
            ``normalize``). ``None`` or ``K = 0`` gives :func:`infonce_loss`.
        hard_negative_mask: optional ``[B, K]`` bool, False marks a slot to ignore (e.g. a
            mined neighbour that is the positive itself or a padding row).

    Raises:
        ValueError: as :func:`infonce_loss`, plus a ``hard_negatives`` shape other than
            ``[B, K, D]`` or a mask shape other than ``[B, K]``.
    """
    pred_n, targets_n, pos = _prep(pred, targets, anchor_offset, normalize)
    tau = temperature_from_log(log_temperature, min_temperature, max_temperature, like=pred_n)
    logits, keep = pred_n @ targets_n.T, None
    if hard_negatives is not None and hard_negatives.shape[1:2] != (0,):
        b, d = pred.shape
        if hard_negatives.dim() != 3 or hard_negatives.shape[0] != b or hard_negatives.shape[2] != d:
            raise ValueError(f"hard_negatives must be [B={b}, K, D={d}], got {tuple(hard_negatives.shape)}")
        hn = F.normalize(hard_negatives, dim=-1) if normalize else hard_negatives
        hl = torch.einsum("bd,bkd->bk", pred_n, hn)
        if hard_negative_mask is not None:
            if hard_negative_mask.shape != hl.shape:
                raise ValueError(f"hard_negative_mask must be [B, K]={tuple(hl.shape)}, got {tuple(hard_negative_mask.shape)}")
            keep = torch.cat([torch.ones_like(logits, dtype=torch.bool),
                              hard_negative_mask.bool()], dim=1)
        logits = torch.cat([logits, hl], dim=1)
    logits = logits / tau
    if keep is not None:  # after the scaling: -inf / tau would give tau a NaN gradient
        logits = logits.masked_fill(~keep, float("-inf"))
    per = F.cross_entropy(logits, pos, reduction="none")
    return reduce_terms(per, None, reduction, return_stats)


class InfoNCELoss(nn.Module):
    """Holds the learnable log-temperature (initialised at ``log(0.07)``, as CLIP, Radford et al. 2021).

    ``forward(pred, targets, anchor_offset=0, hard_negatives=None, **kw)`` calls
    :func:`infonce_loss` (or :func:`infonce_hardneg_loss` when ``hard_negatives`` is given).
    Under DDP the parameter is averaged like any other.
    """

    def __init__(self, init_temperature: float = DEFAULT_TEMPERATURE, *, learnable: bool = True,
                 min_temperature: float = MIN_TEMPERATURE,
                 max_temperature: float = MAX_TEMPERATURE) -> None:
        super().__init__()
        if not min_temperature <= init_temperature <= max_temperature:
            raise ValueError(f"init_temperature {init_temperature} outside [{min_temperature}, {max_temperature}]")
        t = torch.tensor(math.log(init_temperature))
        if learnable:
            self.log_temperature = nn.Parameter(t)
        else:
            self.register_buffer("log_temperature", t)
        self.min_temperature = min_temperature
        self.max_temperature = max_temperature

    @property
    def temperature(self) -> float:
        """Current (clamped) temperature as a float."""
        return float(temperature_from_log(self.log_temperature.detach(), self.min_temperature, self.max_temperature))

    def forward(self, pred: Tensor, targets: Tensor, anchor_offset: int = 0, hard_negatives: Tensor | None = None,
                **kw):
        kw.setdefault("min_temperature", self.min_temperature)
        kw.setdefault("max_temperature", self.max_temperature)
        if hard_negatives is not None:
            return infonce_hardneg_loss(pred, targets, self.log_temperature, hard_negatives, anchor_offset=anchor_offset, **kw)
        return infonce_loss(pred, targets, self.log_temperature, anchor_offset=anchor_offset, **kw)
