"""MLflow conventions, in one place (user guide: docs/usage.md, "MLflow").

Store: ``MLFLOW_TRACKING_URI``, else ``sqlite:///<store_root>/mlflow.db`` with artifacts in
``<store_root>/mlartifacts`` (:mod:`contrastlab.invocation`), created and migrated once under
a file lock (``mlflow.db.lock``). ``CONTRASTLAB_MLFLOW=0`` disables tracking; under
``torchrun`` only rank 0 logs. MLflow files are never DVC outputs.

Failures: tracking never fails a stage (an MLflow error is one warning, then a no-op tracker).
A dying run is marked ``FAILED``: on an exception in the ``with`` block, on SIGTERM / SIGINT /
SIGHUP (chained handlers), at exit, and after SIGKILL by the next run on the same host (a
``RUNNING`` run whose ``contrastlab.pid`` is gone).

Experiments: ``contrastlab-<track>``, all created by the first tracked stage, tagged
``mlflow.experimentKind = custom_model_development`` (the MLflow 3 model-training view).

API: ``variant_run(track, variant, params, *, stage)`` -> :class:`Tracker`: one run per
(track, variant, DVC experiment or commit, params), found again by the evaluation stage by
tags (``track``, ``variant``, ``run_key``, ``variant_hash``); ``params`` must be the same
object in both stages. Run name ``<variant> · <key>`` (a rerun on the same key: ``... #2``);
inside ``dvc exp run`` nested under one parent run per experiment and track.
``tracker.seed_run(seed)``: nested per-seed child run. ``log_metrics``, ``log_params(p,
prefix=None)``, ``set_tags``, ``log_artifact``, ``log_figure``, ``log_model`` (an MLflow 3
LoggedModel, plain artifact on failure), ``log_dataset``. ``stage_run(track, stage, params)``:
the older one-run-per-stage API. Tags on every run: ``git_commit``, ``dvc_stage``, ``track``,
``params_hash`` and, in ``dvc exp run``, ``dvc_exp_name`` / ``dvc_exp_baseline``. Metric
names: ``@`` becomes ``_at_``; NaN / inf values are skipped.
"""

from __future__ import annotations

from .runs import Store, invocation_run, open_run, run_key, stage_run, variant_run
from .store import (EXPERIMENT_KIND, EXPERIMENT_KIND_TAG, TRACKS, experiment_name,
                    tracking_uri)
from .tracker import Tracker

__all__ = ["EXPERIMENT_KIND", "EXPERIMENT_KIND_TAG", "TRACKS", "Store", "Tracker",
           "experiment_name", "invocation_run", "open_run", "run_key", "stage_run",
           "tracking_uri", "variant_run"]
