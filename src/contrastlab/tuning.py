"""Equal-budget hyperparameter tuning on validation data.

Protocol (one study per track and variant; every variant of a track gets the same settings)

1. **Equal budget, validation only** (Musgrave, Belongie & Lim, ECCV 2020, Sec. 4): every
   loss gets the same number of finished trials (``<track>.tune.trials``), each scored on the
   validation split only; the test split is read once, by the final runs.
2. **Sampler**: TPE (Bergstra, Bardenet, Bengio & Kegl, NeurIPS 2011, Sec. 4) in Optuna
   (Akiba, Sano, Yanase, Ohta & Koyama, KDD 2019), ``startup_trials`` random draws first. Its
   seed is *derived per study*: :func:`sampler_seed` = the first 4 bytes of
   SHA-256(``"<tune.seed>/<track>/<variant>"``), so two variants searching the same space do
   not evaluate the same configurations (with one shared seed they did, trial for trial, and
   their comparison measured the losses on identical draws rather than each loss's search).
3. **The default is trial 0**: given ``default`` (the variant's untuned configuration),
   a new study evaluates it first (``study.enqueue_trial``), so the chosen configuration is
   never worse than the default on the validation objective.
4. **Pruning**: an objective ``f(choices, report)`` calls ``report(step, value)`` with an
   intermediate validation score after ``step`` units of resource (epochs, folds; ``step``
   >= 1); the track's pruner (:class:`TuneParams` ``pruner``) may stop the trial there
   (``optuna.TrialPruned``): Hyperband (Li, Jamieson, DeSalvo, Rostamizadeh & Talwalkar,
   JMLR 2018), successive halving (Jamieson & Talwalkar, AISTATS 2016; asynchronous form of
   Li et al., MLSys 2020), or Optuna's median rule. The budget counts *finished* trials
   (complete + pruned + failed), so a pruned trial costs a slot but less compute.
5. **Uncertainty**: the objective may return ``(mean, standard_error)`` (e.g. over folds or
   training seeds); the SE is kept per trial (user attribute ``se``; column ``se`` of
   :func:`study_history`).
6. **Selection** (``select: best_mean``): the winner is the COMPLETE trial with the best
   mean objective (pruned and failed trials are never chosen). Ties go to the lower trial
   number (Optuna's ``best_trial``), so the default wins a tie.

Storage. A study lives in Optuna's journal file (``journal.log`` in the stage's output
folder, kept by DVC with ``persist: true``), so a rerun after an interruption continues it;
with ``storage`` set to an RDB URL (``postgresql+psycopg2://user:pw@host/db``) several
processes or machines run the same stage and share one study: each worker stops when the
study holds ``n_trials`` finished trials, and a trial asked for beyond the budget by a worker
that lost the race is dropped (recorded FAIL with user attribute ``surplus``; not counted,
not listed). The default is enqueued only by the process that created the study (the
database's unique study name decides) before it stores the protocol attributes; a worker
that opens the study meanwhile waits (up to 30 s) for those attributes, so two workers
starting at once evaluate the default once.
Workers can die. In an RDB study every trial beats a heartbeat (Optuna's ``heartbeat_interval``,
:data:`HEARTBEAT_S` seconds); a RUNNING trial silent for :data:`GRACE_S` seconds (its worker
was killed, its machine lost) is failed by the next worker that looks
(``optuna.storages.fail_stale_trials``) and re-queued with the same configuration
(``RetryFailedTrialCallback``, at most :data:`MAX_RETRY` times); a failed-and-retried trial
does not count against the budget, and a worker that finds the budget taken waits until the
other workers' trials have finished (or gone stale) before it stops, so the budget is met
with complete trials even when a worker is killed mid-trial (SIGKILL included).
The study name is ``<track>-<variant>-<digest>``, the digest covering the space, the fixed
configuration and the protocol version (:data:`PROTOCOL`); the sampler seed, default and
pruner are stored as study attributes and a rerun with different ones is refused.

Search space entries (:class:`SearchDim`)::

    temperature: {type: float, low: 0.05, high: 1.0, log: true}
    n_hard:      {type: int, low: 32, high: 512, log: true}
    mode:        {type: categorical, choices: [column, element]}

A dotted name (``feature_mask.0``) sets an element of a list-valued hyperparameter; the
objective receives the flat dict and applies it (:func:`apply_choices`).
"""

from __future__ import annotations

import hashlib
import inspect
import json
import math
import numbers
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Literal, Mapping, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["SearchDim", "TuneParams", "TuneResult", "PROTOCOL", "suggest", "study_name",
           "sampler_seed", "make_pruner", "tune_kwargs", "run_study", "study_history",
           "write_tuned", "read_tuned", "apply_choices"]

#: Version of the protocol in the module docstring; part of every study's name, so studies
#: run under an earlier protocol (one sampler seed for all variants, no default trial, pruned
#: trials outside the budget) are not continued under this one.
PROTOCOL = 2

PrunerName = Literal["hyperband", "successive_halving", "median", "none"]


class SearchDim(BaseModel):
    """One hyperparameter's search distribution.

    ``float``/``int``: ``low <= x <= high`` (``log``: log-uniform, needs ``low > 0``;
    ``step``: a grid, not with ``log``). ``categorical``: one of ``choices``.
    """

    model_config = ConfigDict(extra="forbid")

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


class TuneParams(BaseModel):
    """``<track>.tune``: the search budget, the pruner and where the studies live (the same
    for every variant of a track; protocol in the module docstring)."""

    model_config = ConfigDict(extra="forbid")

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
    select: Literal["best_mean"] = Field(
        "best_mean", description="Winner: the COMPLETE trial with the best mean objective "
        "(lowest trial number on ties; pruned and failed trials are never chosen).")

    @model_validator(mode="after")
    def _check_resource(self) -> "TuneParams":
        if self.max_resource != "auto" and self.max_resource < self.min_resource:
            raise ValueError(f"max_resource {self.max_resource} < min_resource "
                             f"{self.min_resource}")
        return self


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
    if pruner == "hyperband":
        return optuna.pruners.HyperbandPruner(min_resource=int(min_resource),
                                              max_resource=max_resource,
                                              reduction_factor=int(reduction_factor))
    if pruner == "successive_halving":
        return optuna.pruners.SuccessiveHalvingPruner(min_resource=int(min_resource),
                                                      reduction_factor=int(reduction_factor))
    if pruner == "median":
        return optuna.pruners.MedianPruner(n_startup_trials=int(startup_trials),
                                           n_warmup_steps=int(min_resource) - 1)
    raise ValueError(f"unknown pruner {pruner!r}: expected hyperband, successive_halving, "
                     "median or none")


def tune_kwargs(tune: Any) -> dict[str, Any]:
    """:func:`run_study` keyword arguments from a track's ``tune`` params (a
    :class:`TuneParams` or any object with ``trials``, ``seed``, ``storage`` and optionally
    ``startup_trials``, ``pruner``, ``min_resource``, ``max_resource``,
    ``reduction_factor``): ``run_study(..., **tune_kwargs(p.graph.tune))``."""
    out = {"n_trials": tune.trials, "seed": tune.seed, "storage": tune.storage}
    for k in ("startup_trials", "pruner", "min_resource", "max_resource", "reduction_factor"):
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
            continue
        if head not in out:
            raise KeyError(f"search dimension {name!r}: {head!r} is not a hyperparameter here")
        if isinstance(out[head], list):
            out[head][int(tail)] = value
        else:
            out[head][tail] = value
    return out


#: Heartbeat of a trial in an RDB study (s), silence after which it is failed and re-queued
#: (s), and how often one configuration is re-queued (module docstring, "Workers can die").
HEARTBEAT_S, GRACE_S, MAX_RETRY = 20, 60, 3


def _storage(out_dir: Path, storage: str | None, heartbeat: tuple[int, int] | None = None):
    import optuna
    from optuna.storages.journal import JournalFileBackend

    if storage:
        return _rdb(storage, heartbeat=heartbeat or (HEARTBEAT_S, GRACE_S))
    out_dir.mkdir(parents=True, exist_ok=True)
    return optuna.storages.JournalStorage(JournalFileBackend(str(out_dir / "journal.log")))


_RDB: dict[str, Any] = {}


def rdb_url(url: str) -> str:
    """``url`` with an explicit PostgreSQL driver: SQLAlchemy 2.1 maps a bare
    ``postgresql://`` to psycopg 3, while this project pins psycopg2 (``psycopg2-binary``),
    so ``postgresql://...`` becomes ``postgresql+psycopg2://...`` unless psycopg 3 is
    installed. Other URLs are returned unchanged."""
    if url.startswith("postgresql://") or url.startswith("postgres://"):
        import importlib.util

        if importlib.util.find_spec("psycopg") is None:
            return "postgresql+psycopg2://" + url.split("://", 1)[1]
    return url


def _rdb(url: str, attempts: int = 8, heartbeat: tuple[int, int] = (HEARTBEAT_S, GRACE_S)):
    """An Optuna ``RDBStorage`` on ``url`` (one per URL, heartbeat and process) with a
    heartbeat of ``heartbeat = (interval s, grace period s)`` and a retry of stale trials
    (``RetryFailedTrialCallback(max_retry=MAX_RETRY)``). Workers started at once on an empty
    database race on Optuna's schema creation (PostgreSQL: a duplicate ``CREATE TYPE``, a
    unique-key violation); the loser retries, then finds the schema."""
    import time

    import optuna
    import sqlalchemy.exc
    from optuna.storages import RetryFailedTrialCallback

    url = rdb_url(url)
    key = f"{url}|{heartbeat[0]}|{heartbeat[1]}"
    if key in _RDB:
        return _RDB[key]
    for i in range(attempts):
        try:
            with warnings.catch_warnings():  # heartbeat_interval is "experimental" in Optuna
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                _RDB[key] = optuna.storages.RDBStorage(
                    url, heartbeat_interval=int(heartbeat[0]), grace_period=int(heartbeat[1]),
                    heartbeat_stale_trial_callback=RetryFailedTrialCallback(max_retry=MAX_RETRY))
            return _RDB[key]
        except (sqlalchemy.exc.IntegrityError, sqlalchemy.exc.ProgrammingError,
                sqlalchemy.exc.InternalError):
            if i == attempts - 1:
                raise
            time.sleep(0.25 * (i + 1))
    raise AssertionError("unreachable")


def _open(name: str, *, out_dir: Path, storage: str | None, seed: int, startup: int,
          direction: str, n_done: int = 0, pruner=None, create: bool = True,
          heartbeat: tuple[int, int] | None = None):
    """Load study ``name`` (or create it when ``create``); returns the study. With
    ``create=True`` the attribute ``_created_here`` of the returned study says whether this
    call created it (the database's unique name decides between racing processes)."""
    import optuna
    from optuna.exceptions import DuplicatedStudyError

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    # The sampler's seed moves with the number of trials already told so a resumed study
    # does not redraw the configurations of its first trials. Workers sharing a study in an
    # RDB would otherwise hold identically seeded samplers and draw the same configurations
    # (tests/protocol/test_postgres.py): there each process also mixes in its host and pid
    # (a shared study's order depends on the workers' interleaving anyway).
    if storage is not None:
        import os
        import socket
        import zlib

        seed = seed ^ zlib.crc32(f"{socket.gethostname()}:{os.getpid()}".encode())
    sampler = optuna.samplers.TPESampler(seed=(seed + n_done) % 2**32, n_startup_trials=startup)
    store = optuna.storages.get_storage(_storage(out_dir, storage, heartbeat))
    kw = {"sampler": sampler}
    if pruner is not None:
        kw["pruner"] = pruner
    try:
        store.get_study_id_from_name(name)
    except KeyError:
        if not create:
            raise
        try:
            study = optuna.create_study(storage=store, study_name=name, direction=direction,
                                        load_if_exists=False, **kw)
            study._created_here = True
            return study
        except DuplicatedStudyError:
            pass  # another worker created it a moment ago
    # an existing study is loaded, not "created if missing": a journal's create_study
    # appends a log line even when the study exists, so a rerun would change the file
    study = optuna.load_study(study_name=name, storage=store, **kw)
    study._created_here = False
    return study


def _wants_report(objective: Callable) -> bool:
    """True when ``objective`` takes the ``report`` callback: it has a parameter named
    ``report``, or its second positional parameter has no default."""
    try:
        params = list(inspect.signature(objective).parameters.values())
    except (TypeError, ValueError):
        return False
    if any(p.name == "report" for p in params):
        return True
    pos = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(pos) >= 2 and pos[1].default is inspect.Parameter.empty


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


_PROTOCOL_ATTRS = ("sampler_seed", "default", "pruner")


def _retried(trials) -> set[int]:
    """Numbers of trials failed for a stopped heartbeat and re-queued (a later trial's
    ``retry_history``, set by ``RetryFailedTrialCallback``)."""
    return {n for t in trials for n in t.system_attrs.get("retry_history", ())}


def _budget_trials(study):
    """Trials that count against the budget: finished (COMPLETE, PRUNED, FAIL), except
    interrupted, surplus and failed-and-retried (stale heartbeat) ones."""
    from optuna.trial import TrialState

    trials = study.get_trials(deepcopy=False)
    retried = _retried(trials)
    return [t for t in trials if t.state in (TrialState.COMPLETE, TrialState.PRUNED,
                                             TrialState.FAIL)
            and not (t.user_attrs.get("interrupted") or t.user_attrs.get("surplus"))
            and t.number not in retried]


def _set_up(study, default, proto: dict) -> None:
    """Enqueue the default (trial 0) and THEN store the protocol attributes: a worker that
    finds the attributes knows the default is already in the study, so two workers starting
    at once never enqueue it twice."""
    if default and not study.get_trials(deepcopy=False):
        study.enqueue_trial(default, skip_if_exists=True)
    for k in _PROTOCOL_ATTRS:
        study.set_user_attr(k, proto[k])


def _wait_for_set_up(study, timeout_s: float = 30.0, poll_s: float = 0.2) -> dict:
    """The study's user attributes once its creator has stored the protocol attributes, or
    what is there after ``timeout_s`` (the creator died: the caller sets the study up)."""
    import time

    deadline = time.monotonic() + timeout_s
    attrs = study.user_attrs
    while not all(k in attrs for k in _PROTOCOL_ATTRS) and time.monotonic() < deadline:
        time.sleep(poll_s)
        attrs = study.user_attrs
    return attrs


def run_study(*, track: str, variant: str, space: Mapping[str, SearchDim],
              objective: Callable[..., Any], n_trials: int, seed: int,
              out_dir: str | Path, storage: str | None = None, startup_trials: int = 6,
              direction: Literal["maximize", "minimize"] = "maximize",
              fixed: Mapping[str, Any] | None = None, tracker=None,
              progress: bool = True, default: Mapping[str, Any] | None = None,
              pruner: Any = "none", min_resource: int = 1,
              max_resource: int | str = "auto", reduction_factor: int = 3,
              seed_key: str | None = None,
              heartbeat: tuple[int, int] | None = None) -> TuneResult:
    """Run (or continue) one variant's study until it holds ``n_trials`` finished trials.

    Args:
        track, variant: name the study (with a digest of ``space``, ``fixed`` and
            :data:`PROTOCOL`).
        space: hyperparameter name -> :class:`SearchDim`.
        objective: on validation data only; ``choices`` holds one value per ``space`` key.
            ``f(choices)``, or ``f(choices, report)`` (a parameter named ``report``, or a
            second positional parameter without default) where ``report(step: int, value:
            float)`` records the validation score after ``step`` >= 1 units of resource and
            raises ``optuna.TrialPruned`` when the pruner stops the trial (let it propagate).
            Returns a float or ``(mean, standard_error)``. A ``FloatingPointError`` or a
            non-finite mean fails the trial; failed and pruned trials count against the
            budget (a diverging setting is a real outcome).
        n_trials: the budget of finished (complete + pruned + failed) trials.
        seed: base sampler seed; the study's TPE seed is :func:`sampler_seed` (``seed``,
            ``track``, ``seed_key`` or ``variant``); on a shared ``storage`` each worker
            process mixes in its host and pid, so workers do not draw the same configurations.
        out_dir: folder of the journal file (``journal.log``) when ``storage`` is None.
        storage: Optuna RDB URL to share the study across processes and machines.
        fixed: the non-tuned configuration; part of the study's identity (digest).
        tracker: a :class:`contrastlab.tracking.Tracker` of the parent run; each trial is
            logged as a nested run (params + objective) when it is active.
        default: the variant's untuned choices (a subset of ``space``'s keys), evaluated as
            trial 0 of a new study (``study.enqueue_trial``, once even when several workers
            start at once).
        pruner, min_resource, max_resource, reduction_factor: see :func:`make_pruner`
            (``"none"`` by default here; :class:`TuneParams` defaults to hyperband; pass
            ``**tune_kwargs(tune)``).
        seed_key: the name hashed into the sampler seed instead of ``variant`` (two studies
            that must draw the same configurations share it).
        heartbeat: ``(interval s, grace period s)`` of an RDB study's trial heartbeat
            (default ``(HEARTBEAT_S, GRACE_S)``; module docstring, "Workers can die").

    Returns:
        :class:`TuneResult` of the COMPLETE trial with the best objective.

    Raises:
        RuntimeError: no trial completed (no configuration to choose).
        ValueError: ``default`` names a key outside ``space`` or a value it cannot take, or an
            existing study was run with another sampler seed, default or pruner.
    """
    import optuna
    from optuna.trial import TrialState
    from tqdm.auto import tqdm

    if n_trials < 1:
        raise ValueError(f"n_trials must be >= 1 (got {n_trials})")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)  # a DVC output even when the study is in an RDB
    name = study_name(track, variant, space, fixed)
    s_seed = sampler_seed(seed, track, seed_key or variant)
    default = _check_default(default, space) if default else None
    prune = make_pruner(pruner, min_resource=min_resource, max_resource=max_resource,
                        reduction_factor=reduction_factor, startup_trials=startup_trials)
    proto = {"sampler_seed": s_seed, "default": default,
             "pruner": pruner if isinstance(pruner, str) or pruner is None
             else type(pruner).__name__}
    proto = json.loads(json.dumps(proto, default=str))
    study = _open(name, out_dir=out_dir, storage=storage, seed=s_seed, startup=startup_trials,
                  direction=direction, pruner=prune, heartbeat=heartbeat)
    if study._created_here:
        _set_up(study, default, proto)
    else:
        attrs = study.user_attrs
        if storage is not None and not all(k in attrs for k in _PROTOCOL_ATTRS):
            attrs = _wait_for_set_up(study)  # another worker created it a moment ago
        if not all(k in attrs for k in _PROTOCOL_ATTRS):
            _set_up(study, default, proto)  # its creator stopped before setting it up
        else:
            clash = {k: (attrs[k], proto[k]) for k in _PROTOCOL_ATTRS if attrs[k] != proto[k]}
            if clash:
                raise ValueError(f"study {name} was run with other settings ({clash}: stored, "
                                 "requested); keep them or use a new storage / journal")
    if storage is None:
        # Single worker on a local journal: a RUNNING trial was interrupted (killed stage).
        # It is closed as PRUNED with user attribute ``interrupted`` (not budget).
        for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
            study._storage.set_trial_user_attr(t._trial_id, "interrupted", True)
            study.tell(t.number, state=TrialState.PRUNED)

    def finished() -> int:
        return len(_budget_trials(study))

    done = finished()
    if done:
        study = _open(name, out_dir=out_dir, storage=storage, seed=s_seed,
                      startup=startup_trials, direction=direction, n_done=done, pruner=prune,
                      heartbeat=heartbeat)
    with_report = _wants_report(objective)
    bar = tqdm(total=n_trials, initial=min(done, n_trials), desc=f"tune {variant}",
               disable=not progress, leave=False)
    def taken() -> int:  # finished plus running elsewhere (a shared study's other workers)
        return finished() + sum(not t.user_attrs.get("interrupted") for t in study.get_trials(
            deepcopy=False, states=(TrialState.RUNNING,)))

    beat = (heartbeat or (HEARTBEAT_S, GRACE_S))[0]
    while True:
        if storage is not None:
            _fail_stale(study)  # a dead worker's trial: FAIL, and re-queued
        if taken() >= n_trials:
            if storage is None or finished() >= n_trials:
                break
            time.sleep(min(1.0, beat))  # other workers' trials still run (or go stale)
            continue
        trial = study.ask()
        if storage is not None:
            # another worker may have asked for the last slot first: trials numbered before
            # this one that are finished or running (alive or not) already fill the budget
            trials = study.get_trials(deepcopy=False)
            retried = _retried(trials)
            ahead = [t for t in trials if t.state in (
                TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL, TrialState.RUNNING)
                and t.number < trial.number and t.number not in retried
                and not (t.user_attrs.get("interrupted") or t.user_attrs.get("surplus"))]
            if len(ahead) >= n_trials:
                trial.set_user_attr("surplus", True)
                study.tell(trial, state=TrialState.FAIL)
                continue  # wait above until the trials ahead have finished or gone stale
        choices = suggest(trial, space)

        def report(step: int, value: float, _trial=trial) -> None:
            _trial.report(float(value), int(step))
            if _trial.should_prune():
                raise optuna.TrialPruned(f"pruned at step {step} (value {value})")

        se = None
        try:
            with _heartbeat_of(trial, study, storage):
                out = objective(choices, report) if with_report else objective(choices)
            if isinstance(out, (tuple, list)):
                if len(out) != 2:
                    raise TypeError(f"objective returned {len(out)} values; expected a float "
                                    "or (mean, standard_error)")
                value, se = float(out[0]), float(out[1])
                if not (math.isfinite(se) and se >= 0):
                    raise FloatingPointError(f"standard error is {se}")
            else:
                value = float(out)
            if not math.isfinite(value):
                raise FloatingPointError(f"objective is {value}")
        except optuna.TrialPruned as e:
            study.tell(trial, state=TrialState.PRUNED)
            state, value, se = "PRUNED", None, None
            if progress:
                print(f"tune {variant}: trial {trial.number} {e}", flush=True)
        except FloatingPointError as e:
            study.tell(trial, state=TrialState.FAIL)
            print(f"tune {variant}: trial {trial.number} failed ({e})", flush=True)
            state, value, se = "FAILED", None, None
        else:
            if se is not None:
                trial.set_user_attr("se", se)
            study.tell(trial, value)
            state = "FINISHED"
        _log_trial(tracker, f"{variant} · trial {trial.number}", choices, value, state, se)
        bar.update(1)
    bar.close()
    return _result(study, name, direction, s_seed)


def _fail_stale(study) -> None:
    """Fail the RUNNING trials whose heartbeat stopped and re-queue them (the storage's
    ``RetryFailedTrialCallback``); Optuna marks the function experimental."""
    import warnings

    import optuna

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        optuna.storages.fail_stale_trials(study)


def _heartbeat_of(trial, study, storage: str | None):
    """A context that beats ``trial``'s heartbeat while the objective runs (RDB studies; the
    thread Optuna's own ``study.optimize`` starts), a no-op for a journal file."""
    import contextlib

    if storage is None:
        return contextlib.nullcontext()
    from optuna.storages._heartbeat import get_heartbeat_thread

    return get_heartbeat_thread(trial._trial_id, study._storage)


def _result(study, name: str, direction: str, s_seed: int | None) -> TuneResult:
    from optuna.trial import TrialState

    budget = _budget_trials(study)
    complete = [t for t in budget if t.state == TrialState.COMPLETE]
    if not complete:
        raise RuntimeError(f"study {name}: all {len(budget)} trials failed or were pruned")
    sign = 1.0 if direction == "maximize" else -1.0
    best = min(complete, key=lambda t: (-sign * t.value, t.number))  # lowest number on ties
    se = best.user_attrs.get("se")
    return TuneResult(study_name=name, best_params=dict(best.params),
                      best_value=float(best.value), best_trial=best.number,
                      n_complete=len(complete),
                      n_failed=sum(t.state == TrialState.FAIL for t in budget),
                      n_pruned=sum(t.state == TrialState.PRUNED for t in budget),
                      direction=direction, best_se=None if se is None else float(se),
                      sampler_seed=s_seed)


def _log_trial(tracker, name: str, choices: Mapping[str, Any], value: float | None,
               state: str, se: float | None = None) -> None:
    """One nested MLflow run per trial under the study's parent run (no-op when inactive):
    a child run (tag ``mlflow.parentRunId``) holding the trial's params, ``objective`` and
    ``objective_se``; status FINISHED, KILLED (pruned) or FAILED."""
    parent = getattr(tracker, "run_id", None) if tracker is not None else None
    if not parent:
        return
    try:
        from mlflow.tracking import MlflowClient

        # the parent run's own client: a bare MlflowClient() would miss the project's store
        # when MLFLOW_TRACKING_URI is unset (contrastlab.tracking.tracking_uri)
        client = getattr(tracker, "_client", None) or MlflowClient()
        exp_id = client.get_run(parent).info.experiment_id
        run = client.create_run(exp_id, run_name=name,
                                tags={"mlflow.parentRunId": parent, "trial_state": state})
        rid = run.info.run_id
        for k, v in choices.items():
            client.log_param(rid, k, str(v))
        if value is not None:
            client.log_metric(rid, "objective", value)
        if se is not None:
            client.log_metric(rid, "objective_se", se)
        status = {"FINISHED": "FINISHED", "PRUNED": "KILLED"}.get(state, "FAILED")
        client.set_terminated(rid, status=status)
    except Exception as e:  # tracking must never fail a tuning run
        print(f"warning: MLflow trial logging failed: {e}", flush=True)


def study_history(*, track: str, variant: str, space: Mapping[str, SearchDim],
                  out_dir: str | Path, storage: str | None = None,
                  fixed: Mapping[str, Any] | None = None,
                  direction: str = "maximize"):
    """The study's finished trials as a ``pandas.DataFrame`` ordered by trial number:
    ``trial`` (int), ``state`` (COMPLETE / PRUNED / FAIL), ``value`` (float; a pruned trial's
    last reported score, NaN when failed), ``best_so_far`` (best COMPLETE value up to this
    trial), ``se`` (the objective's standard error, NaN when not given) and one column per
    hyperparameter. Interrupted and surplus trials are left out. Reads a journal file and an
    RDB storage alike.

    Raises:
        KeyError: no such study in the storage.
    """
    import pandas as pd
    from optuna.trial import TrialState

    study = _open(study_name(track, variant, space, fixed), out_dir=Path(out_dir),
                  storage=storage, seed=0, startup=1, direction=direction, create=False)
    rows, best = [], None
    better = (lambda a, b: a > b) if direction == "maximize" else (lambda a, b: a < b)
    for t in sorted(_budget_trials(study), key=lambda t: t.number):
        v = t.value if t.state in (TrialState.COMPLETE, TrialState.PRUNED) else None
        if t.state == TrialState.COMPLETE and (best is None or better(v, best)):
            best = v
        se = t.user_attrs.get("se")
        rows.append({"trial": t.number, "state": t.state.name,
                     "value": float("nan") if v is None else float(v),
                     "best_so_far": float("nan") if best is None else float(best),
                     "se": float("nan") if se is None else float(se),
                     **{k: t.params.get(k) for k in space}})
    cols = ["trial", "state", "value", "best_so_far", "se", *space]
    return pd.DataFrame(rows, columns=cols)


def write_tuned(path: str | Path, result: TuneResult, *, track: str, variant: str,
                objective: str, space: Mapping[str, SearchDim], n_trials: int) -> None:
    """The chosen hyperparameters as a small, deterministic JSON (no timestamps), read by the
    final training stage with :func:`read_tuned`."""
    from .io import write_json

    out = {
        "track": track, "variant": variant, "objective": objective,
        "direction": result.direction, "budget_trials": n_trials,
        "n_complete": result.n_complete, "n_failed": result.n_failed,
        "n_pruned": result.n_pruned, "select": "best_mean",
        "best_trial": result.best_trial,
        "best_value": round(result.best_value, 6),
        "best_se": None if result.best_se is None else round(result.best_se, 6),
        "params": {k: (round(v, 6) if isinstance(v, float) else v)
                   for k, v in result.best_params.items()},
        "space": {k: v.model_dump(exclude_none=True) for k, v in space.items()},
        "study": result.study_name,
    }
    if result.sampler_seed is not None:
        out["sampler_seed"] = result.sampler_seed
    write_json(path, out)


def read_tuned(path: str | Path) -> dict[str, Any]:
    """The ``params`` of a tuned-choices JSON written by :func:`write_tuned`.

    Raises:
        FileNotFoundError: no such file (run the tune stage, e.g. ``dvc repro tune_graph``).
        ValueError: the file does not parse or has no ``params`` object.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no tuned choices (run the tune stage first)")
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not valid JSON ({e})") from e
    if not isinstance(data, dict) or not isinstance(data.get("params"), dict):
        raise ValueError(f"{path}: expected an object with a `params` object")
    return data["params"]
