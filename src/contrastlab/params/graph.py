"""Schema of the ``graph`` section of ``params.yaml`` (graph self-supervised track, Planetoid graphs).

Layout::

    graph:
      dataset: Cora               # Cora | CiteSeer | PubMed (Planetoid format, public split)
      raw_dir: null               # folder with SHA256SUMS + raw/; null: data/vendor/planetoid/<dataset>
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

A variant names a registry loss whose ``needs`` is ``views`` (``names_for("graph")``); its
other keys are the loss's keyword arguments (checked against the function's signature by
the ``validate_params`` stage). A variant may override ``lr``, ``weight_decay`` or
``epochs`` for itself only. Unknown keys are rejected everywhere else
(``extra="forbid"``); ranges are checked.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

Rate = Annotated[float, Field(ge=0.0, lt=1.0)]
#: Nodes of each public Planetoid graph (``contrastlab.data.planetoid.PUBLIC_STATS``).
NUM_NODES = {"Cora": 2708, "CiteSeer": 3327, "PubMed": 19717}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class GraphPreset(_Strict):
    """Seeds, epochs and loss batch of one preset."""

    seeds: list[Annotated[int, Field(ge=0, lt=2**63)]] = Field(default_factory=lambda: [0, 1], min_length=1)
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
        default_factory=lambda: [0.01, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0, 30.0, 100.0], min_length=1)
    normalize: Literal["l2", "standard", "none"] = "standard"
    notebook_steps: int = Field(200, ge=1, le=100_000)
    notebook_lr: float = Field(0.01, gt=0.0, le=10.0)


#: A loss-specific knob's value in ``params.yaml`` (checked against the loss's signature by
#: :func:`contrastlab.params.losses.check_loss_keywords`).
KnobValue = Union[bool, int, float, str]
_KNOB_ABS_MAX = 1e9


class GraphVariant(BaseModel):
    """One variant: a registry loss with ``needs: views``, its temperature, optional
    per-variant optimiser overrides, and the loss's own keyword arguments as extra keys
    (e.g. MixCo's ``alpha``/``weight``, MoCHi's ``n_hard``/``s``/``s_prime``): any keyword
    argument of the loss function (see :attr:`contrastlab.losses.LossSpec.kwargs`)."""

    model_config = ConfigDict(extra="allow")

    loss: str
    temperature: float = Field(0.4, gt=0.0, le=10.0)
    lr: Optional[float] = Field(None, gt=0.0, le=1.0, description="Overrides train.lr.")
    weight_decay: Optional[float] = Field(None, ge=0.0, le=1.0)
    epochs: Optional[int] = Field(None, ge=1, le=100_000, description="Overrides the preset.")

    @field_validator("loss")
    @classmethod
    def _registered(cls, v: str) -> str:
        from ..losses.registry import names_for

        ok = names_for("graph")
        if v not in ok:
            raise ValueError(f"{v!r} is not a registered two-view loss; known: {', '.join(ok)}")
        return v

    @model_validator(mode="after")
    def _knobs(self) -> "GraphVariant":
        for k, v in (self.model_extra or {}).items():
            if not isinstance(v, (bool, int, float, str)):
                raise ValueError(f"{k}: a loss keyword must be a number, a string or a "
                                 f"boolean, got {type(v).__name__}")
            if isinstance(v, (int, float)) and not isinstance(v, bool) and not (
                    abs(v) <= _KNOB_ABS_MAX):
                raise ValueError(f"{k}={v!r}: must be finite and at most {_KNOB_ABS_MAX:g} "
                                 f"in absolute value")
        return self

    def loss_kwargs(self) -> dict:
        """Keyword arguments of the loss function (temperature and the extra keys)."""
        return {"temperature": self.temperature, **(self.model_extra or {})}


def _default_variants() -> dict:
    return {
        "ntxent": GraphVariant(loss="ntxent"),
        "mixco": GraphVariant(loss="mixco", alpha=1.0, weight=1.0),
        "mochi": GraphVariant(loss="mochi", n_hard=256, s=128, s_prime=64),
    }


class GraphParams(_Strict):
    """``graph:`` section. Unknown keys are rejected."""

    dataset: Literal["Cora", "CiteSeer", "PubMed"] = Field(
        "Cora", description="Planetoid citation graph (public split), by name.")
    raw_dir: Optional[str] = Field(
        None, description="Folder with SHA256SUMS and raw/ind.<name>.* (repo-relative or "
        "absolute); null: data/vendor/planetoid/<dataset>.")
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
            n_hard = (v.model_extra or {}).get("n_hard")
            if isinstance(n_hard, int):  # MoCHi: hardest negatives kept per anchor
                n = NUM_NODES[self.dataset]
                b = self.active_preset.batch_nodes or n
                if n_hard > 2 * min(b, n) - 2:
                    raise ValueError(f"variants.{name}.n_hard={n_hard} exceeds the "
                                     f"2B-2 = {2 * min(b, n) - 2} negatives per anchor")
        return self

    @property
    def raw_folder(self) -> str:
        """``raw_dir`` or the vendored folder of ``dataset``."""
        return self.raw_dir or f"data/vendor/planetoid/{self.dataset}"

    @property
    def active_preset(self) -> GraphPreset:
        return self.presets[self.preset]
