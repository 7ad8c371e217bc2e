"""Two-layer GCN encoder and a projection head for graph self-supervised learning.

Encoder: Kipf & Welling 2017 graph convolutions (``torch_geometric.nn.GCNConv``,
symmetric normalisation with self-loops), ``in -> hidden -> out`` with an activation
after each layer (as in GRACE, Zhu et al. 2020). Projection head: SimCLR's
two-layer MLP ``g(h) = W2 act(W1 h)`` (Chen et al. 2020, Sec. 2.1); the linear probe uses
the encoder output ``h``, not the projection.
"""

from __future__ import annotations

import torch
from torch import nn

from ..errors import InputError

__all__ = ["GCNEncoder", "ProjectionHead", "make_activation"]


def make_activation(name: str, dim: int) -> nn.Module:
    """``relu`` | ``prelu`` (one slope per channel) | ``elu``."""
    if name == "relu":
        return nn.ReLU()
    if name == "prelu":
        return nn.PReLU(dim)
    if name == "elu":
        return nn.ELU()
    raise InputError(f"unknown activation {name!r}; use relu, prelu or elu")


class GCNEncoder(nn.Module):
    """Two GCN layers; ``forward(x [N, F] float, edge_index [2, E] long) -> h [N, out_dim]``."""

    def __init__(self, in_dim: int, hidden_dim: int = 128, out_dim: int = 128,
                 activation: str = "prelu"):
        super().__init__()
        from torch_geometric.nn import GCNConv

        self.conv1 = GCNConv(in_dim, hidden_dim)
        self.act1 = make_activation(activation, hidden_dim)
        self.conv2 = GCNConv(hidden_dim, out_dim)
        self.act2 = make_activation(activation, out_dim)

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        h = self.act1(self.conv1(x, edge_index))
        return self.act2(self.conv2(h, edge_index))


class ProjectionHead(nn.Module):
    """SimCLR projection head ``[N, dim] -> [N, proj_dim]``: Linear, ELU, Linear."""

    def __init__(self, dim: int = 128, proj_dim: int = 128):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(dim, proj_dim), nn.ELU(), nn.Linear(proj_dim, proj_dim))

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return self.mlp(h)
