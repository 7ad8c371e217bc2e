"""MLflow conventions, in one place.

- Tracking URI: ``MLFLOW_TRACKING_URI`` when set, else ``sqlite:///<repo>/mlflow.db``
  (artifacts under ``<repo>/mlartifacts``; ``<repo>`` is ``DVC_ROOT`` when DVC runs the
  stage, so queued experiments running in a temporary copy log to the real repository).
  MLflow files are never DVC outputs.
- One experiment per track: ``contrastlab-<track>`` (graph, code, multilabel, report).
- One run per stage invocation, named after the DVC stage (``train_graph@ntxent``).
- Params logged flat (``graph.temperature``); per-epoch metrics with ``step``.
- Tags: ``git_commit``, ``dvc_stage``, ``params_hash`` and, inside ``dvc exp run``,
  ``dvc_exp_name`` / ``dvc_exp_baseline`` (from DVC's ``DVC_EXP_NAME`` and
  ``DVC_EXP_BASELINE_REV``), so the UI can filter one experiment's runs.
- Under ``torchrun`` only rank 0 logs; other ranks get a no-op tracker.
- Set ``CONTRASTLAB_MLFLOW=0`` to disable tracking (the stages' DVC outputs do not change).
"""

from __future__ import annotations

import contextlib
import logging
import os
from pathlib import Path
from typing import Any, Iterator, Mapping

from .params import flatten, params_hash
from .utils import git_commit, repo_root

log = logging.getLogger(__name__)

_MAX_PARAM_LEN = 500


def tracking_uri(root: Path | None = None) -> str:
    """The MLflow tracking URI this project uses (see module docstring)."""
    uri = os.environ.get("MLFLOW_TRACKING_URI")
    if uri:
        return uri
    root = _store_root(root)
    return f"sqlite:///{(root / 'mlflow.db').resolve()}"


def _store_root(root: Path | None = None) -> Path:
    """Where ``mlflow.db``/``mlartifacts`` live: ``DVC_ROOT`` (set by DVC for every stage
    command; under ``dvc exp run --queue``/``--temp`` the stage runs in a temporary copy
    below ``.dvc/tmp/exps`` and ``DVC_ROOT`` still names the real repository), else ``root``."""
    env = os.environ.get("DVC_ROOT")
    return Path(env) if env else (root or repo_root())


def experiment_name(track: str) -> str:
    """MLflow experiment name of a track (``contrastlab-graph``...)."""
    return f"contrastlab-{track}"


class Tracker:
    """Thin wrapper around an active MLflow run (or a no-op when disabled)."""

    def __init__(self, run: Any | None):
        self._run = run

    @property
    def active(self) -> bool:
        return self._run is not None

    @property
    def run_id(self) -> str | None:
        return self._run.info.run_id if self._run is not None else None

    def log_metrics(self, metrics: Mapping[str, float], step: int | None = None) -> None:
        """Log numeric metrics (non-finite and non-numeric values are skipped)."""
        if self._run is None:
            return
        import math

        import mlflow

        clean = {}
        for k, v in metrics.items():
            try:
                fv = float(v)
            except (TypeError, ValueError):
                continue
            if math.isfinite(fv):
                clean[k.replace("@", "_at_")] = fv
        if clean:
            mlflow.log_metrics(clean, step=step)

    def log_params(self, params: Mapping[str, Any] | Any) -> None:
        """Log params flat (nested dicts / pydantic models are flattened with dots)."""
        if self._run is None:
            return
        import mlflow

        flat = flatten(params)
        mlflow.log_params({k: str(v)[:_MAX_PARAM_LEN] for k, v in flat.items()})

    def set_tags(self, tags: Mapping[str, Any]) -> None:
        if self._run is None:
            return
        import mlflow

        mlflow.set_tags({k: str(v) for k, v in tags.items()})

    def log_artifact(self, path: str | os.PathLike) -> None:
        if self._run is None:
            return
        import mlflow

        mlflow.log_artifact(str(path))


def _enabled() -> bool:
    if os.environ.get("CONTRASTLAB_MLFLOW", "1").lower() in {"0", "false", "no", "off"}:
        return False
    return int(os.environ.get("RANK", "0")) == 0


@contextlib.contextmanager
def stage_run(track: str, stage: str, params: Mapping[str, Any] | Any = None,
              tags: Mapping[str, Any] | None = None) -> Iterator[Tracker]:
    """Open one MLflow run for a stage invocation and close it (FAILED on an exception).

    Args:
        track: ``graph`` | ``code`` | ``multilabel`` | ``report``: selects the experiment.
        stage: the DVC stage name, used as the run name (``train_graph@ntxent``).
        params: mapping or pydantic model, logged flat.
        tags: extra tags.

    Yields:
        A :class:`Tracker` (a no-op one on ranks other than 0 or when disabled).
    """
    if not _enabled():
        yield Tracker(None)
        return
    import mlflow

    root = repo_root()
    mlflow.set_tracking_uri(tracking_uri(root))
    name = experiment_name(track)
    # A quiet MLflow: its alembic/INFO chatter would drown the stage's own progress.
    for noisy in ("alembic", "mlflow"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    exp = mlflow.get_experiment_by_name(name)
    if exp is None:
        art = (_store_root(root) / "mlartifacts" / name).resolve().as_uri()
        try:
            mlflow.create_experiment(name, artifact_location=art)
        except Exception:  # created concurrently by another stage
            pass
    mlflow.set_experiment(name)
    all_tags = {
        "git_commit": git_commit(root),
        "dvc_stage": stage,
        "track": track,
        "params_hash": params_hash(params) if params is not None else "none",
    }
    if os.environ.get("DVC_EXP_NAME"):
        all_tags["dvc_exp_name"] = os.environ["DVC_EXP_NAME"]
    if os.environ.get("DVC_EXP_BASELINE_REV"):
        all_tags["dvc_exp_baseline"] = os.environ["DVC_EXP_BASELINE_REV"]
    all_tags.update(tags or {})
    run = mlflow.start_run(run_name=stage, tags={k: str(v) for k, v in all_tags.items()})
    tracker = Tracker(run)
    try:
        if params is not None:
            tracker.log_params(params)
        yield tracker
    except BaseException:
        mlflow.end_run(status="FAILED")
        raise
    else:
        mlflow.end_run(status="FINISHED")
