"""Schema of the ``graph`` section of ``params.yaml`` (graph self-supervised track, Planetoid graphs).

A variant names a registry loss whose ``needs`` is ``views`` (``names_for("graph")``); its
other keys are the loss's keyword arguments (``temperature``, ``alpha``, ``n_hard``...,
checked against the function's signature by the ``validate_params`` stage). A variant's
``search`` declares what its study tunes (see :class:`contrastlab.tuning.SearchDim`): any
loss keyword of the variant and the shared training knobs ``lr``, ``weight_decay``,
``feature_mask.0``/``.1``, ``edge_drop.0``/``.1``. A variant may override ``lr`` or
``weight_decay`` for itself only. Unknown keys are rejected everywhere else
(``extra="forbid"``); ranges are checked. What a variant inherits (its ``loss``, its
``search`` over ``graph.tune.search``) is resolved on load (:mod:`contrastlab.params`).
"""

from __future__ import annotations

import re
from typing import Annotated, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ..losses.registry import resolve_variant
from ..tuning import SearchDim, SeedTrialTune, Strict, distinct_seeds

Rate = Annotated[float, Field(ge=0.0, lt=1.0)]
#: Nodes of each public Planetoid graph (``contrastlab.data.planetoid.PUBLIC_STATS``).
NUM_NODES = {"Cora": 2708, "CiteSeer": 3327, "PubMed": 19717}
Seed = Annotated[int, Field(ge=0, lt=2**63)]


#: The shipped ``graph.tune.search``: the space every variant shares (name -> SearchDim fields).
DEFAULT_SEARCH: dict[str, dict] = {
    "temperature": {"type": "float", "low": 0.05, "high": 1.0, "log": True},
    "lr": {"type": "float", "low": 1e-4, "high": 1e-2, "log": True},
    **{k: {"type": "float", "low": 0.0, "high": 0.6}
       for k in ("feature_mask.0", "feature_mask.1", "edge_drop.0", "edge_drop.1")},
}


class GraphTune(SeedTrialTune):
    """``graph.tune``: the equal search budget (trials per variant) and the training seeds of
    each trial (disjoint from the final seeds, so the final runs are not the tuned runs)."""

    trials: int = Field(30, ge=1, le=10_000,
                        description="Finished trials per variant: the same for every loss.")
    startup_trials: int = Field(4, ge=1, le=10_000,
                                description="Random trials before TPE models the space.")
    search: dict[str, SearchDim] = Field(
        default_factory=lambda: {k: SearchDim(**v) for k, v in DEFAULT_SEARCH.items()},
        description="The default search space of every variant: a variant without search "
        "inherits it; a variant's own search is merged per key over it (GraphParams resolves "
        "it into variants.<name>.search).")
    probe_criterion: Literal["accuracy", "log_loss"] = Field(
        "log_loss", description="How the trials' linear probe picks C on the validation "
        "nodes (as probe.criterion of the final runs): log_loss, smooth in the nodes; "
        "accuracy names the studies run before this setting existed (their journals resume).")


class GraphFinal(Strict):
    """``graph.final``: seeds of the final runs of each variant's chosen configuration, and
    the loss-batch ablation (the same choices with ``ablation_batch_nodes``)."""

    seeds: list[Seed] = Field(default_factory=lambda: list(range(10)), min_length=1,
                              max_length=1000)
    ablation_seeds: list[Seed] = Field(default_factory=lambda: [0, 1, 2], max_length=1000,
                                       description="[] turns the ablation off.")
    default_seeds: list[Seed] = Field(
        default_factory=lambda: list(range(10)), max_length=1000,
        description="Seeds of the untuned (default) configuration's runs (default_graph); "
        "[] turns them off.")
    ablation_batch_nodes: Optional[int] = Field(
        None, ge=2, le=10_000_000, description="Loss batch of the ablation (null: all nodes).")

    _unique = field_validator("seeds", "ablation_seeds", "default_seeds")(distinct_seeds)


class GraphModel(Strict):
    """GCN encoder (2 layers) and projection head sizes."""

    hidden_dim: int = Field(128, ge=1, le=8192)
    out_dim: int = Field(128, ge=1, le=8192)
    proj_dim: int = Field(128, ge=1, le=8192)
    activation: Literal["relu", "prelu", "elu"] = "prelu"


class GraphTrain(Strict):
    """Optimiser and augmentations shared by the variants."""

    epochs: int = Field(50, ge=1, le=100_000, description="Adam steps (one per epoch).")
    batch_nodes: Optional[int] = Field(
        1024, ge=2, le=10_000_000,
        description="Nodes per loss batch (null: all nodes every step).")
    lr: float = Field(1e-3, gt=0.0, le=1.0)
    weight_decay: float = Field(1e-5, ge=0.0, le=1.0)
    feature_mask: tuple[Rate, Rate] = (0.3, 0.4)
    edge_drop: tuple[Rate, Rate] = (0.2, 0.4)
    feature_mask_mode: Literal["column", "element"] = "column"


class GraphProbe(Strict):
    """Linear probes: logistic regression (C picked on validation) and the notebook's."""

    c_grid: list[Annotated[float, Field(gt=0.0)]] = Field(
        default_factory=lambda: [1e-4, 3.16228e-4, 1e-3, 3.16228e-3, 0.01, 0.0316228, 0.1,
                                 0.316228, 1.0, 3.16228, 10.0, 31.6228, 100.0, 316.228, 1000.0],
        min_length=1, description="Candidate C (log grid 1e-4..1e3); the choice must be "
        "interior (see edge).")
    normalize: Literal["l2", "standard", "row", "none"] = "standard"
    criterion: Literal["log_loss", "accuracy"] = Field(
        "log_loss", description="C's validation criterion in the final runs and baselines: "
        "log_loss (mean cross-entropy of the validation nodes, smooth) or accuracy (a count).")
    edge: Literal["extend", "raise"] = Field(
        "extend", description="A C chosen at the grid's end: extend the grid (up to "
        "max_extend values) or stop with an error; still at the end after extending: error.")
    max_extend: int = Field(4, ge=0, le=100)
    notebook_steps: int = Field(200, ge=1, le=100_000)
    notebook_lr: float = Field(0.01, gt=0.0, le=10.0)


class GraphBaselines(Strict):
    """``graph.baselines``: the probe-only baselines' validation choices. SGC (Wu et al.,
    ICML 2019, Eq. 8): ``S^K X`` with ``K`` in ``sgc_k``; raw features and SGC are
    row-normalised (Kipf & Welling 2017, Sec. 5.1) and the probe's ``normalize`` is chosen
    among ``normalize`` on the validation nodes (with ``C``)."""

    sgc_k: list[Annotated[int, Field(ge=0, le=64)]] = Field(
        default_factory=lambda: [1, 2, 3, 4], min_length=1)
    normalize: list[Literal["l2", "standard", "row", "none"]] = Field(
        default_factory=lambda: ["none", "standard"], min_length=1)


class GraphSupervised(Strict):
    """``graph.supervised.<name>``: a supervised reference row (issue 37), a GNN trained end
    to end on the public split's training labels (:mod:`contrastlab.training.graph_supervised`),
    tuned like the losses (``graph.tune``) and run on ``graph.final.seeds``. ``arch``: ``gcn``
    (Kipf & Welling, ICLR 2017) or ``gat`` (Velickovic et al., ICLR 2018); the declared
    values are the papers' Cora settings (Sec. 5.2 / 3.3). ``arch: pretrained`` (the rows of
    ``graph.finetune``, which share this schema): the
    self-supervised GCN encoder (``graph.model`` sizes) pre-trained with the tuned choices of
    the variant ``pretrain`` (``reports/tuned/graph/<pretrain>.json``), then fine-tuned with a
    linear head on the same labels (its ``hidden`` and ``heads`` are unused). ``search`` may
    tune ``hidden``, ``heads``, ``dropout``, ``lr`` and ``weight_decay``."""

    arch: Literal["gcn", "gat", "pretrained"]  # not a row name: the GNN architecture
    pretrain: str | None = Field(
        None, description="arch pretrained: the graph variant whose tuned choices pre-train the encoder.")
    hidden: int = Field(16, ge=1, le=4096, description="Hidden features (per head for GAT).")
    heads: int = Field(1, ge=1, le=64, description="Attention heads of the first layer (GAT).")
    out_heads: int = Field(1, ge=1, le=64, description="Heads of the output layer, averaged (GAT).")
    dropout: Rate = 0.5
    lr: float = Field(0.01, gt=0.0, le=1.0)
    weight_decay: float = Field(5e-4, ge=0.0, le=1.0)
    weight_decay_layers: Literal["first", "every"] = Field(
        "first", description="L2 on the first layer only (Kipf & Welling) or on every layer (GAT; `every`).")
    epochs: int = Field(200, ge=1, le=100_000,
                        description="Full-batch Adam steps; the epoch is chosen on validation.")
    search: dict[str, SearchDim] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _searchable(self) -> "GraphSupervised":
        bad = sorted(set(self.search) - set(SUPERVISED_TUNABLE))
        if bad:
            raise ValueError(f"search: {', '.join(bad)} cannot be tuned here "
                             f"(tunable: {', '.join(SUPERVISED_TUNABLE)})")
        if self.arch == "gcn" and {"heads", "out_heads"} & set(self.search):  # not a row name
            raise ValueError("search: a GCN has no attention heads")
        if (self.arch == "pretrained") != (self.pretrain is not None):
            raise ValueError("pretrain names the pre-training variant of arch pretrained, and only of it")
        if self.arch == "pretrained" and {"hidden", "heads", "out_heads"} & set(self.search):
            raise ValueError("search: a pre-trained encoder's sizes are graph.model's, not searched")
        return self


#: What a supervised reference's ``search`` may tune.
SUPERVISED_TUNABLE = ("hidden", "heads", "dropout", "lr", "weight_decay")
#: Shared training knobs a variant's ``search`` may tune besides its loss keywords.
TRAIN_TUNABLE = ("lr", "weight_decay", "feature_mask.0", "feature_mask.1", "edge_drop.0",
                 "edge_drop.1")
#: Largest absolute value of a loss keyword given in params.yaml.
_KNOB_ABS_MAX = 1e9


class GraphVariant(BaseModel):
    """One variant: a registry loss with ``needs: views``, its temperature, optional
    per-variant optimiser overrides, what its study searches, and the loss's own keyword
    arguments as extra keys (e.g. MixCo's ``alpha``/``weight``, MoCHi's
    ``n_hard``/``s``/``s_prime``): any keyword argument of the loss function (see
    :attr:`contrastlab.losses.LossSpec.kwargs`; checked by
    :func:`contrastlab.params.losses.check_loss_keywords`)."""

    model_config = ConfigDict(extra="allow")

    loss: Optional[str] = Field(None, description="Registry loss; resolved on load to the "
                                "variant table's (default: the variant's name).")
    temperature: float = Field(0.4, gt=0.0, le=10.0)
    lr: Optional[float] = Field(None, gt=0.0, le=1.0, description="Overrides train.lr.")
    weight_decay: Optional[float] = Field(None, ge=0.0, le=1.0)
    # what tune_graph@<variant> searches, merged per key over graph.tune.search on load
    search: Optional[dict[str, Optional[SearchDim]]] = {}

    @field_validator("loss")
    @classmethod
    def _registered(cls, v: str) -> str:
        from ..losses.registry import check_name

        return check_name("graph", v, "two-view loss")

    @model_validator(mode="after")
    def _knobs(self) -> "GraphVariant":
        for k, v in (self.model_extra or {}).items():
            if not isinstance(v, (bool, int, float, str)):
                raise ValueError(f"{k}: a loss keyword must be a number, a string or a "
                                 f"boolean, got {type(v).__name__}")
            if isinstance(v, (int, float)) and not abs(v) <= _KNOB_ABS_MAX:  # bools pass
                raise ValueError(f"{k}={v!r}: must be finite and at most {_KNOB_ABS_MAX:g} "
                                 f"in absolute value")
        return self

    def check_search(self) -> None:
        """``ValueError`` for a searched name that is neither a loss keyword of the variant
        nor a shared training knob (run on the resolved, inherited space)."""
        allowed = set(self.loss_kwargs()) | set(TRAIN_TUNABLE)
        bad = sorted(set(self.search or {}) - allowed)
        if bad:  # a searched loss keyword needs its value in the variant (the default choice)
            raise ValueError(f"search: {', '.join(bad)} cannot be tuned here "
                             f"(tunable: {', '.join(sorted(allowed))})")

    def loss_kwargs(self) -> dict:
        """Keyword arguments of the loss function (temperature and the extra keys)."""
        return {"temperature": self.temperature, **(self.model_extra or {})}


class GraphParams(Strict):
    """``graph:`` section. Unknown keys are rejected."""

    dataset: Literal["Cora", "CiteSeer", "PubMed"] = Field(
        "Cora", description="Planetoid citation graph (public split), by name.")
    raw_dir: Optional[str] = Field(
        None, description="Folder with SHA256SUMS and raw/ind.<name>.* (repo-relative or "
        "absolute); null: data/vendor/planetoid/<dataset>.")
    source: Literal["vendored", "download"] = "vendored"
    threads: int = Field(1, ge=1, le=256)
    model: GraphModel = GraphModel()
    train: GraphTrain = GraphTrain()
    probe: GraphProbe = GraphProbe()
    tune: GraphTune = GraphTune()
    final: GraphFinal = GraphFinal()
    baselines: GraphBaselines = GraphBaselines()
    # the rows, written in params.yaml only (no per-row defaults; {} turns a kind off):
    variants: dict[str, GraphVariant] = {}
    supervised: dict[str, GraphSupervised] = {}  # tune_graph_supervised / train_graph_supervised
    finetune: dict[str, GraphSupervised] = {}  # arch pretrained: a variant's encoder, fine-tuned

    @model_validator(mode="after")
    def _check(self) -> "GraphParams":
        for name in [*self.variants, *self.supervised, *self.finetune]:
            if not re.fullmatch(r"[A-Za-z0-9_\-]+", name):
                raise ValueError(f"variant name {name!r}: use letters, digits, _ or -")
        for name, v in self.variants.items():
            resolve_variant("graph", name, v, self.tune.search, "two-view loss")
            try:
                v.check_search()
            except ValueError as e:
                raise ValueError(f"variants.{name}.{e}") from None
        both = sorted((set(self.variants) & set(self.supervised)) | (set(self.finetune) & (
            set(self.variants) | set(self.supervised))))
        if both:  # one name, one row of the report
            raise ValueError(f"{', '.join(both)}: both a variant and a supervised reference "
                             "or fine-tuning row")
        for name, r in self.supervised.items():
            if r.arch == "pretrained":
                raise ValueError(f"supervised.{name}: arch pretrained belongs under graph.finetune")
        for name, r in self.finetune.items():
            if r.arch != "pretrained":
                raise ValueError(f"finetune.{name}: arch must be pretrained (a GCN / GAT goes under "
                                 "graph.supervised)")
            if r.pretrain not in self.variants:
                raise ValueError(f"finetune.{name}.pretrain: {r.pretrain!r} is not a graph variant "
                                 f"(known: {', '.join(self.variants)})")
        for name, v in self.variants.items():
            n_hard = (v.model_extra or {}).get("n_hard")
            if isinstance(n_hard, int) or "n_hard" in v.search:  # MoCHi's hardest negatives
                n = NUM_NODES[self.dataset]
                most = 2 * min(self.train.batch_nodes or n, n) - 2
                hi = v.search["n_hard"].high if "n_hard" in v.search else None
                top = max(x for x in (n_hard, hi) if x is not None)
                if top > most:
                    raise ValueError(f"variants.{name}.n_hard (up to {top:g}) exceeds the "
                                     f"2B-2 = {most} negatives per anchor")
        return self

    @property
    def raw_folder(self) -> str:
        """``raw_dir`` or the vendored folder of ``dataset``."""
        return self.raw_dir or f"data/vendor/planetoid/{self.dataset}"
