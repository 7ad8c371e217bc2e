"""Search spaces and the study's identity: :class:`SearchDim`, the ``<track>.tune`` params
(:class:`TuneParams`), the study name and sampler seed, the pruner, drawing and applying a
configuration, and checking the default (protocol: :mod:`contrastlab.tuning`)."""

from __future__ import annotations

import hashlib
import json
import math
import numbers
import warnings
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Mapping, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = ["Strict", "SearchDim", "StudyParams", "TuneParams", "SeedTrialTune", "TuneResult",
           "PROTOCOL", "PrunerName", "space_digest", "study_name", "sampler_seed", "make_pruner",
           "tune_kwargs", "suggest", "apply_choices", "distinct_seeds", "known_names"]

#: Version of the protocol in the module docstring; part of every study's name, so studies
#: run under an earlier protocol (one sampler seed for all variants, no default trial, pruned
#: trials outside the budget) are not continued under this one.
PROTOCOL = 2


PrunerName = Literal["hyperband", "successive_halving", "median", "none"]


class Strict(BaseModel):
    """A params model that rejects unknown keys (``extra="forbid"``)."""

    model_config = ConfigDict(extra="forbid")


class SearchDim(Strict):
    """One hyperparameter's search distribution.

    ``float``/``int``: ``low <= x <= high`` (``log``: log-uniform, needs ``low > 0``;
    ``step``: a grid, not with ``log``). ``categorical``: one of ``choices``.
    """

    type: Literal["float", "int", "categorical"]
    low: Optional[float] = None
    high: Optional[float] = None
    log: bool = False
    step: Optional[float] = Field(None, gt=0)
    choices: Optional[list[Any]] = None

    @model_validator(mode="after")
    def _check(self) -> "SearchDim":
        if self.type == "categorical":
            if not self.choices:
                raise ValueError("a categorical dimension needs a non-empty `choices` list")
            if self.low is not None or self.high is not None or self.log or self.step:
                raise ValueError("a categorical dimension takes only `choices`")
            return self
        if self.choices is not None:
            raise ValueError(f"a {self.type} dimension takes low/high, not `choices`")
        if self.low is None or self.high is None:
            raise ValueError(f"a {self.type} dimension needs `low` and `high`")
        if not (math.isfinite(self.low) and math.isfinite(self.high)) or self.low >= self.high:
            raise ValueError(f"need finite low < high (got {self.low}, {self.high})")
        if self.log and self.low <= 0:
            raise ValueError(f"log scale needs low > 0 (got {self.low})")
        if self.log and self.step:
            raise ValueError("`step` and `log` cannot be combined")
        if self.type == "int" and (self.low != int(self.low) or self.high != int(self.high)):
            raise ValueError(f"an int dimension needs integer bounds (got {self.low}, {self.high})")
        return self


class StudyParams(Strict):
    """The search budget, the pruner and where the studies live (protocol in the module
    docstring): the fields every ``<track>.tune`` shares (:class:`TuneParams`; the multi-label
    track's adds its folds)."""

    trials: int = Field(20, ge=1, le=10_000,
                        description="Finished (complete + pruned + failed) trials per variant: "
                        "the same for every loss.")
    startup_trials: int = Field(6, ge=1, le=10_000,
                                description="Random trials before TPE models the space.")
    seed: int = Field(0, ge=0, lt=2**32,
                      description="Base seed; each study's sampler seed is derived from it, the "
                      "track and the variant (sampler_seed).")
    storage: Optional[str] = Field(
        None, description="null: a journal file in the stage output; else an Optuna RDB URL.")
    pruner: PrunerName = Field(
        "hyperband", description="Optuna pruner of trials that report intermediate scores: "
        "HyperbandPruner (Li et al. 2018), SuccessiveHalvingPruner (Jamieson & Talwalkar 2016), "
        "MedianPruner, or none.")
    min_resource: int = Field(1, ge=1, description="Resource units (report steps) before a "
                              "trial can be pruned: hyperband/successive halving min_resource; "
                              "median: n_warmup_steps = min_resource - 1.")
    max_resource: Union[int, Literal["auto"]] = Field(
        "auto", description="Hyperband max_resource: the largest step a trial reports ('auto': "
        "the largest step of the first complete trial).")
    reduction_factor: int = Field(3, ge=2, description="Hyperband / successive halving eta: "
                                  "1/eta of the trials of a rung are promoted.")
    widen: int = Field(0, ge=0, le=10, description="Rounds of widening after the budget: a "
                       "log-scale bound the best trial lands near moves out by half the log "
                       "range and widen_trials more trials run (0: the declared space only).")
    widen_trials: int = Field(4, ge=1, le=10_000, description="Trials added per round of widening.")

    @model_validator(mode="after")
    def _check_resource(self) -> "StudyParams":
        if self.max_resource != "auto" and self.max_resource < self.min_resource:
            raise ValueError(f"max_resource {self.max_resource} < min_resource "
                             f"{self.min_resource}")
        return self


class TuneParams(StudyParams):
    """``<track>.tune``: :class:`StudyParams` and the selection rule (the same for every
    variant of a track)."""

    select: Literal["best_mean"] = Field(
        "best_mean", description="Winner: the COMPLETE trial with the best mean objective "
        "(lowest trial number on ties; pruned and failed trials are never chosen).")


def distinct_seeds(v: list[int]) -> list[int]:
    """``v`` itself; ``ValueError`` when a seed repeats (a list of training seeds)."""
    if len(set(v)) != len(v):
        raise ValueError(f"seeds must be distinct, got {v}")
    return v


def known_names(v: list[str], known, what: str) -> list[str]:
    """``v`` itself; ``ValueError`` naming the entries of ``v`` not in ``known`` (``what``:
    e.g. ``"variant(s)"``) and the known names."""
    bad = [x for x in v if x not in known]
    if bad:
        raise ValueError(f"unknown {what} {bad}; known: {', '.join(map(str, known))}")
    return v


class SeedTrialTune(TuneParams):
    """A ``<track>.tune`` whose trial trains one run per seed of ``seeds`` (distinct) and
    reports to the pruner after each (the code, graph and fine-tuning tracks)."""

    seeds: list[Annotated[int, Field(ge=0, lt=2**63)]] = Field(
        default_factory=lambda: [100, 101, 102], min_length=1, max_length=100,
        description="training seeds of every trial")
    max_resource: Union[int, Literal["auto"]] = 3  # one report per training seed

    @field_validator("seeds")
    @classmethod
    def _distinct(cls, v: list[int]) -> list[int]:
        return distinct_seeds(v)


@dataclass
class TuneResult:
    """What :func:`run_study` found: the best COMPLETE trial (``best_se``: its standard error
    when the objective returned one, else None) and the trial counts by state."""

    study_name: str
    best_params: dict[str, Any]
    best_value: float
    best_trial: int
    n_complete: int
    n_failed: int
    direction: str
    n_pruned: int = 0
    best_se: Optional[float] = None
    sampler_seed: Optional[int] = None
    widened: Optional[list] = None  # rounds of widening (run_study's ``widen``), else None

def space_digest(space: Mapping[str, SearchDim], fixed: Mapping[str, Any] | None = None) -> str:
    """A short hash of the search space, the fixed configuration and :data:`PROTOCOL`: a
    changed space, objective setting or protocol starts a new study instead of mixing trials
    of different problems."""
    blob = json.dumps({"space": {k: v.model_dump() for k, v in sorted(space.items())},
                       "fixed": fixed or {}, "protocol": PROTOCOL}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:10]

def study_name(track: str, variant: str, space: Mapping[str, SearchDim],
               fixed: Mapping[str, Any] | None = None) -> str:
    """``<track>-<variant>-<digest of space, fixed config and protocol>``."""
    return f"{track}-{variant}-{space_digest(space, fixed)}"

def sampler_seed(seed: int, track: str, variant: str) -> int:
    """The TPE seed of one study: the first 4 bytes (big-endian) of
    SHA-256(``"<seed>/<track>/<variant>"``), an int in ``[0, 2**32)``. Stable across Python
    processes and versions (unlike ``hash``), different for every variant.

    Raises:
        ValueError: ``seed`` negative.
    """
    if int(seed) < 0:
        raise ValueError(f"seed must be >= 0 (got {seed})")
    h = hashlib.sha256(f"{int(seed)}/{track}/{variant}".encode()).digest()
    return int.from_bytes(h[:4], "big")

def make_pruner(pruner: Any = "none", *, min_resource: int = 1,
                max_resource: int | str = "auto", reduction_factor: int = 3,
                startup_trials: int = 6):
    """The Optuna pruner named by ``pruner`` (an Optuna ``BasePruner`` is returned as is).

    ``hyperband``: ``HyperbandPruner(min_resource, max_resource, reduction_factor)`` (Li et
    al., JMLR 2018); ``successive_halving``: ``SuccessiveHalvingPruner(min_resource,
    reduction_factor)`` (Jamieson & Talwalkar 2016; asynchronous, Li et al. 2020);
    ``median``: ``MedianPruner(n_startup_trials=startup_trials, n_warmup_steps=min_resource -
    1)``; ``none``/None: ``NopPruner``.

    Raises:
        ValueError: an unknown name.
    """
    import optuna

    if isinstance(pruner, optuna.pruners.BasePruner):
        return pruner
    if pruner in (None, "none"):
        return optuna.pruners.NopPruner()
    rungs = {"min_resource": int(min_resource), "reduction_factor": int(reduction_factor)}
    if pruner == "hyperband":
        return optuna.pruners.HyperbandPruner(max_resource=max_resource, **rungs)
    if pruner == "successive_halving":
        return optuna.pruners.SuccessiveHalvingPruner(**rungs)
    if pruner == "median":
        return optuna.pruners.MedianPruner(n_startup_trials=int(startup_trials),
                                           n_warmup_steps=int(min_resource) - 1)
    raise ValueError(f"unknown pruner {pruner!r}: expected hyperband, successive_halving, "
                     "median or none")

def tune_kwargs(tune: Any) -> dict[str, Any]:
    """:func:`run_study` keyword arguments from a track's ``tune`` params (a :class:`TuneParams`
    or any object with ``trials``, ``seed``, ``storage`` and optionally ``startup_trials``,
    ``pruner``, ``min_resource``, ``max_resource``, ``reduction_factor``, ``widen``,
    ``widen_trials``): ``run_study(..., **tune_kwargs(p.graph.tune))``."""
    out = {"n_trials": tune.trials, "seed": tune.seed, "storage": tune.storage}
    for k in ("startup_trials", "pruner", "min_resource", "max_resource", "reduction_factor",
              "widen", "widen_trials"):
        if getattr(tune, k, None) is not None:
            out[k] = getattr(tune, k)
    return out

def suggest(trial, space: Mapping[str, SearchDim]) -> dict[str, Any]:
    """Draw one configuration from ``space`` with an Optuna ``trial`` (names kept as given)."""
    out: dict[str, Any] = {}
    for name, d in space.items():
        if d.type == "float":
            out[name] = trial.suggest_float(name, d.low, d.high, log=d.log, step=d.step)
        elif d.type == "int":
            out[name] = trial.suggest_int(name, int(d.low), int(d.high), log=d.log,
                                          step=int(d.step or 1))
        else:
            out[name] = trial.suggest_categorical(name, d.choices)
    return out

def apply_choices(config: Mapping[str, Any], choices: Mapping[str, Any]) -> dict[str, Any]:
    """``config`` with ``choices`` applied; ``"a.1"`` sets element 1 of the list ``config["a"]``
    (copied), ``"a.b"`` sets key ``b`` of the dict ``config["a"]``.

    Raises:
        KeyError: a dotted name whose head is not in ``config``.
    """
    out = {k: (list(v) if isinstance(v, (list, tuple)) else dict(v) if isinstance(v, dict) else v)
           for k, v in config.items()}
    for name, value in choices.items():
        head, _, tail = name.partition(".")
        if not tail:
            out[head] = value
        elif head not in out:
            raise KeyError(f"search dimension {name!r}: {head!r} is not a hyperparameter here")
        else:
            out[head][int(tail) if isinstance(out[head], list) else tail] = value
    return out

def _check_default(default: Mapping[str, Any], space: Mapping[str, SearchDim]) -> dict:
    unknown = sorted(set(default) - set(space))
    if unknown:
        raise ValueError(f"default: {unknown} are not in the search space {sorted(space)}")
    default = {k: (v.item() if hasattr(v, "item") and not isinstance(v, (str, bytes)) else v)
               for k, v in default.items()}  # numpy scalars -> Python numbers
    for k, v in default.items():
        d = space[k]
        if d.type == "categorical":
            if v not in d.choices:
                raise ValueError(f"default {k}={v!r} is not one of {d.choices}")
        elif not isinstance(v, numbers.Real) or isinstance(v, bool) or not math.isfinite(v):
            raise ValueError(f"default {k}={v!r}: expected a finite number")
        elif not d.low <= v <= d.high:
            warnings.warn(f"default {k}={v} lies outside the search range [{d.low}, {d.high}]; "
                          "it is evaluated as trial 0 all the same", stacklevel=3)
    return dict(default)
