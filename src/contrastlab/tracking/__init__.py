"""MLflow conventions, in one place.

Store
    ``MLFLOW_TRACKING_URI`` when set, else ``sqlite:///<repo>/mlflow.db`` (artifacts under
    ``<repo>/mlartifacts``; ``<repo>`` is the invocation's ``store_root``
    (:mod:`contrastlab.invocation`; the stages set it from DVC), so queued experiments
    running in a temporary copy log to the real repository). MLflow files are
    never DVC outputs. A SQLite store is created and migrated once, under a file lock
    (``mlflow.db.lock``), so stages started at once (``dvc exp run --run-all -j 2`` on a
    fresh clone) do not race on the schema migration. ``CONTRASTLAB_MLFLOW=0`` disables
    tracking; under ``torchrun`` only rank 0 logs. The stages' DVC outputs never depend on
    tracking.

Failures
    Tracking never fails a stage: an MLflow error (unreachable server, locked database, bad
    URI) is logged once as a warning and the tracker becomes a no-op. A run whose process
    dies is marked ``FAILED``: on an exception inside the ``with`` block, on SIGTERM / SIGINT /
    SIGHUP (handlers chained to the previous ones, then the signal's usual effect), at exit,
    and, for a process killed with SIGKILL, by the next run on the same host (a ``RUNNING``
    run whose ``contrastlab.pid`` is gone).

Experiments
    One per track: ``contrastlab-<track>`` (graph, code, multilabel, report; all created by
    the first tracked stage, so none is missing when DVC skips a track's stages), tagged
    ``mlflow.experimentKind = custom_model_development`` so the MLflow 3 UI opens it in the
    model-training view (runs table, Compare), not the GenAI pages.

API (what a stage uses)
    ``variant_run(track, variant, params, *, stage)`` -> :class:`Tracker`
        ONE run per (track, variant, DVC experiment or git commit, params): the training stage
        opens it and the evaluation stage finds it again (tag search on ``track``,
        ``variant``, ``run_key``, ``variant_hash``), so the variant's params (loss,
        temperature, tuned choices) sit next to its evaluation metrics in the Compare view.
        ``params`` must be the same object in both stages (the variant's own params, e.g.
        ``graph.variants.<v>`` plus tuned values); stage-specific settings go through
        ``tracker.log_params(..., prefix="probe")``. Run name ``<variant> · <key>`` with
        ``<key>`` = the experiment's name or the short commit (``ntxent · tangy-rail``,
        ``ntxent · 1a2b3c4d``); a stage that already logged into the newest matching run
        (a rerun on the same key) gets a new run named ``... #2``. Inside ``dvc exp run``
        the run is nested under one parent run per experiment and track (named after the
        DVC experiment).
    ``tracker.seed_run(seed)`` -> :class:`Tracker`
        nested child run ``<variant> · <key> · seed <s>`` (found again by a later stage) for
        per-seed curves: ``log_metrics({"loss": x}, step=epoch)``.
    ``tracker.log_metrics(d, step=None)``, ``log_params(p, prefix=None)``, ``set_tags(d)``,
    ``log_artifact(path, artifact_path=None)`` (file or folder), ``log_figure(fig_or_png,
    name)``, ``log_model(path, name="model")`` (a checkpoint file or folder as an MLflow 3
    LoggedModel linked to the run; plain artifact when that API fails), ``log_dataset(name,
    digest, source, context="training")`` (``mlflow.log_input`` of a metadata-only dataset).
    ``stage_run(track, stage, params)`` -> :class:`Tracker`
        the older API: one run per stage invocation named after the DVC stage
        (``train_graph@ntxent``); kept for stages not yet switched to ``variant_run``.

Tags on every run: ``git_commit``, ``dvc_stage``, ``track``, ``params_hash`` and, inside
``dvc exp run``, ``dvc_exp_name`` / ``dvc_exp_baseline`` (the invocation's ``experiment`` and
``baseline_rev``, :mod:`contrastlab.invocation`), so the UI's search box can select one
experiment's runs.
Metric names: ``@`` becomes ``_at_`` (MLflow forbids ``@``); NaN / inf values are skipped.
"""

from __future__ import annotations

from .runs import Store, invocation_run, open_run, run_key, stage_run, variant_run
from .store import (EXPERIMENT_KIND, EXPERIMENT_KIND_TAG, TRACKS, experiment_name,
                    tracking_uri)
from .tracker import Tracker

__all__ = ["EXPERIMENT_KIND", "EXPERIMENT_KIND_TAG", "TRACKS", "Store", "Tracker",
           "experiment_name", "invocation_run", "open_run", "run_key", "stage_run",
           "tracking_uri", "variant_run"]
