"""Contrastive and regression losses: pure, vectorised functions on tensors.

Conventions shared by every loss here
-------------------------------------
- A loss is a function ``name_loss(embeddings..., labels/targets..., *, temperature, ...)``
  returning a scalar tensor; its docstring states shapes, dtypes, whether the inputs must be
  L2-normalised, the reduction, the errors raised and the source equation.
- No Python loop over anchors, labels or views: masks and matrix products only.
- Look losses up by name with :func:`get_loss`; the table is in :mod:`.registry`.
"""

from .registry import LOSSES, LossSpec, get_loss, get_spec

__all__ = ["LOSSES", "LossSpec", "get_loss", "get_spec"]
