"""Self-supervised two-view losses: NT-Xent (Chen et al. 2020, SimCLR), MixCo (Kim et al.
2020) and MoCHi (Kalantidis et al. 2020).

All three take the projections of two augmented views of the same N samples, ``z1`` and
``z2`` (``[N, D]`` float, any scale: they are L2-normalised here), and return the mean
over anchors as a scalar tensor. Everything is vectorised: masks, gathers and matrix
products, no Python loop over anchors.

Notation: ``Z = [normalize(z1); normalize(z2)]`` is ``[2N, D]``; anchor ``a`` (row of
``Z``) has its positive at ``(a + N) mod 2N``; ``S = Z Z^T / tau``.

The functions follow the papers (docs/sources.md), not a reference notebook implementation
whose NT-Xent put the positive twice into the denominator, whose MixCo never used the first
view and whose MoCHi looped over anchors and mixed one pair only.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from ._common import check_temperature, recompute_grads

__all__ = [
    "ntxent_loss", "mixco_loss", "mochi_loss",
    "MixcoMixing", "MochiMixing", "sample_mixco_mixing", "sample_mochi_mixing",
]


def _check_views(z1: torch.Tensor, z2: torch.Tensor, temperature: float) -> None:
    if z1.dim() != 2 or z1.shape != z2.shape:
        raise ValueError(f"z1 and z2 must both be [N, D] with the same shape, got "
                         f"{tuple(z1.shape)} and {tuple(z2.shape)}")
    if z1.shape[0] < 2:
        raise ValueError(f"need at least 2 samples (N >= 2), got N={z1.shape[0]}")
    check_temperature(temperature)


def _ntxent_plain(zs: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
    """:class:`_NTXentFromScaled`'s value with ordinary differentiable operations."""
    eye = torch.eye(zs.shape[0], dtype=torch.bool, device=zs.device)
    return F.cross_entropy((zs @ zs.T).masked_fill(eye, float("-inf")), pos)


class _NTXentFromScaled(torch.autograd.Function):
    """Mean over anchors of ``-log softmax_{b != a}(zs_a . zs_b)[pos_a]`` for ``zs`` [A, D].

    Fused forward/backward: the [A, A] logits are computed once; the backward forms the
    softmax ``P`` in one buffer, ``dzs = (G + G^T) zs`` with ``G = (P - onehot(pos)) / A``
    computed as two matmuls (no transposed add). Under ``create_graph=True`` the backward
    differentiates :func:`_ntxent_plain` instead, so second derivatives are exact.
    """

    @staticmethod
    def forward(ctx, zs, pos):
        logits = (zs @ zs.T).fill_diagonal_(float("-inf"))
        lse = torch.logsumexp(logits, dim=1)
        rows = torch.arange(zs.shape[0], device=zs.device)
        loss = (lse - logits[rows, pos]).mean()
        ctx.save_for_backward(zs, pos, logits, lse)
        return loss

    @staticmethod
    def backward(ctx, grad):
        zs, pos, logits, lse = ctx.saved_tensors
        if torch.is_grad_enabled():  # create_graph=True: differentiable recomputation
            return recompute_grads(lambda x: _ntxent_plain(x, pos), (zs,), ctx.needs_input_grad[:1], grad)[0], None
        a = zs.shape[0]
        p = torch.sub(logits, lse.unsqueeze(1)).exp_()    # softmax (logits kept: re-entrant)
        p[torch.arange(a, device=zs.device), pos] -= 1.0
        p.mul_(grad / a)
        return p @ zs + p.T @ zs, None


def ntxent_loss(z1: torch.Tensor, z2: torch.Tensor, *, temperature: float = 0.5) -> torch.Tensor:
    """NT-Xent (normalised temperature-scaled cross-entropy), SimCLR.

    Chen et al. 2020, "A Simple Framework for Contrastive Learning of Visual
    Representations", Eq. 1 and Algorithm 1: for anchor ``i`` with positive ``j``,
    ``l(i, j) = -log exp(s_ij / tau) / sum_{k != i} exp(s_ik / tau)`` over the 2N views,
    averaged over all 2N anchors (both directions). The positive appears exactly once in
    the denominator; the anchor itself is excluded. Identical to GRACE's loss (Zhu et al.
    2020, Eq. 1-2) with intra- and inter-view negatives.

    Args:
        z1, z2: ``[N, D]`` float projections of the two views (row i of each = sample i);
            L2-normalised inside.
        temperature: ``tau > 0``.

    Returns:
        Scalar tensor, mean over the 2N anchors (nats).

    Raises:
        ValueError: mismatched shapes, N < 2, or temperature <= 0.
    """
    _check_views(z1, z2, temperature)
    n = z1.shape[0]
    z = F.normalize(torch.cat([z1, z2], dim=0), dim=1)
    pos = torch.arange(2 * n, device=z.device).roll(n)  # a -> (a + N) mod 2N
    return _NTXentFromScaled.apply(z * (1.0 / temperature) ** 0.5, pos)


# --------------------------------------------------------------------------- MixCo
@dataclass
class MixcoMixing:
    """The random choices of one MixCo step (per view, so ``[2, N]``).

    ``partner[v, i]``: index q of the sample mixed with sample i in view v;
    ``lam[v, i]``: mixing weight lambda ~ Beta(alpha, alpha) of sample i.
    """

    partner: torch.Tensor  # [2, N] long
    lam: torch.Tensor      # [2, N] float


def sample_mixco_mixing(n: int, alpha: float, generator: torch.Generator | None = None,
                        device: torch.device | str = "cpu") -> MixcoMixing:
    """Draw MixCo's partners (a random permutation per view) and ``lambda ~ Beta(alpha, alpha)``.

    Deterministic given ``generator`` (Beta draws use NumPy seeded from it, since
    ``torch.distributions.Beta`` cannot take a generator).
    """
    if not alpha > 0:
        raise ValueError(f"alpha must be > 0, got {alpha}")
    partner = torch.stack([torch.randperm(n, generator=generator) for _ in range(2)])
    rng = np.random.default_rng(int(torch.randint(0, 2**62, (1,), generator=generator).item()))
    lam = torch.from_numpy(rng.beta(alpha, alpha, size=(2, n))).float()
    return MixcoMixing(partner.to(device), lam.to(device))


def mixco_loss(z1: torch.Tensor, z2: torch.Tensor, *, temperature: float = 0.5,
               alpha: float = 1.0, weight: float = 1.0,
               generator: torch.Generator | None = None,
               mixing: MixcoMixing | None = None) -> torch.Tensor:
    """NT-Xent plus the MixCo mix-up term (Kim et al. 2020, "MixCo: Mix-up Contrastive
    Learning for Visual Representation", Sec. 3, Eq. 3-4).

    Within one view, sample i is mixed with a partner q:
    ``m_i = normalize(lam_i * z_i + (1 - lam_i) * z_q)`` with ``lam_i ~ Beta(alpha, alpha)``
    (mixing in projection space, on L2-normalised projections). The mix is scored against
    every sample of the *other* view, ``p_ik = softmax_k(m_i . w_k / tau)``, with soft
    targets ``lam_i`` on k = i and ``1 - lam_i`` on k = q:
    ``L_mix = -(1/N) sum_i [lam_i log p_ii + (1 - lam_i) log p_iq]``. The term is taken in
    both directions (mix view 1 vs view 2, mix view 2 vs view 1) and averaged. Total:
    ``ntxent_loss(z1, z2) + weight * L_mix``.

    Args:
        z1, z2: ``[N, D]`` projections of the two views.
        temperature: ``tau > 0`` (used for both terms).
        alpha: Beta parameter (> 0).
        weight: weight of the mix-up term (>= 0; 0 gives plain NT-Xent).
        generator: torch generator for partners and lambdas (reproducible runs).
        mixing: inject the random choices (tests); overrides ``generator``.

    Returns:
        Scalar tensor (nats).

    Raises:
        ValueError: bad shapes, temperature <= 0, alpha <= 0, weight < 0.
    """
    _check_views(z1, z2, temperature)
    if weight < 0:
        raise ValueError(f"weight must be >= 0, got {weight}")
    base = ntxent_loss(z1, z2, temperature=temperature)
    if weight == 0:
        return base
    n = z1.shape[0]
    if mixing is None:
        mixing = sample_mixco_mixing(n, alpha, generator, device=z1.device)
    u = F.normalize(torch.stack([z1, z2]), dim=-1)             # [2, N, D]
    lam = mixing.lam.to(u.dtype).unsqueeze(-1)                 # [2, N, 1]
    partner = mixing.partner                                   # [2, N]
    mixed = lam * u + (1 - lam) * torch.gather(u, 1, partner.unsqueeze(-1).expand_as(u))
    mixed = F.normalize(mixed, dim=-1)
    other = u.flip(0)                                          # view 2, view 1
    logp = torch.log_softmax(mixed @ other.transpose(1, 2) / temperature, dim=-1)  # [2, N, N]
    idx = torch.arange(n, device=u.device).expand(2, n)
    lp_self = torch.gather(logp, 2, idx.unsqueeze(-1)).squeeze(-1)
    lp_partner = torch.gather(logp, 2, partner.unsqueeze(-1)).squeeze(-1)
    lam = lam.squeeze(-1)
    mix_term = -(lam * lp_self + (1 - lam) * lp_partner).mean()
    return base + weight * mix_term


# --------------------------------------------------------------------------- MoCHi
@dataclass
class MochiMixing:
    """The random choices of one MoCHi step for ``A = 2N`` anchors.

    Indices are *ranks* into each anchor's top-``n_hard`` hardest negatives (0 = hardest).

    - ``pair``: ``[A, s, 2]`` long, the two hard negatives mixed into each of the s
      synthetic negatives ``h = normalize(alpha n_p + (1 - alpha) n_q)``;
    - ``alpha``: ``[A, s]`` in (0, 1);
    - ``prime``: ``[A, s']`` long, the hard negative mixed with the query into each of
      the s' synthetic negatives ``h' = normalize(beta q + (1 - beta) n_j)``;
    - ``beta``: ``[A, s']`` in (0, 0.5), so the query's share stays below one half.
    """

    pair: torch.Tensor
    alpha: torch.Tensor
    prime: torch.Tensor
    beta: torch.Tensor


def sample_mochi_mixing(n_anchors: int, n_hard: int, s: int, s_prime: int,
                        generator: torch.Generator | None = None,
                        device: torch.device | str = "cpu") -> MochiMixing:
    """Draw MoCHi's mixing choices: uniform pairs / indices among the top ``n_hard``,
    ``alpha ~ U(0, 1)``, ``beta ~ U(0, 0.5)`` (Kalantidis et al. 2020, Sec. 4.1-4.2)."""
    g = generator
    pair = torch.randint(0, n_hard, (n_anchors, s, 2), generator=g)
    alpha = torch.rand(n_anchors, s, generator=g)
    prime = torch.randint(0, n_hard, (n_anchors, s_prime), generator=g)
    beta = 0.5 * torch.rand(n_anchors, s_prime, generator=g)
    return MochiMixing(pair.to(device), alpha.to(device), prime.to(device), beta.to(device))


def mochi_loss(z1: torch.Tensor, z2: torch.Tensor, *, temperature: float = 0.5,
               n_hard: int = 1024, s: int = 256, s_prime: int = 128,
               generator: torch.Generator | None = None,
               mixing: MochiMixing | None = None) -> torch.Tensor:
    """NT-Xent with MoCHi hard negative mixing (Kalantidis et al. 2020, "Hard Negative
    Mixing for Contrastive Learning", Sec. 4, Eq. 1-3).

    For each of the 2N anchors q (both views, as in :func:`ntxent_loss`), its negatives
    (all 2N views except itself and its positive) are ranked by similarity ``q . n`` and
    the top ``n_hard`` kept. Then

    - s synthetic negatives ``h_k = normalize(alpha_k n_p + (1 - alpha_k) n_q)`` from random
      pairs (p, q) of the hard negatives, ``alpha_k ~ U(0, 1)`` (Eq. 2);
    - s' more ``h'_k = normalize(beta_k q + (1 - beta_k) n_j)``, ``beta_k ~ U(0, 0.5)``, so
      the query contributes less than half (Eq. 3);

    both are detached (no gradient flows into the synthetic points; the anchor still gets
    one through ``q . h``) and appended to the anchor's NT-Xent denominator.

    Implementation: because every vector is unit-norm, ``q . h`` and ``||h||`` are linear
    combinations of entries of ``Z Z^T`` (``||a n_p + b n_q||^2 = a^2 + b^2 + 2ab n_p.n_q``),
    so the synthetic logits are gathered from the one Gram matrix ``Z Z^T`` that also gives
    the batch logits and the hard-negative ranking: ``O(A (s + s'))`` extra memory, no
    ``[A, s, D]`` tensor, and a fused backward of two ``[A, A] x [A, D]`` products, as
    NT-Xent's (:class:`_MochiFromUnit`; second derivatives exact, synthetics constant).
    With ``s = s' = 0`` it is :func:`ntxent_loss`.

    Args:
        z1, z2: ``[N, D]`` projections of the two views.
        temperature: ``tau > 0``.
        n_hard: N of the paper, hardest negatives kept per anchor (1 <= n_hard <= 2N - 2).
        s: synthetic negatives from pairs of hard negatives (>= 0).
        s_prime: synthetic negatives from query + hard negative (>= 0).
        generator: torch generator for the mixing choices.
        mixing: inject the choices (tests); overrides ``generator``.

    Returns:
        Scalar tensor, mean over the 2N anchors (nats).

    Raises:
        ValueError: bad shapes, temperature <= 0, n_hard out of range, s or s' < 0.
    """
    _check_views(z1, z2, temperature)
    n = z1.shape[0]
    a_count = 2 * n
    if not 1 <= n_hard <= a_count - 2:
        raise ValueError(f"n_hard must be in [1, 2N-2] = [1, {a_count - 2}], got {n_hard}")
    if s < 0 or s_prime < 0:
        raise ValueError(f"s and s_prime must be >= 0, got s={s}, s_prime={s_prime}")
    if s == 0 and s_prime == 0:
        return ntxent_loss(z1, z2, temperature=temperature)
    if mixing is None:
        mixing = sample_mochi_mixing(a_count, n_hard, s, s_prime, generator, device=z1.device)
    z = F.normalize(torch.cat([z1, z2], dim=0), dim=1)
    pos = torch.arange(a_count, device=z.device).roll(n)  # a -> (a + N) mod 2N
    return _MochiFromUnit.apply(z, pos, n_hard, mixing.pair, mixing.alpha, mixing.prime, mixing.beta,
                                float(temperature))


def _mochi_plain(z: torch.Tensor, pos: torch.Tensor, hard: torch.Tensor, pair: torch.Tensor,
                 alpha: torch.Tensor, prime: torch.Tensor, beta: torch.Tensor,
                 temperature: float) -> torch.Tensor:
    """MoCHi's loss on unit rows ``z`` [A, D] given the hard negatives ``hard`` [A, n_hard]
    (hardest first), with ordinary differentiable operations: the definition that
    :class:`_MochiFromUnit` fuses, and its second derivative."""
    a_count = z.shape[0]
    zd = z.detach()
    rows = torch.arange(a_count, device=z.device)
    zs = z * (1.0 / temperature) ** 0.5
    eye = torch.eye(a_count, dtype=torch.bool, device=z.device)
    logits = (zs @ zs.T).masked_fill(eye, float("-inf"))
    gram = (zd @ zd.T).masked_fill(eye, 1.0)          # [A, A] cosines, no gradient
    q_sg = z @ zd.T                                   # q . sg(v): grad to the anchor only
    lse = [torch.logsumexp(logits, dim=1)]
    if pair.shape[1] > 0:
        p = torch.gather(hard, 1, pair[..., 0])       # [A, s] node ids
        r = torch.gather(hard, 1, pair[..., 1])
        al = alpha.to(z.dtype)
        dot = al * torch.gather(q_sg, 1, p) + (1 - al) * torch.gather(q_sg, 1, r)
        norm2 = al**2 + (1 - al) ** 2 + 2 * al * (1 - al) * gram[p, r]
        lse.append(torch.logsumexp(dot / norm2.clamp_min(1e-12).sqrt() / temperature, dim=1))
    if prime.shape[1] > 0:
        j = torch.gather(hard, 1, prime)               # [A, s']
        be = beta.to(z.dtype)
        self_sg = (z * zd).sum(1, keepdim=True)       # q . sg(q) = 1, grad to q
        dot = be * self_sg + (1 - be) * torch.gather(q_sg, 1, j)
        norm2 = be**2 + (1 - be) ** 2 + 2 * be * (1 - be) * torch.gather(gram, 1, j)
        lse.append(torch.logsumexp(dot / norm2.clamp_min(1e-12).sqrt() / temperature, dim=1))
    total = torch.logsumexp(torch.stack(lse, dim=1), dim=1)
    return (total - logits[rows, pos]).mean()


class _MochiFromUnit(torch.autograd.Function):
    """MoCHi's loss (see :func:`mochi_loss`) on unit rows ``z`` [A, D], fused.

    Forward: one ``[A, A]`` Gram matrix ``G = Z Z^T`` gives the batch logits ``G / tau``,
    the hard-negative ranking (top-k of ``G`` without the anchor and its positive) and,
    because every vector is unit-norm, the synthetic logits: ``q . h`` and ``||h||`` are
    linear in entries of ``G`` (``||a n_p + b n_q||^2 = a^2 + b^2 + 2ab n_p.n_q``), so no
    ``[A, s, D]`` tensor is formed.

    Backward: the synthetic points are detached, so their logits send gradient to the
    anchor only: ``dL/dq += sum_k P_k c_k n_k`` with the mixing coefficients ``c_k``. These
    are scattered into the anchor side of the batch-logit gradient ``P`` [A, A] after its
    transpose product is taken: ``dZ = P_anchor Z + P_batch^T Z``, two matmuls, as NT-Xent.
    Under ``create_graph=True`` the backward differentiates :func:`_mochi_plain` instead,
    so second derivatives are exact.
    """

    @staticmethod
    def forward(ctx, z, pos, n_hard, pair, alpha, prime, beta, temperature):
        a_count = z.shape[0]
        inv = 1.0 / temperature
        rows = torch.arange(a_count, device=z.device)
        gram = z @ z.T                                 # [A, A] cosines
        cos_pos = gram[rows, pos]                      # copy
        gram.fill_diagonal_(float("-inf"))
        gram[rows, pos] = float("-inf")
        hard = gram.topk(n_hard, dim=1).indices        # [A, n_hard], hardest first
        gram[rows, pos] = cos_pos                      # gram: batch cosines, -inf on the diagonal
        # synthetic logits are (linear combination of cosines) * k_, k_ = 1 / (tau ||h||); the
        # gradient coefficients are kept without the 1 / tau, which the backward applies once
        logits, index, coef = [], [], []
        if pair.shape[1] > 0:
            p = torch.gather(hard, 1, pair[..., 0])    # [A, s] node ids
            r = torch.gather(hard, 1, pair[..., 1])
            al = alpha.to(z.dtype)
            g_pr = torch.where(p == r, 1.0, gram[p, r])
            k = (al**2 + (1 - al) ** 2 + 2 * al * (1 - al) * g_pr).clamp_min(1e-12).rsqrt()
            logits.append((al * gram.gather(1, p) + (1 - al) * gram.gather(1, r)) * k * inv)
            index += [p, r]
            coef += [al * k, (1 - al) * k]
        if prime.shape[1] > 0:
            j = torch.gather(hard, 1, prime)           # [A, s']
            be = beta.to(z.dtype)
            g_j = gram.gather(1, j)
            k = (be**2 + (1 - be) ** 2 + 2 * be * (1 - be) * g_j).clamp_min(1e-12).rsqrt()
            self_dot = (z * z).sum(1, keepdim=True)    # q . q = 1 (as computed)
            logits.append((be * self_dot + (1 - be) * g_j) * k * inv)
            index += [rows.unsqueeze(1).expand_as(j), j]
            coef += [be * k, (1 - be) * k]
        syn = torch.cat(logits, dim=1)                 # [A, s + s'] synthetic logits
        gram.mul_(inv)                                 # gram: batch logits from here on
        m = gram.amax(1, keepdim=True)
        lse_batch = (m + torch.sub(gram, m).exp_().sum(1, keepdim=True).log_()).view(-1)
        total = torch.logaddexp(lse_batch, torch.logsumexp(syn, dim=1))
        loss = (total - cos_pos * inv).mean()
        ctx.save_for_backward(z, pos, hard, pair, alpha, prime, beta, gram, total, syn,
                              torch.cat(index, dim=1), torch.cat(coef, dim=1))
        ctx.temperature = temperature
        ctx.n_split = (pair.shape[1], prime.shape[1])
        return loss

    @staticmethod
    def backward(ctx, grad):
        z, pos, hard, pair, alpha, prime, beta, gram, total, syn, index, coef = ctx.saved_tensors
        none = (None,) * 7
        if torch.is_grad_enabled():  # create_graph=True: differentiable recomputation
            dz = recompute_grads(
                lambda x: _mochi_plain(x, pos, hard, pair, alpha, prime, beta, ctx.temperature),
                (z,), ctx.needs_input_grad[:1], grad)[0]
            return (dz,) + none
        if not ctx.needs_input_grad[0]:
            return (None,) + none
        a_count = z.shape[0]
        inv = 1.0 / ctx.temperature
        rows = torch.arange(a_count, device=z.device)
        p = torch.sub(gram, total.unsqueeze(1)).exp_()  # batch softmax (0 on the diagonal)
        p[rows, pos] -= 1.0                            # d loss_a / d logit_ab (x A)
        gb = p.T @ z                                   # the contrast side of the batch logits
        ps = (syn - total.unsqueeze(1)).exp_()         # softmax of the synthetic logits
        s, sp = ctx.n_split
        ps = torch.cat([ps[:, :s], ps[:, :s], ps[:, s:], ps[:, s:]], dim=1) if s and sp else \
            torch.cat([ps, ps], dim=1)
        p.scatter_add_(1, index, ps.mul_(coef))       # synthetic: the anchor side only
        dz = (p @ z).add_(gb).mul_(grad * (inv / a_count))
        return (dz,) + none
