"""Contrastive and regression losses: pure, vectorised functions on tensors.

Conventions shared by every loss here
-------------------------------------
- A loss is a function ``name_loss(embeddings..., labels/targets..., *, temperature, ...)``
  returning a scalar tensor; its docstring states shapes, dtypes, whether the inputs must be
  L2-normalised, the reduction, the errors raised and the source equation.
- Supervised losses (supcon, all, any, mulsupcon, simdis) take ``features [N, D]`` or
  ``[N, n_views, D]`` that the caller L2-normalises; InfoNCE and the regression baselines
  normalise inside. All accept ``reduction`` and ``return_stats=True`` (-> ``(loss, LossStats)``)
  and, for distributed training, ``contrast_features`` / ``contrast_labels`` /
  ``anchor_offset`` (see :func:`distributed_loss`).
- No Python loop over anchors, labels or views: masks and matrix products only.
- Look losses up by name with :func:`get_loss`; the table is in :mod:`.registry`.
  Adding a loss = one file here + one line in ``registry.LOSSES`` (docs/losses.md).
"""

from .registry import LOSSES, LossSpec, get_loss, get_spec


def __getattr__(name: str):
    # lazy: importing the registry must not import torch-heavy loss modules
    if name in ("distributed_loss", "distributed_infonce_loss"):
        from . import _dist

        return getattr(_dist, name)
    if name == "LossStats":
        from ._common import LossStats

        return LossStats
    raise AttributeError(name)


__all__ = ["LOSSES", "LossSpec", "get_loss", "get_spec", "distributed_loss", "distributed_infonce_loss", "LossStats"]
