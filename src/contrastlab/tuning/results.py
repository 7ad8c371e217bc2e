"""A study's outcome on disk: its trial history (:func:`study_history`) and the chosen
configuration as a deterministic JSON (:func:`write_tuned`, :func:`read_tuned`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping

from .space import SearchDim, TuneResult, study_name
from .storage import _budget_trials, _open

__all__ = ["study_history", "write_tuned", "read_tuned"]


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
    from ..io import write_json

    out = {"track": track, "variant": variant, "objective": objective,
           "direction": result.direction, "budget_trials": n_trials,
           "n_complete": result.n_complete, "n_failed": result.n_failed,
           "n_pruned": result.n_pruned, "select": "best_mean", "best_trial": result.best_trial,
           "best_value": round(result.best_value, 6),
           "best_se": None if result.best_se is None else round(result.best_se, 6),
           "params": {k: (round(v, 6) if isinstance(v, float) else v)
                      for k, v in result.best_params.items()},
           "space": {k: v.model_dump(exclude_none=True) for k, v in space.items()},
           "study": result.study_name}
    if result.sampler_seed is not None:
        out["sampler_seed"] = result.sampler_seed
    if result.widened:  # the space as it was after widening, and each round
        out["widened"] = result.widened
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
