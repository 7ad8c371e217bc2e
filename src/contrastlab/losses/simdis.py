"""Similarity-Dissimilarity loss ("Similarity-Dissimilarity Loss for Multi-label Supervised
Contrastive Learning", anonymous, under review; Eq. 13-15) and its ablations (Table 4).

For an anchor ``i`` with label set ``S`` and a row ``p`` with label set ``T``:

    K^s_ip = |S ∩ T| / |S|                      (Eq. 14, similarity)
    K^d_ip = 1 / (1 + |T \\ S|)                  (Eq. 15, dissimilarity; Appendix A.2)
           or exp(-alpha |T \\ S|)               (Appendix A.2's alternative, dissimilarity="exp")
    L_i = -1/|P(i)| sum_{p in P(i)} log( K^s K^d exp(z_i.z_p/tau) / sum_{a in A(i)} exp(z_i.z_a/tau) )   (Eq. 13)

with ``P(i)`` the ANY positive set (Eq. 2; Appendix C.1). ``mode="sim_only"`` keeps only
K^s, ``mode="dis_only"`` only K^d (Table 4's rows). When every label set is one class,
K^s = K^d = 1 and the loss is SupCon (Eq. 17).

Note on Eq. 13 as written: ``log(K exp(s)) = log K + s``, so the factor only adds the
constant ``-mean_p log K_ip`` to each anchor's loss and its gradient equals ANY's. This
is implemented literally (``weighting="numerator"``, default). ``weighting="log_prob"``
is offered as a documented variant that does change the gradient: the factor multiplies each
positive's log-probability, ``L_i = -1/|P(i)| sum_p K_ip log softmax_ip``;
``weighting="log_prob_sum"`` is the second reading of that weighting, normalised by the total
weight instead of the count: ``L_i = -1/(sum_p K_ip) sum_p K_ip log softmax_ip`` (a weighted
mean of the positives' log-probabilities; it equals ``log_prob`` times ``|P(i)| / sum_p K_ip``).

Samples with an empty label set are never anchors (K^s would divide by 0); they stay in
every denominator as negatives. Inputs are **not** normalised here: pass L2-normalised
features.
"""

from __future__ import annotations

import functools

import torch
from torch import Tensor

from ._common import reduce_terms, scale_factor, weighted_log_softmax
from .multilabel import label_rows, overlap_pass

__all__ = ["simdis_loss", "simdis_weights", "relation_types", "MODES"]

MODES = ("full", "sim_only", "dis_only")


def _check_factor_args(mode: str, dissimilarity: str, alpha: float) -> None:
    """Raise ``ValueError`` for an unknown ``mode`` / ``dissimilarity`` or ``alpha <= 0`` with ``"exp"``."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    if dissimilarity not in ("inverse", "exp"):
        raise ValueError(f"dissimilarity must be 'inverse' (1/(1+x)) or 'exp' (exp(-alpha x)), got {dissimilarity!r}")
    if dissimilarity == "exp" and not alpha > 0:
        raise ValueError(f"alpha must be > 0, got {alpha}")


def _factor(inter: Tensor, na: Tensor, nc: Tensor, mode: str, dissimilarity: str, alpha: float) -> Tensor:
    """K for every pair from ``inter [n, M]``, ``na [n, 1]``, ``nc [1, M]`` (0 where ``inter == 0``)."""
    _check_factor_args(mode, dissimilarity, alpha)
    k = None
    if mode in ("full", "dis_only"):
        k = nc - inter  # |T \ S|
        if dissimilarity == "inverse":
            k.add_(1.0).reciprocal_()
        else:
            k.mul_(-alpha).exp_()
    if mode in ("full", "sim_only"):
        ks = inter / na.clamp_min(1)
        k = ks if k is None else k.mul_(ks)
    else:  # dis_only: R1 pairs are not positives, keep the factor 0 there
        # inter holds whole numbers >= 0, so min(inter, 1) is the 0/1 overlap mask; k is finite:
        # the same as masked_fill_(inter == 0, 0), without a bool pass (about ten times slower on CPU)
        k.mul_(inter.clamp_max(1.0))
    return k


def simdis_weights(labels: Tensor, contrast_labels: Tensor | None = None, *, mode: str = "full",
                   dissimilarity: str = "inverse", alpha: float = 1.0) -> Tensor:
    """The similarity-dissimilarity factor K^s K^d (Eq. 14-15) for every pair of label sets.

    Args:
        labels: ``[N, C]`` multi-hot label sets of the anchors.
        contrast_labels: ``[M, C]`` label sets of the other samples (default ``labels``).
        mode, dissimilarity, alpha: as :func:`simdis_loss`.

    Returns:
        ``[N, M]`` float32 in [0, 1]; 0 for disjoint sets (R1) and for anchors with an empty
        label set; the diagonal (a sample with itself, R2) is 1. Group it by
        :func:`relation_types` to plot R1..R5.
    """
    ya, yc = _multihot(labels, contrast_labels)
    inter = ya @ yc.T
    return _factor(inter, ya.sum(1, keepdim=True), yc.sum(1).unsqueeze(0), mode, dissimilarity, alpha)


def _multihot(labels: Tensor, contrast_labels: Tensor | None) -> tuple[Tensor, Tensor]:
    if labels.dim() != 2:
        raise ValueError(f"labels must be multi-hot [N, C], got {tuple(labels.shape)}")
    ya = (labels != 0).float()
    if contrast_labels is None:
        return ya, ya
    if contrast_labels.dim() != 2 or contrast_labels.shape[1] != labels.shape[1]:
        raise ValueError(f"contrast_labels must be [M, C={labels.shape[1]}], got {tuple(contrast_labels.shape)}")
    return ya, (contrast_labels != 0).float()


def relation_types(labels: Tensor, contrast_labels: Tensor | None = None) -> Tensor:
    """Multi-label relation of every (anchor, sample) pair (Sim-Dis paper Eq. 8-12).

    Returns ``[N, M]`` int64: 1..5 for R1..R5 (S = anchor's set, T = sample's set:
    R1 S∩T=∅, R2 S=T, R3 partial overlap, R4 S⊋T, R5 S⊊T); 0 where the anchor's label set
    is empty (never an anchor). An empty T with a non-empty S is R1 (disjoint).
    """
    ya, yc = _multihot(labels, contrast_labels)
    inter = ya @ yc.T
    na = ya.sum(1, keepdim=True)
    nc = yc.sum(1).unsqueeze(0)
    r = torch.full(inter.shape, 3, dtype=torch.long)
    r[(inter == na) & (inter < nc)] = 5
    r[(inter == nc) & (inter < na)] = 4
    r[(inter == na) & (inter == nc)] = 2
    r[inter == 0] = 1
    r[(na == 0).expand_as(r)] = 0
    return r


def simdis_loss(features: Tensor, labels: Tensor, *, temperature: float = 0.07,
                base_temperature: float | None = None, mode: str = "full",
                dissimilarity: str = "inverse", alpha: float = 1.0, weighting: str = "numerator",
                contrast_mode: str = "all", reduction: str = "mean",
                contrast_features: Tensor | None = None, contrast_labels: Tensor | None = None,
                anchor_offset: int = 0, return_stats: bool = False):
    """Similarity-Dissimilarity loss (Sim-Dis paper Eq. 13-15); ``sim_only``/``dis_only`` via ``mode``.

    Args:
        features: ``[N, D]`` or ``[N, n_views, D]`` float, L2-normalised by the caller.
        labels: ``[N, C]`` multi-hot (non-zero = has the label).
        temperature: tau > 0.
        base_temperature: multiply by ``temperature / base_temperature``; ``None`` = no rescaling.
        mode: ``"full"`` (K^s K^d), ``"sim_only"`` (K^s), ``"dis_only"`` (K^d) (Table 4).
        dissimilarity: ``"inverse"`` ``1/(1+x)`` (Eq. 15, default) or ``"exp"`` ``exp(-alpha x)``.
        alpha: decay rate of ``"exp"``.
        weighting: ``"numerator"`` (Eq. 13 literally, default), ``"log_prob"`` (variant
            ``-1/|P| sum_p K_ip log softmax_ip``) or ``"log_prob_sum"`` (variant
            ``-1/(sum_p K_ip) sum_p K_ip log softmax_ip``); see the module docstring.
        contrast_mode, reduction, contrast_features, contrast_labels, anchor_offset,
        return_stats: as :func:`~contrastlab.losses.multilabel.any_loss` (``reduction`` is
            ``"mean"`` over anchors with a positive, ``"sum"`` or ``"none"``).

    Returns:
        Scalar loss (or per anchor row), or ``(loss, stats)``; 0 connected to the graph when
        no anchor has a positive.

    Raises:
        ValueError: labels not ``[N, C]``, unknown mode / dissimilarity / weighting /
            reduction, temperature or alpha <= 0.
    """
    if weighting not in ("numerator", "log_prob", "log_prob_sum"):
        raise ValueError(f"weighting must be 'numerator', 'log_prob' or 'log_prob_sum', got {weighting!r}")
    scale = scale_factor(temperature, base_temperature)
    rows, ya, yc = label_rows(features, labels, contrast_features, contrast_labels, anchor_offset, contrast_mode)
    _check_factor_args(mode, dissimilarity, alpha)  # validate arguments early
    factor = functools.partial(_factor, mode=mode, dissimilarity=dissimilarity, alpha=alpha)
    cnt, coef, const, wfn = overlap_pass(rows, ya, yc, factor, weighting.removesuffix("_sum"))
    per = weighted_log_softmax(rows.anchors, rows.contrast, coef, rows.self_index, temperature, wfn)
    if weighting == "numerator":
        per = per + const
    if weighting == "log_prob_sum":
        # coef_i = sum_p K_ip / |P(i)| (> 0 when i has a positive): rescale 1/|P| -> 1/sum_p K
        per = per / torch.where(cnt > 0, coef, torch.ones_like(coef)).to(per.dtype)
    if scale != 1.0:
        per = per * scale
    return reduce_terms(per, cnt > 0, reduction, return_stats)
