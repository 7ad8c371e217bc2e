"""The loss registry: one line per loss, name -> where it lives and what it needs.

``params.yaml`` and the reports refer to losses by these names. Entries are lazy
(``"module:function"``) so that importing the registry imports no loss module.

Adding a loss: write ``src/contrastlab/losses/<yours>.py`` with a function following the
conventions of this package (see ``contrastlab/losses/__init__.py``), then add one line to
``LOSSES`` below. Every stage that takes a ``loss`` param, and every report table, picks
it up by name.

``needs`` says what the loss consumes besides embeddings:
- ``views``: two (or ``n_views``) augmented views of the same samples, no labels;
- ``labels``: integer class labels ``[N]`` (or an explicit positive mask);
- ``multilabels``: multi-hot labels ``[N, C]``;
- ``targets``: paired target vectors (retrieval: prediction i <-> target i);
- ``regression``: paired target vectors, no negatives.
"""

from __future__ import annotations

import functools
import importlib
from dataclasses import dataclass, field
from typing import Any, Callable

from ..errors import UnknownNameError


@dataclass(frozen=True)
class LossSpec:
    """A registry entry."""

    target: str
    needs: str
    family: str
    title: str
    defaults: dict[str, Any] = field(default_factory=dict)

    def load(self) -> Callable[..., Any]:
        """Import and return the loss function (with ``defaults`` bound as keywords)."""
        mod, _, fn = self.target.partition(":")
        f = getattr(importlib.import_module(mod), fn)
        return functools.partial(f, **self.defaults) if self.defaults else f


LOSSES: dict[str, LossSpec] = {
    # supervised / multi-label (Khosla et al. 2020; Sim-Dis paper; Zhang & Wu 2024) -- docs/sources.md
    "supcon": LossSpec("contrastlab.losses.supcon:supcon_loss", "labels", "supervised", "SupCon"),
    "all": LossSpec("contrastlab.losses.multilabel:all_loss", "multilabels", "multilabel", "ALL"),
    "any": LossSpec("contrastlab.losses.multilabel:any_loss", "multilabels", "multilabel", "ANY"),
    "mulsupcon": LossSpec("contrastlab.losses.multilabel:mulsupcon_loss", "multilabels", "multilabel", "MulSupCon"),
    "simdis": LossSpec("contrastlab.losses.simdis:simdis_loss", "multilabels", "multilabel", "Sim-Dis"),
    "sim_only": LossSpec("contrastlab.losses.simdis:simdis_loss", "multilabels", "multilabel", "Sim only", {"mode": "sim_only"}),
    "dis_only": LossSpec("contrastlab.losses.simdis:simdis_loss", "multilabels", "multilabel", "Dis only", {"mode": "dis_only"}),
    # retrieval (van den Oord et al. 2018; regression baselines)
    "infonce": LossSpec("contrastlab.losses.infonce:infonce_loss", "targets", "retrieval", "InfoNCE"),
    "infonce_hardneg": LossSpec("contrastlab.losses.infonce:infonce_hardneg_loss", "targets", "retrieval", "InfoNCE + hard negatives"),
    "smoothl1": LossSpec("contrastlab.losses.regression:smoothl1_loss", "regression", "retrieval", "SmoothL1"),
    "cosine": LossSpec("contrastlab.losses.regression:cosine_loss", "regression", "retrieval", "Cosine"),
    # self-supervised, two views (Chen et al. 2020; Kim et al. 2020; Kalantidis et al. 2020)
    "ntxent": LossSpec("contrastlab.losses.selfsup:ntxent_loss", "views", "selfsup", "NT-Xent (SimCLR)"),
    "mixco": LossSpec("contrastlab.losses.selfsup:mixco_loss", "views", "selfsup", "MixCo"),
    "mochi": LossSpec("contrastlab.losses.selfsup:mochi_loss", "views", "selfsup", "MoCHi"),
}


def get_spec(name: str) -> LossSpec:
    """Registry entry of ``name``.

    Raises:
        contrastlab.errors.UnknownNameError: (a ``KeyError`` and an ``InputError``) ``name``
            is not registered; the message lists the known names.
    """
    try:
        return LOSSES[name]
    except KeyError:
        raise UnknownNameError(f"unknown loss {name!r}; known: {', '.join(sorted(LOSSES))}") from None


def get_loss(name: str) -> Callable[..., Any]:
    """The loss function registered as ``name``."""
    return get_spec(name).load()
