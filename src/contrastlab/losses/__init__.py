"""Contrastive and regression losses: pure, vectorised functions on tensors.

Conventions shared by every loss here
-------------------------------------
- A loss is a function ``name_loss(embeddings..., labels/targets..., *, temperature, ...)``
  returning a scalar tensor; its docstring states shapes, dtypes, whether the inputs must be
  L2-normalised, the reduction, the errors raised and the source (paper and equation; the
  list is ``docs/sources.md``).
- Who L2-normalises, one rule: a loss that takes *paired* inputs (two views ``z1, z2``:
  NT-Xent, MixCo, MoCHi; predictions and targets: InfoNCE) normalises them itself (InfoNCE:
  ``normalize=True`` by default, ``False`` for inputs that already are unit); a loss that
  takes a *feature tensor* ``features [N, D]`` / ``[N, n_views, D]`` with labels (supcon,
  all, any, mulsupcon, simdis) does not: the caller passes L2-normalised rows. The
  regression baselines compare raw vectors (``smoothl1``, optional ``normalize``) or are
  scale-invariant (``cosine``).
- The feature-tensor losses accept ``reduction`` and ``return_stats=True`` (->
  ``(loss, LossStats)``) and, for distributed training, ``contrast_features`` /
  ``contrast_labels`` / ``anchor_offset`` (see :func:`distributed_loss`). The rank offset is
  called ``anchor_offset`` in every loss that takes one (InfoNCE included).
- No loss swallows keywords: an unknown keyword raises ``TypeError``.
- Second derivatives are exact: the fused autograd Functions recompute their loss with
  differentiable operations under ``create_graph=True``.
- No Python loop over anchors, labels or views: masks and matrix products only.
- Look losses up by name with :func:`get_loss`; the table is in :mod:`.registry`.
  Adding a loss = one file here + one entry in ``registry.yaml`` (docs/losses.md).
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
