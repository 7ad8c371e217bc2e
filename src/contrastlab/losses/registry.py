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
import inspect
from dataclasses import dataclass, field
from typing import Any, Callable

from ..errors import UnknownNameError


#: Keyword arguments that are plumbing (reduction, distributed slices, randomness, test
#: hooks), not knobs a user sets in ``params.yaml``; :attr:`LossSpec.kwargs` leaves them out.
PLUMBING = frozenset({"reduction", "return_stats", "contrast_features", "contrast_labels",
                      "anchor_offset", "offset", "generator", "mixing", "contrast_mode",
                      "targets_with_grad", "eps"})

#: Which ``needs`` each track can train with (the params validators and the training code
#: accept exactly these; ``scripts/stage_deps.py`` reads the same from ``LOSS_NEEDS``).
TRACK_NEEDS: dict[str, tuple[str, ...]] = {
    "graph": ("views",),
    "code": ("targets", "regression"),
    "multilabel": ("multilabels",),
}


@dataclass(frozen=True)
class LossSpec:
    """A registry entry.

    Attributes:
        target: ``"module:function"``, imported on first use.
        needs: what the loss consumes besides embeddings (see the module docstring); the
            tracks accept the losses whose ``needs`` is in :data:`TRACK_NEEDS`.
        family: ``supervised`` | ``multilabel`` | ``retrieval`` | ``selfsup`` (documentation
            and report grouping).
        title: row label in the reports.
        defaults: keyword arguments bound when loading (e.g. ``{"mode": "sim_only"}``).
        stochastic: the loss draws random numbers and takes ``generator=`` (a
            ``torch.Generator``); training passes its generator so reruns are bitwise equal.
    """

    target: str
    needs: str
    family: str
    title: str
    defaults: dict[str, Any] = field(default_factory=dict)
    stochastic: bool = False

    @property
    def module(self) -> str:
        """Dotted module name of the loss function."""
        return self.target.partition(":")[0]

    def function(self) -> Callable[..., Any]:
        """The loss function itself (import on first use, nothing bound)."""
        mod, _, fn = self.target.partition(":")
        return getattr(importlib.import_module(mod), fn)

    def load(self) -> Callable[..., Any]:
        """Import and return the loss function (with ``defaults`` bound as keywords)."""
        f = self.function()
        return functools.partial(f, **self.defaults) if self.defaults else f

    @property
    def kwargs(self) -> dict[str, Any]:
        """The loss-specific knobs: keyword arguments of the function with a default value
        (``{name: default}``), without :data:`PLUMBING` and without ``defaults`` (bound).
        Imports the loss module. ``params.yaml`` may set exactly these per variant."""
        sig = inspect.signature(self.function())
        out = {}
        for name, p in sig.parameters.items():
            if p.kind not in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD) or p.default is p.empty:
                continue
            if name in PLUMBING or name in self.defaults:
                continue
            out[name] = p.default
        return out


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
    "mixco": LossSpec("contrastlab.losses.selfsup:mixco_loss", "views", "selfsup", "MixCo", stochastic=True),
    "mochi": LossSpec("contrastlab.losses.selfsup:mochi_loss", "views", "selfsup", "MoCHi", stochastic=True),
}


def names_for(track: str) -> list[str]:
    """Registry names a track can train with (``needs`` in ``TRACK_NEEDS[track]``), in
    registry order. Reads only this file (imports no loss module)."""
    if track not in TRACK_NEEDS:
        raise KeyError(f"unknown track {track!r}; known: {', '.join(TRACK_NEEDS)}")
    return [n for n, s in LOSSES.items() if s.needs in TRACK_NEEDS[track]]


def check_name(track: str, name: str, kind: str) -> str:
    """``name`` if it is a registry loss ``track`` can train with, else ``ValueError`` naming
    ``kind`` (e.g. "two-view loss") and the known names (used by the params validators)."""
    ok = names_for(track)
    if name not in ok:
        raise ValueError(f"{name!r} is not a registered {kind}; known: {', '.join(ok)}")
    return name


def title(name: str) -> str:
    """Report label of ``name`` (the registry title; the name itself if not registered)."""
    spec = LOSSES.get(name)
    return spec.title if spec is not None else name


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
