"""Supervised contrastive loss, Khosla et al. 2020, "Supervised Contrastive Learning", L_out (Eq. 2).

    L_i = -(tau / base_tau) * 1/|P(i)| * sum_{p in P(i)} log( exp(z_i.z_p/tau) / sum_{a in A(i)} exp(z_i.z_a/tau) )

``A(i)`` is every contrast row except ``i`` itself; ``P(i)`` the rows of ``A(i)`` with the
anchor's label (or ``mask[i, j] = 1``). The loss is the mean over anchors that have at
least one positive. Anchors without a positive are left out of the mean and counted
(``return_stats=True``); the reference code (github.com/HobbitLong/SupContrast) divides
0/0 for them (NaN).
"""

from __future__ import annotations

import torch
from torch import Tensor

from . import _common
from ._common import (
    Rows,
    flatten_views,
    grouped_positive_term,
    reduce_terms,
    row_blocks,
    dense_weighted_log_softmax,
    scale_factor,
    weighted_log_softmax,
)

__all__ = ["supcon_loss", "grouped_loss"]


def supcon_loss(features: Tensor, labels: Tensor | None = None, mask: Tensor | None = None, *,
                temperature: float = 0.07, base_temperature: float | None = 0.07,
                contrast_mode: str = "all", reduction: str = "mean",
                contrast_features: Tensor | None = None, contrast_labels: Tensor | None = None,
                anchor_offset: int = 0, return_stats: bool = False):
    """SupCon L_out (Khosla et al. 2020, Eq. 2), vectorised and NaN-free.

    Args:
        features: ``[N, D]`` or ``[N, n_views, D]`` float; **pass L2-normalised features**
            (not normalised here, as in the reference; the computation stays finite for any
            norm and temperature thanks to max subtraction).
        labels: ``[N]`` integer class labels. ``labels=None`` and ``mask=None``: positives
            are the other views of the same sample (SimCLR's NT-Xent with ``n_views``).
        mask: ``[N, N_contrast]`` explicit positive mask over samples (0/1 or bool;
            ``mask[i, j]`` says whether sample j is a positive of anchor sample i; the anchor's
            own row is always removed, other views of i are positives iff ``mask[i, i]``).
            Mutually exclusive with ``labels``.
        temperature: tau > 0.
        base_temperature: the loss is multiplied by ``temperature / base_temperature``
            (the reference code's rescaling); ``None`` disables it.
        contrast_mode: ``"all"`` (every view is an anchor) or ``"one"`` (view 0 only).
        reduction: ``"mean"`` over anchors with a positive, ``"sum"``, or ``"none"``
            (``[n_anchor_rows]``, 0 for excluded anchors; rows are sample-major
            ``sample * n_views + view``).
        contrast_features: ``[M, n_views, D]`` (or ``[M, D]``) rows to contrast against,
            containing the anchors themselves at rows ``anchor_offset ..`` (distributed:
            the features gathered from all ranks). Default: ``features``.
        contrast_labels: ``[M]`` labels of ``contrast_features``.
        anchor_offset: index of the first local sample in ``contrast_features``.
        return_stats: also return :class:`~contrastlab.losses._common.LossStats` with
            ``n_excluded`` = anchors without a positive.

    Returns:
        Scalar loss (``[n]`` for ``"none"``), or ``(loss, stats)``. A batch without any
        positive pair gives 0 that is still connected to the graph.

    Raises:
        ValueError: features not ``[N, D]``/``[N, V, D]``; labels not ``[N]`` (e.g. multi-hot
            ``[N, C]``: use the multi-label losses); mask of the wrong shape; both labels and
            mask; temperature <= 0; unknown contrast_mode or reduction.
    """
    scale = scale_factor(temperature, base_temperature)
    rows = flatten_views(features, contrast_features, anchor_offset, contrast_mode)
    n = features.shape[0]
    m_samples = rows.contrast.shape[0] // rows.n_views
    v = rows.n_views
    dev = features.device
    if labels is not None and mask is not None:
        raise ValueError("give labels or mask, not both")
    if mask is not None:
        if mask.shape != (n, m_samples):
            raise ValueError(f"mask must be [N={n}, N_contrast={m_samples}], got {tuple(mask.shape)}")
        per, valid = _mask_path(rows, (mask.to(dev) != 0).to(features.dtype), temperature)
    else:
        if labels is None:
            a_ids = torch.arange(n, device=dev) + anchor_offset
            c_ids = torch.arange(m_samples, device=dev)
        else:
            if labels.dim() != 1 or labels.shape[0] != n:
                raise ValueError(
                    f"labels must be [N={n}] class indices, got shape {tuple(labels.shape)}"
                    + (" (multi-hot labels: use the 'all', 'any', 'mulsupcon' or 'simdis' losses)" if labels.dim() == 2 else "")
                )
            la = labels.to(dev)
            if contrast_features is None:
                lc = la
            else:
                if contrast_labels is None or contrast_labels.shape != (m_samples,):
                    raise ValueError(f"contrast_labels must be [M={m_samples}] with contrast_features")
                lc = contrast_labels.to(dev)
            if _dense(rows):
                a_ids, c_ids = la, lc  # the dense path compares labels directly
            else:
                ids = torch.unique(torch.cat([la, lc]), return_inverse=True)[1]
                a_ids, c_ids = ids[:n], ids[n:]
        if v > 1 or contrast_mode != "all":
            a_ids, c_ids = a_ids[rows.anchor_sample], c_ids.repeat_interleave(v)
        per, valid = grouped_loss(rows, a_ids, c_ids, temperature)
    if scale != 1.0:
        per = per * scale
    return reduce_terms(per, valid, reduction, return_stats)


def grouped_loss(rows: Rows, a_ids: Tensor, c_ids: Tensor, temperature: float) -> tuple[Tensor, Tensor]:
    """Per-anchor SupCon loss when positives are the rows with the same group id.

    ``rows``: flattened anchors ``[n, D]`` / contrast ``[M, D]``; ``a_ids [n]``, ``c_ids [M]``
    long group ids. Returns ``(per [n], valid [n] bool)``, 0 where no positive. Small
    problems (``n * M < FUSED_MIN_ELEMENTS``) take a dense path with few operations
    (:func:`_weighted_dense` on the mask of equal ids, which only need to compare equal, not
    to be consecutive; the same values up to rounding: at small batches the per-operation
    overhead dominates)."""
    if _dense(rows):
        return _weighted_dense(rows, _equal_mask(a_ids, c_ids).to(rows.anchors.dtype), temperature)
    mean_pos, cnt = grouped_positive_term(rows.anchors, rows.contrast, a_ids, c_ids, rows.self_index, temperature)
    valid = cnt > 0
    lse = weighted_log_softmax(rows.anchors, rows.contrast, valid, rows.self_index, temperature)
    return lse - torch.where(valid, mean_pos, torch.zeros_like(mean_pos)), valid


def _dense(rows: Rows) -> bool:
    """Small problem (:func:`~contrastlab.losses._common.use_dense`): take the dense path."""
    return _common.use_dense(rows.anchors.shape[0], rows.contrast.shape[0])


_EXACT_F32 = 1 << 24  # every integer of magnitude <= 2^24 is exact in float32


def _equal_mask(a_ids: Tensor, c_ids: Tensor) -> Tensor:
    """``[n, M]`` float32 mask ``[a_i == c_j]`` from integer ids ``[n]``, ``[M]``.

    Ids that float32 holds exactly go through ``1 - min(|a_i - c_j|, 1)``: three cheap float
    passes instead of a bool comparison and its conversion (several times slower on CPU);
    larger ids and GPUs take the comparison."""
    if a_ids.device.type == "cpu" and a_ids.numel() and c_ids.numel() and max(int(a_ids.abs().max()), int(c_ids.abs().max())) <= _EXACT_F32:
        d = torch.sub(a_ids.to(torch.float32).view(-1, 1), c_ids.to(torch.float32).view(1, -1))
        return d.abs_().clamp_max_(1.0).neg_().add_(1.0)
    return (a_ids.view(-1, 1) == c_ids.view(1, -1)).to(torch.float32)


def _weighted_dense(rows: Rows, pos: Tensor, temperature: float) -> tuple[Tensor, Tensor]:
    """Per-anchor SupCon loss (Khosla et al. 2020, Eq. 2) from a dense 0/1 positive mask.

    ``pos [n, M]`` float in the anchors' dtype, 1 where contrast row j is a positive of
    anchor row i (the own column is cleared here, in place). ``W_ij = pos_ij / |P(i)|``,
    ``c_i = [|P(i)| > 0]``; returns ``(per [n], valid [n] bool)``, per 0 (connected to the
    graph) without a positive."""
    pos.scatter_(1, rows.self_index.view(-1, 1), 0.0)
    cnt = pos.sum(1)
    valid = cnt > 0
    w = pos.div_(cnt.clamp_min_(1).unsqueeze(1))  # 1/|P(i)| on positives, 0 elsewhere
    return dense_weighted_log_softmax(rows.anchors, rows.contrast, valid, rows.self_index, temperature, w), valid


def _mask_path(rows: Rows, mask: Tensor, temperature: float) -> tuple[Tensor, Tensor]:
    v = rows.n_views

    def pos_rows(lo: int, hi: int) -> Tensor:
        w = mask[rows.anchor_sample[lo:hi]].repeat_interleave(v, dim=1)
        return w.scatter_(1, rows.self_index[lo:hi].view(-1, 1), 0.0)

    n, m = rows.anchors.shape[0], rows.contrast.shape[0]
    cnt = torch.cat([pos_rows(lo, hi).sum(1) for lo, hi in row_blocks(n, m)])
    inv = 1.0 / cnt.clamp_min(1)
    valid = cnt > 0
    per = weighted_log_softmax(rows.anchors, rows.contrast, valid, rows.self_index, temperature,
                               lambda lo, hi: pos_rows(lo, hi).mul_(inv[lo:hi].unsqueeze(1)))
    return per, valid
