"""Graph feature propagation and the frozen encoder's output: what the probe-only baselines
of the graph track (stage ``baselines_graph``, :mod:`contrastlab.evaluation.graph_baselines`)
need, kept apart from the self-supervised training code
(:mod:`contrastlab.training.graph`) so that editing a loss or the training loop does not
rerun the baselines (issue 39). It lives in ``models`` (below ``evaluation`` and
``training``) so both import it without importing each other.
"""

from __future__ import annotations

import torch
from torch import nn

from ..errors import InputError

__all__ = ["sgc_operator", "propagate_features", "embed"]


def sgc_operator(edge_index: torch.Tensor, num_nodes: int) -> torch.Tensor:
    """SGC's normalised adjacency with self-loops (Wu et al., ICML 2019, Eq. 5; the GCN
    renormalisation trick of Kipf & Welling, ICLR 2017, Eq. 8):
    ``S = D~^{-1/2} (A + I) D~^{-1/2}`` with ``D~`` the degree matrix of ``A + I``.

    Args:
        edge_index: ``[2, E]`` int64 (directed pairs; the graph is symmetrised, duplicate
            edges and existing self-loops counted once).
        num_nodes: ``N``.

    Returns:
        ``[N, N]`` sparse COO float64 ``S``.

    Raises:
        InputError: ``edge_index`` not ``[2, E]`` or a node id outside ``[0, N)``.
    """
    if edge_index.dim() != 2 or edge_index.shape[0] != 2:
        raise InputError(f"edge_index must be [2, E], got {tuple(edge_index.shape)}")
    if edge_index.numel() and (int(edge_index.min()) < 0 or int(edge_index.max()) >= num_nodes):
        raise InputError(f"edge_index has node ids outside [0, {num_nodes})")
    loops = torch.arange(num_nodes).repeat(2, 1)
    ei = torch.cat([edge_index, edge_index.flip(0), loops], 1)
    a = torch.sparse_coo_tensor(ei, torch.ones(ei.shape[1], dtype=torch.float64),
                                (num_nodes, num_nodes)).coalesce()
    a = torch.sparse_coo_tensor(a.indices(), torch.ones_like(a.values()), a.shape).coalesce()
    deg = torch.sparse.sum(a, 1).to_dense()
    dinv = deg.pow(-0.5)
    i, j = a.indices()
    return torch.sparse_coo_tensor(a.indices(), dinv[i] * dinv[j], a.shape).coalesce()


def propagate_features(x, edge_index: torch.Tensor, k: int) -> torch.Tensor:
    """SGC features ``S^K X`` (Wu et al., ICML 2019, Eq. 8, before the logistic regression):
    ``K`` applications of :func:`sgc_operator` to the node features.

    Args:
        x: ``[N, F]`` float node features (dense or sparse).
        edge_index: ``[2, E]`` int64.
        k: number of propagation steps ``K`` >= 0 (0 returns ``x``).

    Returns:
        ``[N, F]`` dense float64.

    Raises:
        InputError: ``k`` < 0 or bad ``edge_index``.
    """
    if k < 0:
        raise InputError(f"k must be >= 0, got {k}")
    h = (x.to_dense() if x.is_sparse else x).double()
    s = sgc_operator(edge_index, h.shape[0])
    for _ in range(k):
        h = torch.sparse.mm(s, h)
    return h


@torch.no_grad()
def embed(encoder: nn.Module, data) -> torch.Tensor:
    """Encoder output on the clean graph, ``[N, out_dim]`` float32 (eval mode)."""
    encoder.eval()
    return encoder(data.x, data.edge_index)
