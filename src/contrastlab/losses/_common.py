"""Shared machinery of the contrastive losses: shape checks, the fused weighted
log-softmax kernel, view flattening and reductions. Private: use the loss functions.

Every supervised loss of this package (SupCon, ALL, ANY, MulSupCon, Sim-Dis) has, for an
anchor row ``i`` against contrast rows ``j`` (``j != i``, the anchor's own row is never in
its denominator), the form

    l_i = c_i * lse_i - sum_j W_ij s_ij + k_i,    s_ij = z_i . z_j / tau,
    lse_i = log sum_{j != i} exp(s_ij),           c_i = sum_j W_ij,

with a non-negative weight matrix ``W`` (0 on the anchor's own column) and a constant
``k_i`` (Sim-Dis only). SupCon: ``W_ij = 1/|P(i)|`` on positives. MulSupCon:
``W_ij = sum_l y_il y_jl / |P_l(i)|``. :class:`WeightedLogSoftmax` computes ``c_i lse_i``
(and, for ANY / Sim-Dis, the ``W`` term from label blocks) with one ``n x M`` buffer that
holds the logits, then the softmax, then the gradient, all in place:
``dl_i/ds_ij = c_i softmax_ij - W_ij``. When ``W`` comes from group ids (SupCon, ALL) or
label products (MulSupCon), ``sum_j W_ij s_ij = z_i . (W Z)_i / tau`` is computed from
per-group / per-label feature sums in O((n + M) D) with ordinary autograd.

Small batches (``n * M < FUSED_MIN_ELEMENTS``, :func:`use_dense`) take a separate path:
the losses build the dense ``[n, M]`` weights ``W`` with a few whole-matrix operations and
:class:`DenseWeightedLogSoftmax` computes ``c_i lse_i - sum_j W_ij s_ij`` as one autograd
node, since there per-operation overhead, not arithmetic, is what costs.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import torch
from torch import Tensor

REDUCTIONS = ("mean", "sum", "none")


class LossStats(NamedTuple):
    """What a loss averaged over (returned with ``return_stats=True``).

    Attributes:
        n_terms: 0-dim long tensor, the denominator of ``reduction="mean"`` (anchors; for
            MulSupCon with ``reduction="pairs"`` the (anchor, label) pairs).
        n_anchors: 0-dim long tensor, anchors that contributed (had at least one positive).
        n_excluded: 0-dim long tensor, anchor rows left out: no positive in the batch, or an
            empty label set (never an anchor).
    """

    n_terms: Tensor
    n_anchors: Tensor
    n_excluded: Tensor


def check_2d(name: str, x: Tensor) -> None:
    if not isinstance(x, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if x.dim() != 2:
        raise ValueError(f"{name} must be 2-D, got shape {tuple(x.shape)}")
    if not x.is_floating_point():
        raise ValueError(f"{name} must be a floating-point tensor, got {x.dtype}")


def check_temperature(temperature: float) -> None:
    """``ValueError`` unless ``temperature > 0``."""
    if not temperature > 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")


def reduce_terms(per: Tensor, valid: Tensor | None, reduction: str, return_stats: bool,
                 n_terms: Tensor | None = None):
    """Reduce per-anchor losses ``per`` (0 on invalid rows) to the requested reduction."""
    if reduction not in REDUCTIONS:
        raise ValueError(f"reduction must be one of {REDUCTIONS}, got {reduction!r}")
    n_anchors = torch.tensor(per.shape[0], device=per.device) if valid is None else valid.sum()
    n_terms = n_anchors if n_terms is None else n_terms
    if reduction == "mean":
        # per is 0 on excluded rows and stays connected to the graph: no positive -> 0 with grad
        out = per.sum() / n_terms.clamp_min(1).to(per.dtype)
    elif reduction == "sum":
        out = per.sum()
    else:
        out = per
    if return_stats:
        return out, LossStats(n_terms, n_anchors, per.shape[0] - n_anchors)
    return out


BLOCK_ELEMENTS = 1 << 22  # rows per block * M <= 4M elements (16 MB in float32)


def row_blocks(n: int, m: int):
    """Row ranges ``(lo, hi)`` covering ``n`` rows in blocks of at most ``BLOCK_ELEMENTS`` elements.

    Blocking bounds the size of temporary ``[rows, M]`` label-weight tensors (memory tiling;
    every block is processed with whole-matrix ops, not per anchor)."""
    step = max(1, BLOCK_ELEMENTS // max(m, 1))
    return [(lo, min(lo + step, n)) for lo in range(0, n, step)]


WeightFn = Callable[[int, int], Tensor]


def recompute_grads(plain: Callable[..., Tensor], inputs: tuple, needs: tuple, grad_out: Tensor) -> list:
    """Gradients of ``plain(*inputs)`` w.r.t. the inputs flagged in ``needs``, with a graph.

    Used by the custom autograd Functions of this package when their backward runs under
    ``create_graph=True`` (a second derivative is being built): the fused, in-place
    backward is not differentiable, so the loss is recomputed with ordinary differentiable
    operations on the saved inputs and ``torch.autograd.grad(..., create_graph=True)``
    gives first derivatives that autograd can differentiate again (Hessian-vector products,
    gradient penalties). Returns one entry per input (None where not needed).
    """
    if not any(needs):
        return [None] * len(inputs)
    with torch.enable_grad():
        # a fresh view per input: an argument passed twice (anchors = contrast) must get
        # each slot's own share of the gradient, as the fused backward returns it
        inputs = tuple(x.view_as(x) if nd else x for x, nd in zip(inputs, needs))
        want = [x for x, nd in zip(inputs, needs) if nd]
        out = plain(*inputs)
        got = iter(torch.autograd.grad(out, want, grad_out, create_graph=True, allow_unused=True))
    res = []
    for x, nd in zip(inputs, needs):
        gx = next(got) if nd else None
        res.append(torch.zeros_like(x) if nd and gx is None else gx)
    return res


def weighted_log_softmax_plain(anchors: Tensor, contrast: Tensor, coef: Tensor, self_index: Tensor | None,
                               inv_tau: float, weight_fn: WeightFn | None) -> Tensor:
    """:class:`WeightedLogSoftmax`'s value written with ordinary differentiable operations.

    Same numbers (max-shifted log-sum-exp over ``j != i``, the ``W`` term from the blocks of
    ``weight_fn``), but autograd keeps every intermediate: the fused Functions differentiate
    it when a second derivative is built (``create_graph=True``)."""
    s = (anchors * inv_tau) @ contrast.T
    n, m_cols = s.shape
    out = None
    if weight_fn is not None:
        blocks = row_blocks(n, m_cols)
        w = weight_fn(0, n) if len(blocks) == 1 else torch.cat([weight_fn(lo, hi) for lo, hi in blocks])
        out = (w.to(s.dtype) * s).sum(1) if n else s.new_zeros(0)
    if m_cols > 1 or self_index is None:  # every row keeps a finite logit
        if self_index is not None:
            own = torch.zeros(s.shape, dtype=torch.bool, device=s.device).scatter_(1, self_index.view(-1, 1), True)
            s = s.masked_fill(own, float("-inf"))
        lse = torch.logsumexp(s, dim=1)
    else:  # a single contrast row, excluded: empty log-sum-exp, kept finite as in the kernel
        s = s.scatter(1, self_index.view(-1, 1), float("-inf"))
        m = s.detach().amax(1, keepdim=True)
        m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
        z = (s - m).exp().sum(1, keepdim=True).clamp_min(torch.finfo(s.dtype).tiny)
        lse = (m + z.log()).view(-1)
    per = coef * lse
    return per if out is None else per - out


class WeightedLogSoftmax(torch.autograd.Function):
    """Per-anchor ``l_i = c_i * lse_i - sum_j W_ij s_ij`` with ``s = inv_tau * A C^T``.

    Inputs: ``anchors [n, D]``, ``contrast [M, D]``, ``coef [n]`` (``c_i``, no grad),
    ``self_index [n]`` long (the anchor's own column, excluded from the log-sum-exp) or
    None, ``inv_tau`` float, ``weight_fn`` None or ``f(lo, hi) -> W[lo:hi] [hi-lo, M]``
    (no grad, 0 on the anchor's own column), evaluated block by block in forward and
    backward so that ``W`` never exists as a whole. With ``weight_fn=None`` the
    ``- sum_j W_ij s_ij`` term is left to the caller (computed with autograd in O(N D)
    for label-structured weights).

    Memory: one ``[n, M]`` buffer holds the logits, then the softmax (saved), then the
    gradient (in place). A second backward through the same graph recomputes the softmax.

    Second derivatives: under ``create_graph=True`` the backward recomputes the loss with
    :func:`weighted_log_softmax_plain` and differentiates it with autograd, so that
    Hessian-vector products are exact (checked with ``torch.autograd.gradgradcheck``).
    """

    @staticmethod
    def forward(ctx, anchors, contrast, coef, self_index, inv_tau, weight_fn):
        s = anchors @ contrast.T
        s.mul_(inv_tau)
        n = s.shape[0]
        out = torch.zeros(n, dtype=s.dtype, device=s.device)
        if weight_fn is not None:
            for lo, hi in row_blocks(n, s.shape[1]):
                out[lo:hi] = torch.linalg.vecdot(weight_fn(lo, hi), s[lo:hi])
        if self_index is not None:
            s.scatter_(1, self_index.view(-1, 1), float("-inf"))
        m = s.amax(1, keepdim=True)
        m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
        s.sub_(m).exp_()
        z = s.sum(1, keepdim=True).clamp_min_(torch.finfo(s.dtype).tiny)
        s.div_(z)  # s is now the softmax over j != i
        lse = (m + z.log()).view(-1)
        ctx.save_for_backward(anchors, contrast, coef, m, z, self_index)
        ctx.p = s  # not via save_for_backward: backward overwrites it in place
        ctx.inv_tau = inv_tau
        ctx.weight_fn = weight_fn
        return coef * lse - out

    @staticmethod
    def backward(ctx, g):
        anchors, contrast, coef, m, z, self_index = ctx.saved_tensors
        p, ctx.p = ctx.p, None
        if torch.is_grad_enabled():  # create_graph=True: differentiable recomputation
            da, dc = recompute_grads(
                lambda a, c: weighted_log_softmax_plain(a, c, coef, self_index, ctx.inv_tau, ctx.weight_fn),
                (anchors, contrast), ctx.needs_input_grad[:2], g)
            return da, dc, None, None, None, None
        if p is None:  # second backward through a retained graph: rebuild the softmax
            p = anchors @ contrast.T
            p.mul_(ctx.inv_tau)
            if self_index is not None:
                p.scatter_(1, self_index.view(-1, 1), float("-inf"))
            p.sub_(m).exp_().div_(z)  # the forward's exact sequence of operations
        gs = g.contiguous() * ctx.inv_tau
        grad = p.mul_((gs * coef).unsqueeze(1))  # in place: c_i softmax_ij
        if ctx.weight_fn is not None:
            for lo, hi in row_blocks(grad.shape[0], grad.shape[1]):
                grad[lo:hi].addcmul_(ctx.weight_fn(lo, hi), gs[lo:hi].unsqueeze(1), value=-1.0)
        da = grad @ contrast if ctx.needs_input_grad[0] else None
        dc = grad.T @ anchors if ctx.needs_input_grad[1] else None
        return da, dc, None, None, None, None


#: Below this many logits (``n * M``) the supervised losses take their small-batch path:
#: dense ``[n, M]`` weights built with a few whole-matrix operations and
#: :class:`DenseWeightedLogSoftmax` (one autograd node); at small batches per-operation and
#: per-node overhead dominates, and the label bookkeeping of the large-batch path costs more
#: than it saves (measured with ``bench/bench_losses.py``). Both paths give the same values
#: and gradients up to float rounding (tested).
FUSED_MIN_ELEMENTS = 1 << 18


def use_dense(n: int, m: int) -> bool:
    """Whether an ``n x M`` problem takes the small-batch dense path (``1 < M`` and
    ``n * M < FUSED_MIN_ELEMENTS``; a single contrast row, the anchor's own, has an empty
    log-sum-exp and is left to the general path)."""
    return 1 < m and n * m < FUSED_MIN_ELEMENTS


class DenseWeightedLogSoftmax(torch.autograd.Function):
    """Small-batch ``l_i = c_i * lse_i - sum_j W_ij s_ij`` with ``s = inv_tau * A C^T`` and a dense ``W``.

    The same quantity as :class:`WeightedLogSoftmax` (see the module docstring; SupCon
    L_out, Khosla et al. 2020 Eq. 2, and the multi-label losses of the Sim-Dis paper Eq. 3,
    6, 13 all have this form), for problems small enough to hold ``W`` whole.

    Inputs: ``anchors [n, D]``, ``contrast [M, D]`` float (``M > 1``), ``coef [n]``
    (``c_i``, anchors' dtype, no grad), ``self_index [n]`` long (the anchor's own column,
    excluded from the log-sum-exp), ``inv_tau`` float, ``w`` ``[n, M]`` anchors' dtype (no
    grad, 0 on the anchor's own column) or None (no ``W`` term). Returns ``[n]``.

    Forward: the logits ``s``, then the softmax over ``j != i`` in one fused pass
    (``torch.softmax``: a single exponential pass; saved) and
    ``lse_i = max_j s_ij - log max_j softmax_ij`` (the largest softmax entry is
    ``1 / sum_j exp(s_ij - max_j s_ij)``, so no second exponential or ``logsumexp`` pass is
    needed); backward turns the softmax in place into
    ``dl/ds = g_i (c_i softmax_ij - W_ij) / tau`` and returns ``dl/ds C`` and ``dl/ds^T A``
    (two matrix products, no other autograd node). A second backward through a retained
    graph recomputes the softmax; under ``create_graph=True`` (second derivatives) the
    backward differentiates :func:`weighted_log_softmax_plain` instead, so Hessian-vector
    products are exact.
    """

    @staticmethod
    def forward(ctx, anchors, contrast, coef, self_index, inv_tau, w):
        s = torch.mm(anchors, contrast.T).mul_(inv_tau)
        pos = torch.linalg.vecdot(w, s) if w is not None else None  # before masking: W is 0 there
        s.scatter_(1, self_index.view(-1, 1), float("-inf"))
        p = torch.softmax(s, 1)  # over j != i; backward overwrites it in place
        lse = s.amax(1, keepdim=True).sub_(p.amax(1, keepdim=True).log_())
        ctx.p = p
        ctx.save_for_backward(anchors, contrast, coef, self_index, w)
        ctx.inv_tau = inv_tau
        per = coef * lse.view(-1)
        return per if pos is None else per.sub_(pos)

    @staticmethod
    def backward(ctx, g):
        anchors, contrast, coef, self_index, w = ctx.saved_tensors
        p, ctx.p = ctx.p, None
        if torch.is_grad_enabled():  # create_graph=True: differentiable recomputation
            wfn = None if w is None else (lambda lo, hi: w[lo:hi])
            da, dc = recompute_grads(
                lambda a, c: weighted_log_softmax_plain(a, c, coef, self_index, ctx.inv_tau, wfn),
                (anchors, contrast), ctx.needs_input_grad[:2], g)
            return da, dc, None, None, None, None
        if p is None:  # second backward through a retained graph: rebuild the softmax
            s = torch.mm(anchors, contrast.T).mul_(ctx.inv_tau)
            p = torch.softmax(s.scatter_(1, self_index.view(-1, 1), float("-inf")), 1)  # the forward's bits
        gs = (g * ctx.inv_tau).unsqueeze(1)
        grad = p.mul_(coef.unsqueeze(1) * gs)
        if w is not None:
            grad.addcmul_(w, gs, value=-1.0)
        da = torch.mm(grad, contrast) if ctx.needs_input_grad[0] else None
        dc = torch.mm(grad.T, anchors) if ctx.needs_input_grad[1] else None
        return da, dc, None, None, None, None


def dense_weighted_log_softmax(anchors: Tensor, contrast: Tensor, coef: Tensor, self_index: Tensor,
                               temperature: float, w: Tensor | None) -> Tensor:
    """``c_i lse_i - sum_j W_ij s_ij`` per anchor row from a dense ``W`` (small batches).

    Shapes: ``anchors [n, D]``, ``contrast [M, D]`` float with ``M > 1``; ``coef [n]``;
    ``self_index [n]`` long; ``w [n, M]`` (0 on the own column) or None. Returns ``[n]`` in
    the anchors' dtype. See :class:`DenseWeightedLogSoftmax`.

    Raises:
        ValueError: ``temperature <= 0``.
    """
    check_temperature(temperature)
    dt = anchors.dtype
    return DenseWeightedLogSoftmax.apply(anchors, contrast, coef.to(dt), self_index, 1.0 / float(temperature),
                                         None if w is None else w.to(dt))


def weighted_log_softmax(anchors: Tensor, contrast: Tensor, coef: Tensor, self_index: Tensor | None,
                         temperature: float, weight_fn: WeightFn | None = None) -> Tensor:
    """``c_i lse_i - sum_j W_ij s_ij`` per anchor row (see :class:`WeightedLogSoftmax`).

    Shapes: ``anchors [n, D]``, ``contrast [M, D]`` float; ``coef [n]``; ``self_index [n]``
    long or None; returns ``[n]`` in the anchors' dtype. Small problems (:func:`use_dense`)
    go through :class:`DenseWeightedLogSoftmax` with ``W = weight_fn(0, n)``, larger ones
    through the fused :class:`WeightedLogSoftmax`.

    Raises:
        ValueError: ``temperature <= 0``.
    """
    check_temperature(temperature)
    inv_tau = 1.0 / float(temperature)
    if self_index is not None and use_dense(anchors.shape[0], contrast.shape[0]):
        # n * M < FUSED_MIN_ELEMENTS <= BLOCK_ELEMENTS: W is a single block
        return dense_weighted_log_softmax(anchors, contrast, coef, self_index, temperature,
                                          None if weight_fn is None else weight_fn(0, anchors.shape[0]))
    return WeightedLogSoftmax.apply(anchors, contrast, coef.to(anchors.dtype), self_index, inv_tau, weight_fn)


def grouped_positive_term(anchors: Tensor, contrast: Tensor, a_ids: Tensor, c_ids: Tensor, self_index: Tensor,
                          temperature: float) -> tuple[Tensor, Tensor]:
    """For positives = contrast rows of the same group id (SupCon labels, ALL label sets):

    returns ``(mean_pos_logit [n], count [n])`` with ``mean_pos_logit_i = 1/|P(i)| sum_{p in P(i)} s_ip``
    computed in O((n + M) D) from per-group feature sums (autograd), ``|P(i)|`` excluding the
    anchor itself (which always shares its own group id)."""
    k = int(max(int(a_ids.max()), int(c_ids.max()))) + 1 if a_ids.numel() else 1
    sums = contrast.new_zeros(k, contrast.shape[1]).index_add(0, c_ids, contrast)
    cnt = torch.bincount(c_ids, minlength=k)[a_ids] - 1
    v = sums[a_ids] - contrast[self_index]
    mean = torch.linalg.vecdot(anchors, v) / (cnt.clamp_min(1).to(anchors.dtype) * temperature)
    return mean, cnt


class Rows(NamedTuple):
    """Anchor and contrast rows after flattening views (sample-major: row = sample*V + view)."""

    anchors: Tensor  # [n, D]
    contrast: Tensor  # [M, D]
    self_index: Tensor  # [n] column of each anchor's own row in ``contrast``
    anchor_sample: Tensor  # [n] local sample index of each anchor row
    n_views: int


def flatten_views(features: Tensor, contrast_features: Tensor | None, anchor_offset: int,
                  contrast_mode: str) -> Rows:
    """Flatten ``[N, D]`` / ``[N, V, D]`` features into anchor and contrast rows."""
    if not isinstance(features, Tensor) or not features.is_floating_point():
        raise ValueError("features must be a floating-point tensor [N, D] or [N, n_views, D]")
    if features.dim() == 2:
        features = features.unsqueeze(1)
    if features.dim() != 3:
        raise ValueError(f"features must be [N, D] or [N, n_views, D], got shape {tuple(features.shape)}")
    n, v, d = features.shape
    if contrast_features is None:
        if anchor_offset != 0:
            raise ValueError("anchor_offset needs contrast_features")
        cf = features
    else:
        cf = contrast_features.unsqueeze(1) if contrast_features.dim() == 2 else contrast_features
        if cf.dim() != 3 or cf.shape[1:] != (v, d):
            raise ValueError(
                f"contrast_features must be [M, n_views={v}, D={d}] like features, got {tuple(contrast_features.shape)}"
            )
        if anchor_offset < 0 or anchor_offset + n > cf.shape[0]:
            raise ValueError(f"anchor rows offset {anchor_offset}..{anchor_offset + n} outside contrast_features ({cf.shape[0]})")
    contrast = cf.reshape(-1, d)
    dev = features.device
    if contrast_mode == "all":
        anchors = features.reshape(-1, d) if contrast_features is not None else contrast
        self_index = torch.arange(anchor_offset * v, (anchor_offset + n) * v, device=dev)
        anchor_sample = torch.arange(n, device=dev)
        if v > 1:
            anchor_sample = anchor_sample.repeat_interleave(v)
    elif contrast_mode == "one":
        anchors = features[:, 0]
        self_index = (torch.arange(n, device=dev) + anchor_offset) * v
        anchor_sample = torch.arange(n, device=dev)
    else:
        raise ValueError(f"contrast_mode must be 'all' or 'one', got {contrast_mode!r}")
    return Rows(anchors, contrast, self_index, anchor_sample, v)


def scale_factor(temperature: float, base_temperature: float | None) -> float:
    check_temperature(temperature)
    if base_temperature is None:
        return 1.0
    if not base_temperature > 0:
        raise ValueError(f"base_temperature must be > 0, got {base_temperature}")
    return float(temperature) / float(base_temperature)


