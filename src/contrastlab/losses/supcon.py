"""Supervised contrastive loss, Khosla et al. 2020, L_out (their Eq. 2; seed 003).

    L_i = -(tau / base_tau) * 1/|P(i)| * sum_{p in P(i)} log( exp(z_i.z_p/tau) / sum_{a in A(i)} exp(z_i.z_a/tau) )

``A(i)`` is every contrast row except ``i`` itself; ``P(i)`` the rows of ``A(i)`` with the
anchor's label (or ``mask[i, j] = 1``). The loss is the mean over anchors that have at
least one positive. Anchors without a positive are left out of the mean and counted
(``return_stats=True``); the reference code divides 0/0 for them (NaN), see DESIGN.md
"Known mistakes" 4.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ._common import flatten_views, positives_to_weight, reduce_terms, scale_factor, weighted_log_softmax

__all__ = ["supcon_loss"]


def supcon_loss(
    features: Tensor,
    labels: Tensor | None = None,
    mask: Tensor | None = None,
    *,
    temperature: float = 0.07,
    base_temperature: float | None = 0.07,
    contrast_mode: str = "all",
    reduction: str = "mean",
    contrast_features: Tensor | None = None,
    contrast_labels: Tensor | None = None,
    anchor_offset: int = 0,
    return_stats: bool = False,
):
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
        pos = mask.to(device=dev).bool()[rows.anchor_sample].repeat_interleave(v, dim=1)
    else:
        if labels is None:
            la = torch.arange(n, device=dev) + anchor_offset
            lc = torch.arange(m_samples, device=dev)
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
        pos = la[rows.anchor_sample].unsqueeze(1) == lc.repeat_interleave(v).unsqueeze(0)
    w, cnt = positives_to_weight(pos, rows.self_index, features.dtype)
    del pos
    per = weighted_log_softmax(rows.anchors, rows.contrast, w, rows.self_index, temperature)
    if scale != 1.0:
        per = per * scale
    return reduce_terms(per, cnt > 0, reduction, return_stats)
