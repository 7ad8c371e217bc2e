"""Multi-label supervised contrastive losses: ALL, ANY ("Similarity-Dissimilarity Loss for
Multi-label Supervised Contrastive Learning", the Sim-Dis paper, Eq. 1-4) and MulSupCon
(Zhang & Wu 2024, "Multi-Label Supervised Contrastive Learning", AAAI; restated as Sim-Dis
Eq. 5-7). See docs/sources.md.

Labels are multi-hot ``[N, C]`` (bool, int or float; any non-zero entry means "has the
label"). For ``[N, n_views, D]`` features every view carries its sample's label set.
For every anchor row ``i`` the denominator runs over all other rows ``A(i)`` (Eq. 3).

- ``all``: ``P(i)`` = rows with exactly the anchor's label set (Eq. 1).
- ``any``: ``P(i)`` = rows sharing at least one label (Eq. 2).
- ``mulsupcon``: one positive set per anchor label ``l``: ``P_l(i)`` = rows having
  label ``l`` (Eq. 5); ``L_i = sum_l -1/|P_l(i)| sum_{p in P_l(i)} log softmax_ip`` (Eq. 6).
  With ``a_il = [y_il] / |P_l(i)|`` the positive term is ``sum_j (a Y_c^T)_ij s_ij =
  z_i . (a (Y_c^T Z))_i / tau``: matrix products over labels, never expanding anchors.

Samples with an empty label set are never anchors (nothing defines their positives); they
stay in every denominator ``A(i)`` as negatives, since Eq. 3 sums over all of
``A(i) = I \\ {i}``. An (anchor, label) pair or an anchor with no positive in the batch is
left out of the mean and counted (``return_stats=True``).

Inputs are **not** normalised here: pass L2-normalised features (as the papers do).
"""

from __future__ import annotations

import torch
from torch import Tensor

from . import _common
from ._common import (
    Rows,
    dense_weighted_log_softmax,
    flatten_views,
    reduce_terms,
    row_blocks,
    scale_factor,
    weighted_log_softmax,
)
from .supcon import _dense, _weighted_dense, grouped_loss

__all__ = ["all_loss", "any_loss", "mulsupcon_loss", "label_rows", "overlap_pass"]


def label_rows(features: Tensor, labels: Tensor, contrast_features: Tensor | None,
               contrast_labels: Tensor | None, anchor_offset: int,
               contrast_mode: str) -> tuple[Rows, Tensor, Tensor]:
    """Flatten views and return ``(rows, Y_anchor [n, C], Y_contrast [M, C])`` as 0/1 floats."""
    rows = flatten_views(features, contrast_features, anchor_offset, contrast_mode)
    n = features.shape[0]
    if not isinstance(labels, Tensor) or labels.dim() != 2 or labels.shape[0] != n:
        shape = tuple(labels.shape) if isinstance(labels, Tensor) else type(labels).__name__
        raise ValueError(
            f"labels must be multi-hot [N={n}, C], got {shape}"
            + (" (class indices [N]: use 'supcon', or one-hot encode them)" if isinstance(labels, Tensor) and labels.dim() == 1 else "")
        )
    dt = features.dtype
    ya = (labels.to(features.device) != 0).to(dt)
    if contrast_features is None:
        yc = ya
    else:
        m = rows.contrast.shape[0] // rows.n_views
        if contrast_labels is None or contrast_labels.dim() != 2 or contrast_labels.shape != (m, labels.shape[1]):
            got = None if contrast_labels is None else tuple(contrast_labels.shape)
            raise ValueError(f"contrast_labels must be [M={m}, C={labels.shape[1]}] with contrast_features, got {got}")
        yc = (contrast_labels.to(features.device) != 0).to(dt)
    v = rows.n_views
    if v == 1:  # one row per sample (anchor_sample is 0..n-1): no gather needed
        return rows, ya, yc
    return rows, ya[rows.anchor_sample], yc.repeat_interleave(v, dim=0)


CACHE_ELEMENTS = 1 << 26  # keep the ANY / Sim-Dis weight matrix if n * M <= 64M (256 MB float32)


def overlap_pass(rows: Rows, ya: Tensor, yc: Tensor, factor=None, weighting: str = "numerator"):
    """ANY positives (``|S ∩ T| > 0``, anchor's own row excluded) and Sim-Dis statistics.

    Returns ``(cnt [n], coef [n], const [n], weight_fn)``: ``|P(i)|``; ``c_i = sum_j W_ij``;
    Sim-Dis's ``-1/|P| sum_p log K_ip`` (zeros without ``factor``); the block function of
    ``W = pos * (K if weighting == "log_prob") / |P|``. ``factor(inter, na, nc)`` gives K.

    The per-anchor sums depend only on (anchor label set, sample label set), so they are
    computed on the ``U x U`` matrix of the distinct label sets times the number of
    contrast rows holding each set (the anchor's own row has ``K = 1``, ``log K = 0``).
    The blocks of ``W`` are kept (one ``n x M`` float in total) when
    ``n * M <= CACHE_ELEMENTS`` and recomputed from the labels in every pass otherwise.
    """
    n, m = ya.shape[0], yc.shape[0]
    if n * m < _common.FUSED_MIN_ELEMENTS:
        return _overlap_dense(rows, ya, yc, factor, weighting)
    dt = ya.dtype
    allrows = torch.cat([ya, yc])
    ids = _set_ids(allrows)
    u = int(ids.max()) + 1
    yu = allrows.new_zeros(u, ya.shape[1]).index_copy_(0, ids, allrows)
    ida = ids[:n]
    n_c = torch.bincount(ids[n:], minlength=u).to(dt)  # contrast rows per distinct set
    nu = yu.sum(1, keepdim=True)
    log_prob = factor is not None and weighting == "log_prob"
    cnt_u = torch.empty(u, dtype=dt, device=ya.device)
    acc_u = torch.zeros(u, dtype=dt, device=ya.device)
    for lo, hi in row_blocks(u, u):
        inter = yu[lo:hi] @ yu.T
        if factor is not None:
            k = factor(inter, nu[lo:hi], nu.T)
        ovl = inter.clamp_max_(1.0)  # [S ∩ T != ∅] as 0/1 floats (inter holds whole numbers >= 0)
        if factor is not None:
            if not log_prob:  # log K on overlapping pairs, 0 elsewhere (K = 0 there)
                k = k.sub_(ovl).log1p_()
            acc_u[lo:hi] = k @ n_c
        cnt_u[lo:hi] = ovl @ n_c
    own = (nu.view(-1) > 0).to(dt)  # the anchor's own row: a positive of itself iff its set is non-empty
    cnt = (cnt_u - own)[ida]
    inv = 1.0 / cnt.clamp_min(1)
    if log_prob:
        coef = (acc_u - own)[ida] * inv  # minus the own row's K = 1
        const = torch.zeros_like(cnt)
    else:
        coef = (cnt > 0).to(dt)
        const = -acc_u[ida] * inv if factor is not None else torch.zeros_like(cnt)
    yct = yc.T.contiguous()
    na = ya.sum(1, keepdim=True)
    ncr = yc.sum(1).unsqueeze(0)

    def raw_block(lo: int, hi: int) -> Tensor:
        inter = ya[lo:hi] @ yct
        k = factor(inter, na[lo:hi], ncr) if log_prob else None
        w = inter.clamp_max_(1.0)  # 0/1 float, in place (inter holds whole numbers >= 0)
        w.scatter_(1, rows.self_index[lo:hi].view(-1, 1), 0.0)
        if k is not None:
            w.mul_(k)
        return w.mul_(inv[lo:hi].unsqueeze(1))

    blocks = row_blocks(n, m)
    if n * m <= CACHE_ELEMENTS:
        by_lo = {lo: raw_block(lo, hi) for lo, hi in blocks}
        return cnt, coef, const, lambda lo, hi: by_lo[lo]
    return cnt, coef, const, raw_block


def _overlap_dense(rows: Rows, ya: Tensor, yc: Tensor, factor, weighting: str):
    """:func:`overlap_pass` on the dense ``[n, M]`` label overlaps (small batches: fewer
    operations than the per-label-set bookkeeping; the same values up to rounding). The
    returned block function gives the whole ``W`` for any ``(lo, hi)`` range of a single
    block (``n * M < FUSED_MIN_ELEMENTS <= BLOCK_ELEMENTS``)."""
    inter = ya @ yc.T  # |S ∩ T|: non-negative whole numbers, so min(inter, 1) = [S ∩ T != ∅]
    si = rows.self_index.view(-1, 1)
    # clamp_max gives the 0/1 mask in the float dtype in one cheap pass; a comparison
    # (bool) followed by a conversion costs about ten times as much on CPU
    pos = inter.clamp_max(1.0).scatter_(1, si, 0.0)
    cnt = pos.sum(1)
    inv = cnt.clamp_min(1).reciprocal_()
    if factor is None:
        w = pos.mul_(inv.unsqueeze(1))
        return cnt, (cnt > 0).to(ya.dtype), torch.zeros_like(cnt), lambda lo, hi: w
    k = factor(inter, ya.sum(1, keepdim=True), yc.sum(1).unsqueeze(0))
    if weighting == "log_prob":
        w = k.mul_(pos).mul_(inv.unsqueeze(1))
        return cnt, w.sum(1), torch.zeros_like(cnt), lambda lo, hi: w[lo:hi]
    # sum_p log K_ip = sum_j log1p(K_ij - pos_ij): K = 0 where the sets are disjoint (pos 0,
    # log1p(0) = 0), K_ij - 1 on positives; the own column is cleared in both
    const = k.scatter_(1, si, 0.0).sub_(pos).log1p_().sum(1).mul_(inv).neg_()
    w = pos.mul_(inv.unsqueeze(1))
    return cnt, (cnt > 0).to(ya.dtype), const, lambda lo, hi: w[lo:hi]


def _set_ids(y: Tensor) -> Tensor:
    """Equal label sets -> equal integer ids (bit-packed when C <= 62, else unique rows)."""
    if y.shape[1] <= 62:
        key = (y.to(torch.int64) << torch.arange(y.shape[1], device=y.device)).sum(1)
        return torch.unique(key, return_inverse=True)[1]
    return torch.unique(y, dim=0, return_inverse=True)[1]


def _setwise(kind: str, features, labels, temperature, base_temperature, contrast_mode, reduction,
             contrast_features, contrast_labels, anchor_offset, return_stats):
    scale = scale_factor(temperature, base_temperature)
    rows, ya, yc = label_rows(features, labels, contrast_features, contrast_labels, anchor_offset, contrast_mode)
    if kind == "any":
        cnt, coef, _, wfn = overlap_pass(rows, ya, yc)
        per = weighted_log_softmax(rows.anchors, rows.contrast, coef, rows.self_index, temperature, wfn)
        valid = cnt > 0
    elif _common.use_dense(ya.shape[0], yc.shape[0]):  # all, small batch: equal sets from the overlaps
        inter = ya @ yc.T
        na = ya.sum(1, keepdim=True).clamp_min_(1.0)  # an empty anchor set counts as size 1: never equal
        # S = T  <=>  |S| + |T| - 2 |S ∩ T| = 0 (the size of the symmetric difference, a whole
        # number >= 0): pos = 1 - min(that, 1), in float passes instead of bool comparisons
        pos = torch.add(na + yc.sum(1), inter, alpha=-2.0).clamp_max_(1.0).neg_().add_(1.0)
        per, valid = _weighted_dense(rows, pos, temperature)
    else:  # all: positives share the exact label set -> group ids of the sets
        n = ya.shape[0]
        ids = _set_ids(torch.cat([ya, yc]))
        per, valid = grouped_loss(rows, ids[:n], ids[n:], temperature)
        nonempty = ya.sum(1) > 0
        valid = valid & nonempty
        per = torch.where(nonempty, per, torch.zeros_like(per))
    if scale != 1.0:
        per = per * scale
    return reduce_terms(per, valid, reduction, return_stats)


_COMMON_DOC = """
    Args:
        features: ``[N, D]`` or ``[N, n_views, D]`` float, L2-normalised by the caller.
        labels: ``[N, C]`` multi-hot (bool/int/float, non-zero = has the label).
        temperature: tau > 0.
        base_temperature: multiply by ``temperature / base_temperature`` (SupCon's
            reference rescaling); ``None`` (default) = no rescaling.
        contrast_mode: ``"all"`` (every view is an anchor) or ``"one"`` (view 0 only).
        reduction: {reductions}
        contrast_features, contrast_labels, anchor_offset: contrast against other rows
            (distributed: gathered from all ranks), as in :func:`~contrastlab.losses.supcon.supcon_loss`.
        return_stats: also return ``LossStats`` (``n_terms``, ``n_anchors``, ``n_excluded``).

    Returns:
        Scalar (``[n_anchor_rows]`` for ``"none"``, 0 on excluded anchors), or ``(loss, stats)``.
        No positive pair in the batch: 0, still connected to the graph.

    Raises:
        ValueError: labels not ``[N, C]`` (e.g. class indices ``[N]``), features of the
            wrong rank, temperature <= 0, unknown contrast_mode / reduction.
"""
_SET_RED = '``"mean"`` over anchors with a positive (default), ``"sum"``, ``"none"``.'


def all_loss(features: Tensor, labels: Tensor, *, temperature: float = 0.07, base_temperature: float | None = None,
             contrast_mode: str = "all", reduction: str = "mean", contrast_features: Tensor | None = None,
             contrast_labels: Tensor | None = None, anchor_offset: int = 0, return_stats: bool = False):
    """ALL: SupCon (Eq. 3) with positives = exact label-set match (Sim-Dis paper Eq. 1)."""
    return _setwise("all", features, labels, temperature, base_temperature, contrast_mode, reduction,
                    contrast_features, contrast_labels, anchor_offset, return_stats)


def any_loss(features: Tensor, labels: Tensor, *, temperature: float = 0.07, base_temperature: float | None = None,
             contrast_mode: str = "all", reduction: str = "mean", contrast_features: Tensor | None = None,
             contrast_labels: Tensor | None = None, anchor_offset: int = 0, return_stats: bool = False):
    """ANY: SupCon (Eq. 3) with positives = any shared label (Sim-Dis paper Eq. 2)."""
    return _setwise("any", features, labels, temperature, base_temperature, contrast_mode, reduction,
                    contrast_features, contrast_labels, anchor_offset, return_stats)


all_loss.__doc__ += _COMMON_DOC.format(reductions=_SET_RED)
any_loss.__doc__ += _COMMON_DOC.format(reductions=_SET_RED)


def mulsupcon_loss(features: Tensor, labels: Tensor, *, temperature: float = 0.07, base_temperature: float | None = None,
                   contrast_mode: str = "all", reduction: str = "pairs", contrast_features: Tensor | None = None,
                   contrast_labels: Tensor | None = None, anchor_offset: int = 0, return_stats: bool = False):
    """MulSupCon (Zhang & Wu 2024): per-label positive sets (Sim-Dis paper Eq. 5-7).

    ``L_i = sum_{l in y_i} -1/|P_l(i)| sum_{p in P_l(i)} log softmax_ip`` with
    ``P_l(i) = {p in A(i): y_pl = 1}``. An (anchor, label) pair whose ``P_l(i)`` is empty
    is skipped (its term is 0, as in a reference fine-tuning implementation) and not counted.

    Reductions: ``"pairs"`` (default, Eq. 7: sum over anchors divided by the number of
    (anchor, label) pairs with a positive; Eq. 7 writes ``sum_i |y_i|``, which equals it
    when every label occurs twice in the batch), ``"anchors"`` (mean of ``L_i`` over anchors
    with at least one such pair, as a reference fine-tuning implementation averages), ``"sum"``, ``"none"`` (``L_i`` per anchor row).
    ``LossStats.n_terms`` is the number of pairs except for ``"anchors"``.
    On single-label data both means equal :func:`~contrastlab.losses.supcon.supcon_loss`.
    """
    if reduction not in ("pairs", "anchors", "sum", "none"):
        raise ValueError(f"reduction must be 'pairs', 'anchors', 'sum' or 'none', got {reduction!r}")
    scale = scale_factor(temperature, base_temperature)
    rows, ya, yc = label_rows(features, labels, contrast_features, contrast_labels, anchor_offset, contrast_mode)
    # |P_l(i)|: rows with label l, minus the anchor's own row (which has all of its labels)
    n_il = yc.sum(0, keepdim=True) - ya
    valid = (ya > 0) & (n_il > 0)
    a = torch.where(valid, 1.0 / n_il.clamp_min(1), torch.zeros_like(n_il))
    n_pairs = valid.sum(1)
    anchors, contrast, si = rows.anchors, rows.contrast, rows.self_index
    if _dense(rows):
        # small batch: the dense weights W_ij = sum_l a_il y_jl (0 on the own column)
        w = (a @ yc.T).scatter_(1, si.view(-1, 1), 0.0)
        per = dense_weighted_log_softmax(anchors, contrast, n_pairs, si, temperature, w)
    else:
        # sum_j W_ij z_j, W_ij = sum_l a_il y_jl (j != i): contrast rows' label sums, O((n + M) C D)
        v = a @ (yc.T @ contrast) - (a * ya).sum(1, keepdim=True) * contrast[si]
        pos_term = torch.linalg.vecdot(anchors, v) / temperature
        per = weighted_log_softmax(anchors, contrast, n_pairs, si, temperature) - pos_term
    if scale != 1.0:
        per = per * scale
    red = {"pairs": "mean", "anchors": "mean"}.get(reduction, reduction)
    n_terms = None if reduction == "anchors" else n_pairs.sum()
    return reduce_terms(per, n_pairs > 0, red, return_stats, n_terms)


mulsupcon_loss.__doc__ += _COMMON_DOC.format(reductions='see above.')
