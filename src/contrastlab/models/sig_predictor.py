"""SigPredictor (retrieval experiment notes, Exp 1.3/1.4; docs/sources.md): signature token states -> predicted body embedding.

``Linear(H -> d_model)``, ``n_layers`` x ``TransformerEncoderLayer(d_model, n_heads,
ffn, dropout)``, mean pool over non-padding tokens, ``Linear(d_model -> H)``; the output is
L2-normalised for the contrastive losses (``normalize=True``), left raw for SmoothL1.
With the notes' sizes (H=2048, d_model=512, 2 layers, 8 heads, FFN 2048) it has 8,404,480
parameters.
"""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor, nn

__all__ = ["SigPredictor"]


class SigPredictor(nn.Module):
    """Args:
        hidden_size: teacher width ``H`` (input and output).
        d_model, n_layers, n_heads, ffn, dropout: encoder sizes (seed: 512, 2, 8, 2048, 0.1).
    """

    def __init__(self, hidden_size: int, d_model: int = 512, n_layers: int = 2, n_heads: int = 8,
                 ffn: int = 2048, dropout: float = 0.1):
        super().__init__()
        self.inp = nn.Linear(hidden_size, d_model)
        layer = nn.TransformerEncoderLayer(d_model, n_heads, ffn, dropout, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, n_layers, enable_nested_tensor=False)
        self.out = nn.Linear(d_model, hidden_size)

    def forward(self, states: Tensor, mask: Tensor, normalize: bool = False) -> Tensor:
        """Args:
            states: ``[B, T, H]`` signature token states (any float dtype; cast to fp32).
            mask: ``[B, T]`` bool, True for real tokens (each row needs at least one).
            normalize: L2-normalise the output.

        Returns:
            ``[B, H]`` float32 predicted body embeddings.
        """
        mask = mask.bool()
        h = self.encoder(self.inp(states.float()), src_key_padding_mask=~mask)
        m = mask.unsqueeze(-1).to(h.dtype)
        pooled = (h * m).sum(1) / m.sum(1).clamp_min(1.0)
        y = self.out(pooled)
        return F.normalize(y, dim=-1) if normalize else y
