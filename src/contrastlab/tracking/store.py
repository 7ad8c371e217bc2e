"""The MLflow store and the per-track experiments (URI, lock, client, experiment ids)."""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
from pathlib import Path

from ..invocation import current
from ..utils import repo_root

MAX_PARAM_LEN = 500
EXPERIMENT_KIND_TAG = "mlflow.experimentKind"
EXPERIMENT_KIND = "custom_model_development"
PARENT_TAG = "mlflow.parentRunId"


def tracking_uri(root: Path | None = None) -> str:
    """The MLflow tracking URI this project uses (see module docstring). A bare
    ``postgresql://`` URI gets the pinned psycopg2 driver (SQLAlchemy 2.1 would pick the
    uninstalled psycopg 3 and tracking would be disabled; ``contrastlab.tuning.rdb_url``)."""
    uri = os.environ.get("MLFLOW_TRACKING_URI")
    if uri:
        from ..tuning import rdb_url

        return rdb_url(uri)
    return f"sqlite:///{(_store_root(root) / 'mlflow.db').resolve()}"


def _store_root(root: Path | None = None) -> Path:
    """Where ``mlflow.db``/``mlartifacts`` live: the invocation's ``store_root``
    (:func:`contrastlab.invocation.current`; under ``dvc exp run --queue``/``--temp`` the stage
    runs in a temporary copy below ``.dvc/tmp/exps`` and the store stays in the real
    repository), else ``root``, else the repository found from the working directory."""
    return current().store_root or root or repo_root()


def experiment_name(track: str) -> str:
    """MLflow experiment name of a track (``contrastlab-graph``...)."""
    return f"contrastlab-{track}"


def _lock_path(uri: str) -> Path:
    """The lock file guarding store creation and run look-ups: ``<db>.lock`` beside a SQLite
    file, else one per URI in the temporary directory."""
    if uri.startswith("sqlite:///"):
        return Path(uri[len("sqlite:///"):] + ".lock")
    h = hashlib.sha256(uri.encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"contrastlab-mlflow-{h}.lock"


def _store_lock(uri: str):
    from filelock import FileLock

    p = _lock_path(uri)
    p.parent.mkdir(parents=True, exist_ok=True)
    return FileLock(str(p), timeout=300)


def _client(uri: str):
    """An ``MlflowClient`` on ``uri``; for a SQLite store the first one in a process creates
    and migrates the schema under the store lock (MLflow itself does it unguarded)."""
    from mlflow.tracking import MlflowClient

    for noisy in ("alembic", "mlflow"):  # its INFO chatter would drown the stage's progress
        logging.getLogger(noisy).setLevel(logging.WARNING)
    with _store_lock(uri):
        client = MlflowClient(uri)
        client.search_experiments(max_results=1)  # instantiates (creates/migrates) the store
    return client


TRACKS = ("graph", "code", "multilabel", "report")


def _experiment_id(client, uri: str, track: str, root: Path) -> str:
    """Get or create the track's experiment (under the store lock) and tag its kind. The
    first stage to track creates every track's experiment, so the UI lists all of them even
    when DVC skipped a track's stages (their outputs already matched ``dvc.lock``)."""
    ids = {}
    with _store_lock(uri):
        for tr in dict.fromkeys((track, *TRACKS)):
            name = experiment_name(tr)
            exp = client.get_experiment_by_name(name)
            if exp is None:
                art = (_store_root(root) / "mlartifacts" / name).resolve().as_uri()
                ids[tr] = client.create_experiment(name, artifact_location=art,
                                                   tags={EXPERIMENT_KIND_TAG: EXPERIMENT_KIND})
            else:
                ids[tr] = exp.experiment_id
                if exp.tags.get(EXPERIMENT_KIND_TAG) != EXPERIMENT_KIND:
                    client.set_experiment_tag(ids[tr], EXPERIMENT_KIND_TAG, EXPERIMENT_KIND)
    return ids[track]


def _enabled() -> bool:
    off = os.environ.get("CONTRASTLAB_MLFLOW", "1").lower() in {"0", "false", "no", "off"}
    return not off and int(os.environ.get("RANK", "0")) == 0
