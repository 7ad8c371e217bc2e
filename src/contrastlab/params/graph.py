"""Schema of the ``graph`` section of ``params.yaml`` (graph self-supervised track, Cora).

Layout::

    graph:
      source: vendored            # vendored (offline, checksummed) | download (PyG's loader)
      preset: fast                # which entry of `presets` the train stages use
      presets:                    # seeds / epochs / loss batch per preset
        fast: {seeds: [0, 1], epochs: 100, batch_nodes: 1024}
        full: {seeds: [0, 1, 2, 3, 4], epochs: 200, batch_nodes: 1024}
      threads: 1                  # torch CPU threads
      model: {hidden_dim, out_dim, proj_dim, activation}
      train: {lr, weight_decay, feature_mask: [v1, v2], edge_drop: [v1, v2], feature_mask_mode}
      probe: {c_grid, normalize, notebook_steps, notebook_lr}
      variants:                   # one DVC stage per key (train_graph@<key>, evaluate_graph@<key>)
        ntxent: {loss: ntxent, temperature: 0.4}
        mixco: {loss: mixco, temperature: 0.4, alpha: 1.0, weight: 1.0}
        mochi: {loss: mochi, temperature: 0.4, n_hard: 256, s: 128, s_prime: 64}

A variant may override ``lr``, ``weight_decay`` or ``epochs`` for itself only. Unknown keys
are rejected everywhere (``extra="forbid"``); ranges are checked.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

Rate = Annotated[float, Field(ge=0.0, lt=1.0)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class GraphPreset(_Strict):
    """Seeds, epochs and loss batch of one preset."""

    seeds: list[Annotated[int, Field(ge=0)]] = Field(default_factory=lambda: [0, 1], min_length=1)
    epochs: int = Field(100, ge=1, le=100_000)
    batch_nodes: Optional[int] = Field(
        1024, ge=2, description="Nodes per loss batch (null: all 2708 nodes every step).")

    @field_validator("seeds")
    @classmethod
    def _unique(cls, v: list[int]) -> list[int]:
        if len(set(v)) != len(v):
            raise ValueError(f"seeds must be distinct, got {v}")
        return v


class GraphModel(_Strict):
    """GCN encoder (2 layers) and projection head sizes."""

    hidden_dim: int = Field(128, ge=1, le=8192)
    out_dim: int = Field(128, ge=1, le=8192)
    proj_dim: int = Field(128, ge=1, le=8192)
    activation: Literal["relu", "prelu", "elu"] = "prelu"


class GraphTrain(_Strict):
    """Optimiser and augmentations shared by the variants."""

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


class _VariantBase(_Strict):
    temperature: float = Field(0.4, gt=0.0, le=10.0)
    lr: Optional[float] = Field(None, gt=0.0, le=1.0, description="Overrides train.lr.")
    weight_decay: Optional[float] = Field(None, ge=0.0, le=1.0)
    epochs: Optional[int] = Field(None, ge=1, le=100_000, description="Overrides the preset.")

    def loss_kwargs(self) -> dict:
        """Keyword arguments of the loss function."""
        skip = {"loss", "lr", "weight_decay", "epochs"}
        return {k: v for k, v in self.model_dump().items() if k not in skip}


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
    preset: str = "fast"
    presets: dict[str, GraphPreset] = Field(default_factory=lambda: {
        "fast": GraphPreset(), "full": GraphPreset(seeds=[0, 1, 2, 3, 4], epochs=200)})
    threads: int = Field(1, ge=1, le=256)
    model: GraphModel = GraphModel()
    train: GraphTrain = GraphTrain()
    probe: GraphProbe = GraphProbe()
    variants: dict[str, GraphVariant] = Field(default_factory=_default_variants)

    @model_validator(mode="after")
    def _check(self) -> "GraphParams":
        if self.preset not in self.presets:
            raise ValueError(f"preset {self.preset!r} is not one of presets: "
                             f"{', '.join(self.presets)}")
        for name in self.variants:
            if not re.fullmatch(r"[A-Za-z0-9_\-]+", name):
                raise ValueError(f"variant name {name!r}: use letters, digits, _ or -")
        for name, v in self.variants.items():
            if isinstance(v, MochiVariant):
                b = self.active_preset.batch_nodes or 2708
                if v.n_hard > 2 * min(b, 2708) - 2:
                    raise ValueError(f"variants.{name}.n_hard={v.n_hard} exceeds the "
                                     f"2B-2 = {2 * min(b, 2708) - 2} negatives per anchor")
        return self

    @property
    def active_preset(self) -> GraphPreset:
        return self.presets[self.preset]
