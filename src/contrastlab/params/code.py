"""Schema of the ``code`` section of ``params.yaml`` (code retrieval track; docs/sources.md).

Defaults are the offline CPU setting (about 30 installed distributions, a few thousand
functions, MiniLM teacher, a few epochs). ``presets/code-seed-scale.yaml`` holds the retrieval
notes' scale (Qwen2.5-Coder-3B layer 18, ~150 git repositories, batch 64 x 8 GPUs, 100 epochs,
patience 15); ``python stages/code_preset.py seed-scale`` switches to it (see docs/code.md).
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

#: Distributions the project's own install brings (pure Python), used as repositories offline.
DEFAULT_DISTRIBUTIONS: list[str] = [
    "requests", "click", "jinja2", "pyyaml", "tqdm", "networkx", "attrs", "packaging",
    "pluggy", "urllib3", "pyparsing", "python-dateutil", "tabulate", "prettytable", "tomlkit",
    "funcy", "configobj", "sqlparse", "itsdangerous", "flask", "mako", "markdown-it-py",
    "rich", "sortedcontainers", "cachetools", "pydot", "gitpython", "diskcache", "werkzeug",
    "omegaconf",
]

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


class RepoSource(BaseModel):
    """One repository: exactly one of ``dist`` (installed distribution), ``git`` (URL, with
    ``commit``) or ``path`` (local folder). ``name`` defaults to the distribution name, the
    URL's last component or the folder name."""

    model_config = ConfigDict(extra="forbid")

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
        if self.name:
            return self.name
        if self.dist:
            return self.dist
        if self.git:
            last = self.git.rstrip("/").rsplit("/", 1)[-1].rsplit(":", 1)[-1]
            return last[:-4] if last.endswith(".git") else last
        return self.path.rstrip("/").rsplit("/", 1)[-1]  # type: ignore[union-attr]


class ReposParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    sources: list[RepoSource] = Field(
        default_factory=lambda: [RepoSource(dist=d) for d in DEFAULT_DISTRIBUTIONS],
        min_length=1)


class ExtractParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    include_docstring: bool = Field(False, description="docstring goes with the signature")
    min_body_lines: int = Field(3, ge=1)
    max_body_lines: int = Field(40, ge=1)
    max_body_chars: int = Field(2500, ge=10)
    skip_tests: bool = Field(True, description="skip files under tests/ or named test_*.py")
    max_functions_per_repo: int = Field(80, ge=1, description="deterministic sample above this")
    seed: int = Field(42, ge=0, lt=2**63)

    @model_validator(mode="after")
    def _bounds(self) -> "ExtractParams":
        if self.min_body_lines > self.max_body_lines:
            raise ValueError("min_body_lines must be <= max_body_lines")
        return self


class SplitParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    train: float = Field(0.8, gt=0, lt=1)
    val: float = Field(0.1, gt=0, lt=1)
    test: float = Field(0.1, gt=0, lt=1)
    seed: int = Field(42, ge=0, lt=2**63)

    @model_validator(mode="after")
    def _sum(self) -> "SplitParams":
        if abs(self.train + self.val + self.test - 1.0) > 1e-6:
            raise ValueError("train + val + test must be 1")
        return self


class TeacherParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    model: str = Field("minilm", description="'minilm', a local folder or a hub id")
    layer: int | None = Field(4, ge=1, description="hidden-state index; null = last layer")
    max_sig_tokens: int = Field(32, ge=2)
    max_body_tokens: int = Field(96, ge=2)
    batch_size: int = Field(64, ge=1)
    shard_size: int = Field(1024, ge=1)
    device: str = "auto"


class ModelParams(BaseModel):
    """SigPredictor (retrieval experiment notes): Linear(H->d_model), n_layers encoder layers, mean pool, Linear(d_model->H).

    The notes' sizes are d_model 512, 8 heads, FFN 2048 (the seed-scale preset); the CPU
    default is 128 / 4 / 512 so that four variants train in minutes on 2 cores.
    """

    model_config = ConfigDict(extra="forbid")

    d_model: int = Field(128, ge=8)
    n_layers: int = Field(2, ge=1)
    n_heads: int = Field(4, ge=1)
    ffn: int = Field(512, ge=8)
    dropout: float = Field(0.1, ge=0, lt=1)

    @model_validator(mode="after")
    def _heads(self) -> "ModelParams":
        if self.d_model % self.n_heads:
            raise ValueError("d_model must be divisible by n_heads")
        return self


class TrainParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    epochs: int = Field(6, ge=1, le=100_000)
    batch_size: int = Field(64, ge=2, description="per process (per GPU)")
    nproc: int = Field(1, ge=1, le=1024, description="torchrun --nproc_per_node")
    lr: float = Field(1e-3, gt=0, le=1.0)
    weight_decay: float = Field(0.01, ge=0, le=1.0)
    warmup_epochs: float = Field(1.0, ge=0)
    patience: int = Field(3, ge=1, description="epochs without val Rank@10 gain before stopping")
    grad_clip: float = Field(1.0, ge=0, description="0 = off")
    init_temperature: float = Field(0.07, gt=0, le=10.0)
    hardneg_k: int = Field(4, ge=1)
    hardneg_refresh: int = Field(2, ge=1, description="epochs between hard-negative refreshes")
    seed: int = Field(42, ge=0, lt=2**63)
    device: str = "auto"
    threads: int = Field(1, ge=1, le=256, description="CPU threads per process (1: oversubscribed OpenMP spins)")


class VariantParams(BaseModel):
    """One variant: a registry loss whose ``needs`` is ``targets`` (contrastive, in-batch
    negatives) or ``regression`` (``names_for("code")``)."""

    model_config = ConfigDict(extra="forbid")

    loss: str

    @field_validator("loss")
    @classmethod
    def _registered(cls, v: str) -> str:
        from ..losses.registry import names_for

        ok = names_for("code")
        if v not in ok:
            raise ValueError(f"{v!r} is not a registered retrieval loss; known: {', '.join(ok)}")
        return v


class EvalParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    k_max: int = Field(100, ge=10, description="Rank@k curve for k = 1..k_max")
    device: str = "auto"


def _default_variants() -> dict[str, VariantParams]:
    return {v: VariantParams(loss=v) for v in ("smoothl1", "cosine", "infonce", "infonce_hardneg")}


class CodeParams(BaseModel):
    """``code:`` section. Unknown keys are rejected."""

    model_config = ConfigDict(extra="forbid")

    repos: ReposParams = ReposParams()
    extract: ExtractParams = ExtractParams()
    split: SplitParams = SplitParams()
    teacher: TeacherParams = TeacherParams()
    model: ModelParams = ModelParams()
    train: TrainParams = TrainParams()
    variants: dict[str, VariantParams] = Field(default_factory=_default_variants)
    evaluate: EvalParams = EvalParams()
