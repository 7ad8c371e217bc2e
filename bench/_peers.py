"""Peer implementations the benchmarks time ours against (shared by the bench scripts)."""

from __future__ import annotations

import torch


def supcontrast_reference(features: torch.Tensor, labels: torch.Tensor | None = None,
                          temperature: float = 0.1, base_temperature: float = 0.1) -> torch.Tensor:
    """The SupContrast reference algorithm (Khosla et al.'s ``SupConLoss.forward``,
    contrast_mode='all'), written as in their code: dense masks, ``[bsz*n_views]^2`` buffers.

    ``features``: ``[bsz, n_views, D]``, already L2-normalised; ``labels``: ``[bsz]`` or
    ``None`` (SimCLR: the other views of the same sample are the positives).
    """
    bsz, n_views = features.shape[:2]
    if labels is None:
        mask = torch.eye(bsz, dtype=torch.float32)
    else:
        labels = labels.view(-1, 1)
        mask = torch.eq(labels, labels.T).float()
    contrast = torch.cat(torch.unbind(features, dim=1), dim=0)
    adc = contrast @ contrast.T / temperature
    logits = adc - adc.max(dim=1, keepdim=True)[0].detach()
    mask = mask.repeat(n_views, n_views)
    logits_mask = torch.scatter(torch.ones_like(mask), 1,
                                torch.arange(bsz * n_views).view(-1, 1), 0)
    mask = mask * logits_mask
    exp_logits = torch.exp(logits) * logits_mask
    log_prob = logits - torch.log(exp_logits.sum(1, keepdim=True))
    mean_log_prob_pos = (mask * log_prob).sum(1) / mask.sum(1).clamp_min(1)
    return -(temperature / base_temperature) * mean_log_prob_pos.mean()
