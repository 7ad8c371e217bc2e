"""Encoders for the multi-label track: an MLP on feature vectors, a head on frozen teacher
states, and the two-layer projection head of the contrastive phase.

Protocol (Sim-Dis paper, Appendix C.4; Khosla et al. 2020): the projected representation
``z = Proj(Enc(x))`` with ``Proj`` two linear layers with ReLU and ``D_P = 256`` is trained
with the contrastive loss; the classifier phase drops ``Proj`` and trains a linear layer on
the frozen ``h = Enc(x)``.
"""

from __future__ import annotations

import torch
from torch import nn

from ..errors import InputError

__all__ = ["MLPEncoder", "TeacherHead", "ProjectionHead", "build_encoder"]


class MLPEncoder(nn.Module):
    """MLP encoder for dense feature vectors.

    ``in_dim -> hidden -> ... -> out_dim`` with ReLU (and dropout) between layers; the output
    ``h`` has no activation clamp beyond the last ReLU.

    Args:
        in_dim: F, number of input features.
        hidden: widths of the hidden layers (``[]`` gives one linear layer + ReLU).
        out_dim: encoder output width H.
        dropout: dropout probability after each hidden ReLU.

    Shapes: ``forward(x: float32 [N, F]) -> float32 [N, H]``.
    """

    def __init__(self, in_dim: int, hidden: list[int], out_dim: int, dropout: float = 0.0):
        super().__init__()
        dims = [in_dim, *hidden, out_dim]
        layers: list[nn.Module] = []
        for a, b in zip(dims[:-1], dims[1:]):
            layers += [nn.Linear(a, b), nn.ReLU()]
            if dropout > 0:
                layers.append(nn.Dropout(dropout))
        self.net = nn.Sequential(*layers)
        self.out_dim = out_dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class TeacherHead(MLPEncoder):
    """Trainable head on frozen teacher states (text/code): LayerNorm, then an MLP.

    The teacher itself (``contrastlab.models.teacher.TeacherEncoder``) is run once by the
    build stage; its mean-pooled states ``[N, H_teacher]`` are this module's input.
    """

    def __init__(self, in_dim: int, hidden: list[int], out_dim: int, dropout: float = 0.0):
        super().__init__(in_dim, hidden, out_dim, dropout)
        self.net = nn.Sequential(nn.LayerNorm(in_dim), *self.net)


class ProjectionHead(nn.Module):
    """Two linear layers with ReLU between: ``H -> H -> D_P`` (D_P = 256 in the paper).

    Shapes: ``forward(h: [N, H]) -> [N, D_P]`` (not normalised; the training loop
    L2-normalises before the loss).
    """

    def __init__(self, in_dim: int, out_dim: int = 256, hidden: int | None = None):
        super().__init__()
        hidden = hidden or in_dim
        self.net = nn.Sequential(nn.Linear(in_dim, hidden), nn.ReLU(), nn.Linear(hidden, out_dim))

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return self.net(h)


def build_encoder(kind: str, in_dim: int, hidden: list[int], out_dim: int, dropout: float = 0.0) -> nn.Module:
    """``kind``: ``"mlp"`` (feature data) or ``"teacher_head"`` (frozen teacher states).

    Raises:
        ValueError: unknown kind.
    """
    if kind == "mlp":
        return MLPEncoder(in_dim, hidden, out_dim, dropout)
    if kind == "teacher_head":
        return TeacherHead(in_dim, hidden, out_dim, dropout)
    raise InputError(f"unknown encoder kind {kind!r} (expected 'mlp' or 'teacher_head')")
