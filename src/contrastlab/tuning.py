"""Equal-budget hyperparameter tuning on validation data (Musgrave, Belongie & Lim, ECCV 2020,
Sec. 4: every loss gets the same search budget, chosen on validation only).

A study is one variant's search: a seeded TPE sampler (Bergstra et al., NeurIPS 2011; Optuna,
Akiba et al., KDD 2019) over a search space declared in ``params.yaml`` beside the variant,
a fixed number of trials (``<track>.tune.trials``, the same for every variant), and an
objective computed on the validation split only. The study lives in Optuna's journal file
(``journal.log`` in the stage's output folder, kept by DVC with ``persist: true``), so a rerun
after an interruption continues it; with ``storage`` set to an RDB URL
(``postgresql://user:pw@host/db``, ``mysql+pymysql://...``) several machines run the same
stage and share one study (each worker stops when the study holds ``trials`` finished trials).

Search space entries (:class:`SearchDim`)::

    temperature: {type: float, low: 0.05, high: 1.0, log: true}
    n_hard:      {type: int, low: 32, high: 512, log: true}
    mode:        {type: categorical, choices: [column, element]}

A dotted name (``feature_mask.0``) sets an element of a list-valued hyperparameter; the
objective receives the flat dict and applies it (:func:`apply_choices`).
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Literal, Mapping, Optional

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["SearchDim", "TuneParams", "TuneResult", "suggest", "study_name", "run_study",
           "study_history", "write_tuned", "read_tuned", "apply_choices"]


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
    """``<track>.tune``: the search budget and where the studies live."""

    model_config = ConfigDict(extra="forbid")

    trials: int = Field(20, ge=1, le=10_000,
                        description="Finished trials per variant: the same for every loss.")
    startup_trials: int = Field(6, ge=1, le=10_000,
                                description="Random trials before TPE models the space.")
    seed: int = Field(0, ge=0, lt=2**32)
    storage: Optional[str] = Field(
        None, description="null: a journal file in the stage output; else an Optuna RDB URL.")


@dataclass
class TuneResult:
    """What :func:`run_study` found."""

    study_name: str
    best_params: dict[str, Any]
    best_value: float
    best_trial: int
    n_complete: int
    n_failed: int
    direction: str


def space_digest(space: Mapping[str, SearchDim], fixed: Mapping[str, Any] | None = None) -> str:
    """A short hash of the search space and the fixed configuration: a changed space or
    objective setting starts a new study instead of mixing trials of different problems."""
    blob = json.dumps({"space": {k: v.model_dump() for k, v in sorted(space.items())},
                       "fixed": fixed or {}}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:10]


def study_name(track: str, variant: str, space: Mapping[str, SearchDim],
               fixed: Mapping[str, Any] | None = None) -> str:
    """``<track>-<variant>-<digest of space and fixed config>``."""
    return f"{track}-{variant}-{space_digest(space, fixed)}"


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


def _storage(out_dir: Path, storage: str | None):
    import optuna
    from optuna.storages.journal import JournalFileBackend

    if storage:
        return storage
    out_dir.mkdir(parents=True, exist_ok=True)
    return optuna.storages.JournalStorage(JournalFileBackend(str(out_dir / "journal.log")))


def _open(name: str, *, out_dir: Path, storage: str | None, seed: int, startup: int,
          direction: str, n_done: int = 0):
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    # The sampler's seed moves with the number of trials already told so a resumed study
    # does not redraw the configurations of its first trials.
    sampler = optuna.samplers.TPESampler(seed=seed + n_done, n_startup_trials=startup)
    store = optuna.storages.get_storage(_storage(out_dir, storage))
    try:
        store.get_study_id_from_name(name)
    except KeyError:
        return optuna.create_study(storage=store, study_name=name, sampler=sampler,
                                   direction=direction)
    # an existing study is loaded, not "created if missing": a journal's create_study
    # appends a log line even when the study exists, so a rerun would change the file
    return optuna.load_study(study_name=name, storage=store, sampler=sampler)


def run_study(*, track: str, variant: str, space: Mapping[str, SearchDim],
              objective: Callable[[dict[str, Any]], float], n_trials: int, seed: int,
              out_dir: str | Path, storage: str | None = None, startup_trials: int = 6,
              direction: Literal["maximize", "minimize"] = "maximize",
              fixed: Mapping[str, Any] | None = None, tracker=None,
              progress: bool = True) -> TuneResult:
    """Run (or continue) one variant's study until it holds ``n_trials`` finished trials.

    Args:
        track, variant: name the study (with a digest of ``space`` and ``fixed``).
        space: hyperparameter name -> :class:`SearchDim`.
        objective: ``f(choices) -> float`` on validation data only; ``choices`` holds one
            value per ``space`` key. A ``FloatingPointError`` (NaN loss) fails the trial,
            which still counts against the budget (a diverging setting is a real outcome).
        n_trials: the budget of finished (complete or failed) trials.
        seed: sampler seed.
        out_dir: folder of the journal file (``journal.log``) when ``storage`` is None.
        storage: Optuna RDB URL to share the study across machines.
        fixed: the non-tuned configuration; part of the study's identity (digest).
        tracker: a :class:`contrastlab.tracking.Tracker` of the parent run; each trial is
            logged as a nested run (params + objective) when it is active.

    Returns:
        :class:`TuneResult` of the best complete trial.

    Raises:
        RuntimeError: every trial failed (no configuration to choose).
    """
    import optuna
    from optuna.trial import TrialState
    from tqdm.auto import tqdm

    out_dir = Path(out_dir)
    name = study_name(track, variant, space, fixed)
    study = _open(name, out_dir=out_dir, storage=storage, seed=seed, startup=startup_trials,
                  direction=direction)
    if storage is None:
        # Single worker on a local journal: a RUNNING trial was interrupted (killed stage).
        # It is closed as PRUNED, which marks "interrupted" here and is not budget.
        for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
            study.tell(t.number, state=TrialState.PRUNED)

    def finished() -> int:
        return len(study.get_trials(deepcopy=False,
                                    states=(TrialState.COMPLETE, TrialState.FAIL)))

    done = finished()
    if done:
        study = _open(name, out_dir=out_dir, storage=storage, seed=seed,
                      startup=startup_trials, direction=direction, n_done=done)
    bar = tqdm(total=n_trials, initial=min(done, n_trials), desc=f"tune {variant}",
               disable=not progress, leave=False)
    while finished() < n_trials:
        trial = study.ask()
        choices = suggest(trial, space)
        try:
            value = float(objective(choices))
            if not math.isfinite(value):
                raise FloatingPointError(f"objective is {value}")
        except FloatingPointError as e:
            study.tell(trial, state=TrialState.FAIL)
            print(f"tune {variant}: trial {trial.number} failed ({e})", flush=True)
            state, value = "FAILED", None
        else:
            study.tell(trial, value)
            state = "FINISHED"
        _log_trial(tracker, f"{variant} · trial {trial.number}", choices, value, state)
        bar.update(1)
    bar.close()
    complete = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    if not complete:
        raise RuntimeError(f"study {name}: all {n_trials} trials failed")
    best = study.best_trial
    n_failed = len(study.get_trials(deepcopy=False, states=(TrialState.FAIL,)))
    return TuneResult(study_name=name, best_params=dict(best.params),
                      best_value=float(best.value), best_trial=best.number,
                      n_complete=len(complete), n_failed=n_failed, direction=direction)


def _log_trial(tracker, name: str, choices: Mapping[str, Any], value: float | None,
               state: str) -> None:
    """One nested MLflow run per trial under the study's parent run (no-op when inactive):
    a child run (tag ``mlflow.parentRunId``) holding the trial's params and ``objective``."""
    parent = getattr(tracker, "run_id", None) if tracker is not None else None
    if not parent:
        return
    try:
        from mlflow.tracking import MlflowClient

        client = MlflowClient()
        exp_id = client.get_run(parent).info.experiment_id
        run = client.create_run(exp_id, run_name=name,
                                tags={"mlflow.parentRunId": parent, "trial_state": state})
        rid = run.info.run_id
        for k, v in choices.items():
            client.log_param(rid, k, str(v))
        if value is not None:
            client.log_metric(rid, "objective", value)
        client.set_terminated(rid, status="FINISHED" if state == "FINISHED" else "FAILED")
    except Exception as e:  # tracking must never fail a tuning run
        print(f"warning: MLflow trial logging failed: {e}", flush=True)


def study_history(*, track: str, variant: str, space: Mapping[str, SearchDim],
                  out_dir: str | Path, storage: str | None = None,
                  fixed: Mapping[str, Any] | None = None,
                  direction: str = "maximize"):
    """The study's finished trials as a ``pandas.DataFrame``: ``trial``, ``state``,
    ``value``, ``best_so_far`` and one column per hyperparameter, ordered by trial number
    (interrupted trials left out)."""
    import pandas as pd
    from optuna.trial import TrialState

    study = _open(study_name(track, variant, space, fixed), out_dir=Path(out_dir),
                  storage=storage, seed=0, startup=1, direction=direction)
    rows, best = [], None
    better = (lambda a, b: a > b) if direction == "maximize" else (lambda a, b: a < b)
    for t in sorted(study.get_trials(deepcopy=False), key=lambda t: t.number):
        if t.state not in (TrialState.COMPLETE, TrialState.FAIL):
            continue
        v = t.value if t.state == TrialState.COMPLETE else None
        if v is not None and (best is None or better(v, best)):
            best = v
        rows.append({"trial": t.number, "state": t.state.name, "value": v,
                     "best_so_far": best, **{k: t.params.get(k) for k in space}})
    return pd.DataFrame(rows)


def write_tuned(path: str | Path, result: TuneResult, *, track: str, variant: str,
                objective: str, space: Mapping[str, SearchDim], n_trials: int) -> None:
    """The chosen hyperparameters as a small, deterministic JSON (no timestamps), read by the
    final training stage with :func:`read_tuned`."""
    from .io import write_json

    write_json(path, {
        "track": track, "variant": variant, "objective": objective,
        "direction": result.direction, "budget_trials": n_trials,
        "n_complete": result.n_complete, "n_failed": result.n_failed,
        "best_trial": result.best_trial,
        "best_value": round(result.best_value, 6),
        "params": {k: (round(v, 6) if isinstance(v, float) else v)
                   for k, v in result.best_params.items()},
        "space": {k: v.model_dump(exclude_none=True) for k, v in space.items()},
        "study": result.study_name,
    })


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
