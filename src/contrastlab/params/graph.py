"""Schema of the ``graph`` section of ``params.yaml`` (graph self-supervised track, Cora).

Layout::

    graph:
      source: vendored            # vendored (offline, checksummed) | download (PyG's loader)
      threads: 1                  # torch CPU threads
      model: {hidden_dim, out_dim, proj_dim, activation}
      train: {epochs, batch_nodes, lr, weight_decay, feature_mask: [v1, v2], edge_drop: [v1, v2],
              feature_mask_mode}     # shared by tuning trials and final runs
      probe: {c_grid, normalize, notebook_steps, notebook_lr}
      tune: {trials, startup_trials, seed, storage, seeds}   # equal budget per variant
      final: {seeds, ablation_seeds, ablation_batch_nodes}   # final runs on the chosen config
      variants:                   # one DVC stage per key (tune_graph@<key>, train_graph@<key>)
        ntxent: {loss: ntxent, temperature: 0.4, search: {temperature: {...}, lr: {...}}}
        mixco: {loss: mixco, temperature: 0.4, alpha: 1.0, weight: 1.0, search: {...}}
        mochi: {loss: mochi, temperature: 0.4, n_hard: 256, s: 128, s_prime: 64, search: {...}}

A variant's ``search`` declares what its study tunes (see :class:`contrastlab.tuning.SearchDim`):
any loss keyword of the variant (``temperature``, ``alpha``, ``n_hard``...) and the shared
training knobs ``lr``, ``weight_decay``, ``feature_mask.0``/``.1``, ``edge_drop.0``/``.1``.
A variant may override ``lr``, ``weight_decay`` or ``epochs`` for itself only. Unknown keys
are rejected everywhere (``extra="forbid"``); ranges are checked.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ..tuning import SearchDim, TuneParams

Rate = Annotated[float, Field(ge=0.0, lt=1.0)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


Seed = Annotated[int, Field(ge=0, lt=2**63)]


def _distinct(v: list[int]) -> list[int]:
    if len(set(v)) != len(v):
        raise ValueError(f"seeds must be distinct, got {v}")
    return v


class GraphTune(TuneParams):
    """``graph.tune``: the equal search budget (trials per variant) and the training seeds of
    each trial (disjoint from the final seeds, so the final runs are not the tuned runs)."""

    seeds: list[Seed] = Field(default_factory=lambda: [100], min_length=1, max_length=100)

    @field_validator("seeds")
    @classmethod
    def _unique(cls, v: list[int]) -> list[int]:
        return _distinct(v)


class GraphFinal(_Strict):
    """``graph.final``: seeds of the final runs of each variant's chosen configuration, and
    the loss-batch ablation (the same choices with ``ablation_batch_nodes``)."""

    seeds: list[Seed] = Field(default_factory=lambda: list(range(10)), min_length=1,
                              max_length=1000)
    ablation_seeds: list[Seed] = Field(default_factory=lambda: [0, 1, 2], max_length=1000,
                                       description="[] turns the ablation off.")
    ablation_batch_nodes: Optional[int] = Field(
        None, ge=2, le=10_000_000, description="Loss batch of the ablation (null: all nodes).")

    @field_validator("seeds", "ablation_seeds")
    @classmethod
    def _unique(cls, v: list[int]) -> list[int]:
        return _distinct(v)


class GraphModel(_Strict):
    """GCN encoder (2 layers) and projection head sizes."""

    hidden_dim: int = Field(128, ge=1, le=8192)
    out_dim: int = Field(128, ge=1, le=8192)
    proj_dim: int = Field(128, ge=1, le=8192)
    activation: Literal["relu", "prelu", "elu"] = "prelu"


class GraphTrain(_Strict):
    """Optimiser and augmentations shared by the variants."""

    epochs: int = Field(100, ge=1, le=100_000, description="Adam steps (one per epoch).")
    batch_nodes: Optional[int] = Field(
        1024, ge=2, le=10_000_000,
        description="Nodes per loss batch (null: all nodes every step).")
    lr: float = Field(1e-3, gt=0.0, le=1.0)
    weight_decay: float = Field(1e-5, ge=0.0, le=1.0)
    feature_mask: tuple[Rate, Rate] = (0.3, 0.4)
    edge_drop: tuple[Rate, Rate] = (0.2, 0.4)
    feature_mask_mode: Literal["column", "element"] = "column"


class GraphProbe(_Strict):
    """Linear probes: logistic regression (C picked on validation) and the notebook's."""

    c_grid: list[Annotated[float, Field(gt=0.0)]] = Field(
        default_factory=lambda: [0.01, 0.1, 1.0, 10.0, 100.0], min_length=1)
    normalize: Literal["l2", "standard", "none"] = "standard"
    notebook_steps: int = Field(200, ge=1, le=100_000)
    notebook_lr: float = Field(0.01, gt=0.0, le=10.0)


#: Shared training knobs a variant's ``search`` may tune besides its loss keywords.
TRAIN_TUNABLE = ("lr", "weight_decay", "feature_mask.0", "feature_mask.1", "edge_drop.0",
                 "edge_drop.1")


class _VariantBase(_Strict):
    temperature: float = Field(0.4, gt=0.0, le=10.0)
    lr: Optional[float] = Field(None, gt=0.0, le=1.0, description="Overrides train.lr.")
    weight_decay: Optional[float] = Field(None, ge=0.0, le=1.0)
    search: dict[str, SearchDim] = Field(
        default_factory=dict, description="What tune_graph@<variant> searches (empty: nothing).")

    def loss_kwargs(self) -> dict:
        """Keyword arguments of the loss function."""
        skip = {"loss", "lr", "weight_decay", "search"}
        return {k: v for k, v in self.model_dump().items() if k not in skip}

    @model_validator(mode="after")
    def _search_keys(self):
        allowed = set(self.loss_kwargs()) | set(TRAIN_TUNABLE)
        bad = sorted(set(self.search) - allowed)
        if bad:
            raise ValueError(f"search: {', '.join(bad)} cannot be tuned here "
                             f"(tunable: {', '.join(sorted(allowed))})")
        return self


class NtxentVariant(_VariantBase):
    loss: Literal["ntxent"]


class MixcoVariant(_VariantBase):
    loss: Literal["mixco"]
    alpha: float = Field(1.0, gt=0.0, le=100.0, description="Beta(alpha, alpha) of lambda.")
    weight: float = Field(1.0, ge=0.0, le=100.0, description="Weight of the mix-up term.")


class MochiVariant(_VariantBase):
    loss: Literal["mochi"]
    n_hard: int = Field(256, ge=1, description="N: hardest negatives kept per anchor.")
    s: int = Field(128, ge=0, description="Synthetic negatives mixing two hard negatives.")
    s_prime: int = Field(64, ge=0, description="Synthetic negatives mixing the query in.")


GraphVariant = Annotated[Union[NtxentVariant, MixcoVariant, MochiVariant],
                         Field(discriminator="loss")]


def _default_variants() -> dict:
    return {
        "ntxent": NtxentVariant(loss="ntxent"),
        "mixco": MixcoVariant(loss="mixco"),
        "mochi": MochiVariant(loss="mochi"),
    }


class GraphParams(_Strict):
    """``graph:`` section. Unknown keys are rejected."""

    source: Literal["vendored", "download"] = "vendored"
    threads: int = Field(1, ge=1, le=256)
    model: GraphModel = GraphModel()
    train: GraphTrain = GraphTrain()
    probe: GraphProbe = GraphProbe()
    tune: GraphTune = GraphTune()
    final: GraphFinal = GraphFinal()
    variants: dict[str, GraphVariant] = Field(default_factory=_default_variants)

    @model_validator(mode="after")
    def _check(self) -> "GraphParams":
        for name in self.variants:
            if not re.fullmatch(r"[A-Za-z0-9_\-]+", name):
                raise ValueError(f"variant name {name!r}: use letters, digits, _ or -")
        for name, v in self.variants.items():
            if isinstance(v, MochiVariant):
                b = self.train.batch_nodes or 2708
                hi = v.search["n_hard"].high if "n_hard" in v.search else v.n_hard
                if max(v.n_hard, hi) > 2 * min(b, 2708) - 2:
                    raise ValueError(f"variants.{name}.n_hard (up to {max(v.n_hard, hi):g}) "
                                     f"exceeds the 2B-2 = {2 * min(b, 2708) - 2} negatives "
                                     "per anchor")
        return self
