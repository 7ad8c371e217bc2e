"""Schema of the ``finetune`` section of ``params.yaml``: fine-tuning a ``transformers``
encoder on HumanEval problem x correctness-tier variants with the multi-label contrastive
losses (MulSupCon, Zhang & Wu, AAAI 2024; ALL / ANY and Sim-Dis, the Sim-Dis paper Eq. 1-2,
13) or BCE.

Stages: ``finetune_data`` -> ``finetune.data`` (+ the sandbox limits of
``multilabel.humaneval``); ``finetune_cache`` -> ``finetune.model``, ``max_length``,
``strip_docstrings``, ``layers``; ``tune_finetune@<row>`` -> everything but ``eval``;
``finetune_encoder@<variant>`` -> everything but ``eval`` (and the row's tuned choices);
``finetune_evaluate`` -> ``eval``, ``seeds``, ``variants``.
"""

from __future__ import annotations

from typing import Annotated, Literal, Union

from pydantic import Field, computed_field, field_validator, model_validator

from ..losses.registry import reject_roles, role, track_variants
from ..tuning.space import SearchDim, SeedTrialTune, Strict, distinct_seeds, known_names

_ROWS = track_variants("finetune")  # the variant table's fine-tuning rows, in file order
#: Rows of the track that are not fine-tuning variants (stage ``finetune_baseline``): the
#: variant table's fine-tuning rows fitted by a ``method`` of their own (``frozen_encoder``,
#: ``frozen_head``, ``lexical``), not by the fine-tuning loop.
REFERENCE_ROWS = tuple(n for n, v in _ROWS.items() if v.method)
#: Row -> its declared ``method`` (``""`` for a row trained by the fine-tuning loop).
ROW_METHOD: dict[str, str] = {n: v.method for n, v in _ROWS.items()}
#: Rows with the same output for every seed (run on the first seed only).
DETERMINISTIC_ROWS = tuple(n for n, v in _ROWS.items() if v.deterministic)
#: Rows with no training and nothing to tune (``tuned: false``).
UNTRAINED_ROWS = tuple(n for n, v in _ROWS.items() if not v.tuned)
#: The loss that trains the ``head`` baseline's head (frozen encoder, layers 0).
HEAD_LOSS = role("finetune", "head_loss")
#: Variant name -> (registry loss or ``None`` for the BCE baseline, its keyword arguments),
#: from the variant table (``contrastlab/losses/variants.yaml``); ``simdis`` uses the
#: ``log_prob`` weighting, as ``multilabel.variants.simdis`` does.
FINETUNE_VARIANTS: dict[str, tuple[str | None, dict]] = {
    n: (v.loss, dict(v.kwargs)) for n, v in _ROWS.items() if n not in REFERENCE_ROWS}


class FinetuneData(Strict):
    """``finetune.data``: the variants (tiers from :mod:`contrastlab.data.humaneval`) and
    the two evaluation splits."""

    max_problems: int = Field(0, ge=0, description="First N HumanEval problems (0 = all 164).")
    test_problem_fraction: float = Field(0.3, gt=0, lt=1, description=(
        "Split (b): this fraction of the problems (all their variants) is held out."))
    test_fraction: float = Field(0.3, ge=0, lt=1, description=(
        "Split (a): per (problem, tier) cell of the other problems, this fraction of the "
        "variants is held out (cells of one variant stay in training)."))
    val_fraction: float = Field(0.15, ge=0, lt=1, description=(
        "Validation: per cell, this fraction of what is left (for early stopping and tuning)."))
    seed: int = 0


class FinetuneEval(Strict):
    """``finetune.eval``: metrics and bootstrap."""

    knn_k: list[int] = Field(default_factory=lambda: [1, 5], description="k of kNN@k purity.")
    rank_k: list[int] = Field(default_factory=lambda: [1, 5, 10], description="k of Rank@k.")
    n_resamples: int = Field(1000, ge=10)
    probe_c: float = Field(1.0, gt=0, description="Inverse L2 strength of the tier probe.")
    tfidf_max_features: int = Field(20000, ge=10)


#: Hyperparameters a study may set (fields of :class:`FinetuneParams`).
TUNABLE = ("temperature", "lr_encoder", "lr_head", "weight_decay", "warmup")


class FinetuneTune(SeedTrialTune):
    """``finetune.tune``: the shared protocol (:mod:`contrastlab.tuning`; Musgrave et al.
    2020): every trained row (the losses, BCE and the frozen + head baseline) gets ``trials``
    finished trials of the same ``search`` space (minus what the row does not use: BCE has no
    temperature, the head baseline no encoder learning rate); trial 0 is the row's declared
    configuration; a trial trains one run per seed of ``seeds`` (disjoint from
    ``finetune.seeds``) and scores the mean best validation retrieval mAP (the
    early-stopping criterion), reported to the pruner after each seed."""

    trials: int = Field(8, ge=1, le=10_000, description=(
        "Finished trials per row: the same for every loss (8 on the CPU default: a 3-seed "
        "trial costs ~4.3 CPU-minutes; the other tracks' 20 fit a GPU)."))
    startup_trials: int = Field(4, ge=1, le=10_000,
                                description="Random trials before TPE models the space.")
    search: dict[str, SearchDim] = Field(default_factory=lambda: {
        "temperature": SearchDim(type="float", low=0.03, high=1.0, log=True),
        "lr_encoder": SearchDim(type="float", low=3e-5, high=3e-3, log=True),
        "lr_head": SearchDim(type="float", low=1e-4, high=1e-2, log=True)},
        description=f"Search space over {', '.join(TUNABLE)}.")

    @field_validator("search")
    @classmethod
    def _tunable(cls, v: dict[str, SearchDim]) -> dict[str, SearchDim]:
        bad = sorted(set(v) - set(TUNABLE))
        if bad:
            raise ValueError(f"finetune.tune.search: {bad} cannot be tuned; tunable: {', '.join(TUNABLE)}")
        return v


class FinetuneParams(Strict):
    """``finetune:`` section. Unknown keys are rejected."""

    model: str = Field("minilm", description=(
        "Encoder: 'minilm' (packaged all-MiniLM-L6-v2) or a local AutoModel folder."))
    max_length: int = Field(256, ge=8, le=4096, description="Tokens kept per program.")
    strip_docstrings: bool = Field(True, description=(
        "Drop docstrings before tokenising: the mutation sits in the body, which a long "
        "docstring would push past max_length."))
    layers: Annotated[int, Field(ge=0)] | Literal["all"] = Field(1, description=(  # not a loss name
        "Transformer layers trained: 0 = frozen states + head; k = top k (the states below "
        "are computed once and cached); 'all'."))
    pooling: Literal["mean", "cls"] = "mean"
    proj_dim: int = Field(128, ge=0, description="Projection head output (0 = no head).")
    proj_hidden: int = Field(384, ge=1, description="Hidden width of the two-layer head.")
    lr_encoder: float = Field(3e-4, gt=0)
    lr_head: float = Field(1e-3, gt=0)
    weight_decay: float = Field(0.01, ge=0)
    temperature: float = Field(0.1, gt=0)
    batch_problems: int = Field(16, ge=2, description="Problems per batch (P of P x M sampling).")
    batch_per_problem: int = Field(4, ge=1, description="Variants per problem per batch (M).")
    grad_accum: int = Field(1, ge=1, description="Micro-batches per optimiser step.")
    steps: int = Field(60, ge=1, description="Optimiser steps.")
    warmup: float = Field(0.1, ge=0, lt=1)
    eval_every: int = Field(20, ge=1, description="Validation mAP every N steps "
                                                  "(the best checkpoint is kept).")
    bf16: Literal["auto", "on", "off"] = Field("auto", description=(
        "bf16 autocast: auto = on CUDA with bf16 support, never on CPU."))
    device: str = "cpu"
    nproc: Union[Annotated[int, Field(ge=1, le=1024)], Literal["auto"]] = Field(1, description=(
        "finetune_encoder's processes: > 1 (or auto = one per visible CUDA device) re-launches "
        "the stage under torchrun (stages/finetune_encoder.py); not part of a study's identity."))
    batch_size_encode: int = Field(64, ge=1)
    sub_batch: int = Field(8, ge=1, description=(
        "Rows per padded forward pass (rows sorted by length; small on a CPU, large on a GPU)."))
    seeds: list[int] = Field(default_factory=lambda: [0, 1, 2], min_length=1)
    variants: list[str] = Field(default_factory=lambda: list(FINETUNE_VARIANTS))
    data: FinetuneData = FinetuneData()
    eval: FinetuneEval = FinetuneEval()
    tune: FinetuneTune = FinetuneTune()

    # in model_dump (params_hash, MLflow params) as when it was a params.yaml key
    @computed_field  # type: ignore[prop-decorator]
    @property
    def index_variant(self) -> str:
        """The variant whose first seed's encoder and embeddings make the FAISS index: the
        role ``index_variant`` of the variant table (``src/contrastlab/losses/variants.yaml``,
        ``roles:``), written there only; a params file that sets ``finetune.index_variant``
        is an error."""
        return role("finetune", "index_variant")

    @model_validator(mode="before")
    @classmethod
    def _roles_not_here(cls, data):
        return reject_roles("finetune", data)

    @field_validator("variants")
    @classmethod
    def _known(cls, v: list[str]) -> list[str]:
        known_names(v, FINETUNE_VARIANTS, "variant(s)")
        if len(set(v)) != len(v):
            raise ValueError("variants repeat a name")
        return v

    @model_validator(mode="after")
    def _seeds(self):
        distinct_seeds(self.seeds)
        if set(self.seeds) & set(self.tune.seeds):
            raise ValueError(f"tune.seeds {self.tune.seeds} overlap the final seeds {self.seeds}")
        if self.index_variant not in self.variants:
            raise ValueError(f"index_variant {self.index_variant!r} (the role of src/contrastlab/"
                             f"losses/variants.yaml, roles:) is not in variants {self.variants}")
        return self
