"""Opening runs: one per (track, variant, invocation) (:func:`variant_run`), one per stage
invocation (:func:`stage_run`) or the invocation's own run in a track (:func:`invocation_run`),
named and tagged after the DVC experiment or git commit. All of them open through
:func:`open_run` (store, experiment, signal handlers, error handling, closing)."""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, ContextManager, Iterator, Mapping

from ..invocation import current
from ..params import params_hash
from ..utils import git_commit, repo_root
from .lifecycle import (_activate_fluent, _closing, _fail_stale_runs, _install_handlers,
                        _process_tags, _tag)
from .store import PARENT_TAG, _client, _enabled, _experiment_id, _store_lock, tracking_uri
from .tracker import Tracker

log = logging.getLogger(__name__)


def _dvc_tags() -> dict[str, str]:
    """The experiment's tags (names kept from DVC, whose ``dvc exp run`` names experiments)."""
    inv = current()
    tags = {"dvc_exp_name": inv.experiment, "dvc_exp_baseline": inv.baseline_rev}
    return {k: v for k, v in tags.items() if v}


def run_key(root: Path | None = None) -> tuple[str, str]:
    """``(key, label)`` naming one pipeline invocation: the experiment's name
    (:func:`contrastlab.invocation.current`; ``dvc exp run`` names them), else the git commit
    (``-dirty`` when tracked sources changed); ``label`` is what run names show (the name, or
    the commit's first 8 hex)."""
    exp = current().experiment
    if exp:
        return exp, exp
    commit = git_commit(root)
    label = commit[:8] + ("-dirty" if commit.endswith("-dirty") else "")
    return commit, label


# ------------------------------------------------------------------ opening a run
@dataclass(frozen=True)
class Store:
    """Where :func:`open_run`'s ``create`` makes its run: the repository ``root``, the
    tracking ``uri``, an ``MlflowClient`` on it and the track's ``experiment_id``."""

    root: Path
    uri: str
    client: Any
    experiment_id: str


@contextlib.contextmanager
def open_run(track: str, create: Callable[[Store], Tracker]) -> Iterator[Tracker]:
    """Open one run in ``track``'s experiment with ``create`` and close it.

    Connects to the store (creating the track experiments once), installs the handlers that
    end open runs FAILED on a signal or exit, then calls ``create(store)``, which makes or
    finds the run and returns its :class:`Tracker`. Tracking off (``CONTRASTLAB_MLFLOW=0``,
    a rank other than 0) or an MLflow error while opening (a warning) yields a no-op
    tracker; otherwise the run ends FINISHED, or FAILED when the block raises.
    """
    if not _enabled():
        yield Tracker(None)
        return
    root = repo_root()
    try:
        uri = tracking_uri(root)
        client = _client(uri)
        exp_id = _experiment_id(client, uri, track, root)
        _install_handlers()
        tracker = create(Store(root, uri, client, exp_id))
    except Exception as e:  # noqa: BLE001 - tracking must never fail a stage
        log.warning("MLflow tracking unavailable (%s: %s); the stage goes on without it",
                    type(e).__name__, e)
        tracker = Tracker(None)
    if not tracker.active:
        yield tracker
        return
    with _closing(tracker, fluent=_activate_fluent(tracker)):
        yield tracker


# ------------------------------------------------------------------ variant runs
def _parent_run(client, exp_id: str, exp_name: str, track: str) -> str:
    """The run standing for one ``dvc exp run`` experiment in this track (created once)."""
    found = client.search_runs(
        [exp_id], f"tags.`contrastlab.role` = 'invocation' and tags.dvc_exp_name = '{exp_name}'",
        max_results=1)
    if found:
        return found[0].info.run_id
    tags = {"contrastlab.role": "invocation", "track": track, **_dvc_tags()}
    rid = client.create_run(exp_id, tags=tags, run_name=exp_name).info.run_id
    client.set_terminated(rid, "FINISHED")
    return rid


def variant_run(track: str, variant: str, params: Mapping[str, Any] | Any = None, *, stage: str,
                tags: Mapping[str, Any] | None = None) -> ContextManager[Tracker]:
    """Open (or find again) the one MLflow run of a variant in this pipeline invocation.

    Args:
        track: ``graph`` | ``code`` | ``multilabel`` | ``report``: selects the experiment.
        variant: the variant's key (``ntxent``; multi-label: ``yeast-supcon``).
        params: the variant's own params (mapping or pydantic model; loss, temperature,
            tuned choices), logged flat. Pass the SAME value from every stage of the variant:
            its hash is part of the look-up key.
        stage: the DVC stage name (``train_graph@ntxent``), tagged ``dvc_stage`` and added to
            ``contrastlab.stages``.
        tags: extra tags.

    Yields:
        A :class:`Tracker` on the variant's run (no-op when tracking is off, on ranks other
        than 0, or after any MLflow error, which is a warning). The run ends FINISHED, or
        FAILED when the block raises or the process is signalled.
    """
    return open_run(track, lambda st: _open_variant_run(st, track, variant, params, stage, tags))


def _open_variant_run(st: Store, track, variant, params, stage, tags) -> Tracker:
    root, uri, client, exp_id = st.root, st.uri, st.client, st.experiment_id
    key, label = run_key(root)
    vhash = params_hash(params) if params is not None else "none"
    base_name = f"{variant} · {label}"
    with _store_lock(uri):
        _fail_stale_runs(client, exp_id)
        filt = (f"tags.track = '{track}' and tags.variant = '{variant}' and "
                f"tags.run_key = '{key}' and tags.`contrastlab.role` = 'variant'")
        same_key = client.search_runs([exp_id], filt, order_by=["attributes.start_time DESC"],
                                      max_results=100)
        reuse = next((r for r in same_key if r.data.tags.get("variant_hash") == vhash), None)
        if reuse is None or stage in reuse.data.tags.get("contrastlab.stages", "").split(","):
            run_tags = {"track": track, "variant": variant, "run_key": key,
                        "variant_hash": vhash, "params_hash": vhash,
                        "contrastlab.role": "variant", "git_commit": git_commit(root),
                        **_dvc_tags()}
            if current().experiment:
                run_tags[PARENT_TAG] = _parent_run(client, exp_id, current().experiment, track)
            name = base_name if not same_key else f"{base_name} #{len(same_key) + 1}"
            run = client.create_run(exp_id, tags=run_tags, run_name=name)
            rid, stages = run.info.run_id, []
        else:
            rid, name = reuse.info.run_id, reuse.info.run_name
            stages = [s for s in reuse.data.tags.get("contrastlab.stages", "").split(",") if s]
            client.update_run(rid, status="RUNNING")
        client.log_batch(rid, tags=[_tag(k, v) for k, v in {
            "dvc_stage": stage, "contrastlab.stages": ",".join([*stages, stage]),
            **_process_tags(), **(tags or {})}.items()])
    info = {"uri": uri, "experiment_id": exp_id, "run_name": name, "track": track,
            "variant": variant, "run_key": key, "dvc_stage": stage}
    tracker = Tracker(client=client, run_id=rid, info=info)
    if params is not None:
        tracker.log_params(params)
    return tracker


# ------------------------------------------------------------------ stage runs (older API)
def stage_run(track: str, stage: str, params: Mapping[str, Any] | Any = None,
              tags: Mapping[str, Any] | None = None) -> ContextManager[Tracker]:
    """Open one MLflow run for a stage invocation and close it (FAILED on an exception or a
    signal). Prefer :func:`variant_run` for a variant's stages.

    Args:
        track: ``graph`` | ``code`` | ``multilabel`` | ``report``: selects the experiment.
        stage: the DVC stage name, used as the run name (``train_graph@ntxent``).
        params: mapping or pydantic model, logged flat.
        tags: extra tags.

    Yields:
        A :class:`Tracker` (a no-op one on ranks other than 0, when disabled, or after an
        MLflow error, which is a warning).
    """
    def create(st: Store) -> Tracker:
        all_tags = {"git_commit": git_commit(st.root), "dvc_stage": stage, "track": track,
                    "params_hash": params_hash(params) if params is not None else "none",
                    **_dvc_tags(), **_process_tags(), **(tags or {})}
        run = st.client.create_run(st.experiment_id,
                                   tags={k: str(v) for k, v in all_tags.items()}, run_name=stage)
        tracker = Tracker(client=st.client, run_id=run.info.run_id,
                          info={"uri": st.uri, "experiment_id": st.experiment_id,
                                "run_name": stage, "track": track, "dvc_stage": stage})
        tracker.log_params(params)
        return tracker

    return open_run(track, create)


# ------------------------------------------------------------------ invocation runs
def invocation_run(track: str, *, stage: str) -> ContextManager[Tracker]:
    """The MLflow run standing for this pipeline invocation in ``track``'s experiment (the
    report stage logs the track's answer numbers there).

    Inside ``dvc exp run`` it is the parent of the track's variant runs (one per experiment,
    tag ``contrastlab.role = invocation``); otherwise the invocation run of the same
    ``run_key`` (the git commit), created once, named after it. Tagged ``answer_stage =
    stage``.

    Yields:
        A :class:`Tracker` (a no-op one when tracking is off or after an MLflow error, which
        is a warning); the run ends FINISHED, or FAILED on an exception.
    """
    def create(st: Store) -> Tracker:
        client, exp_id = st.client, st.experiment_id
        key, label = run_key(st.root)
        exp = current().experiment
        with _store_lock(st.uri):
            if exp:
                rid = _parent_run(client, exp_id, exp, track)
            else:
                found = client.search_runs(
                    [exp_id], f"tags.`contrastlab.role` = 'invocation' and tags.run_key = '{key}'",
                    max_results=1)
                rid = found[0].info.run_id if found else client.create_run(
                    exp_id, run_name=label,
                    tags={"contrastlab.role": "invocation", "track": track, "run_key": key,
                          "git_commit": git_commit(st.root)}).info.run_id
            client.update_run(rid, status="RUNNING")
            client.set_tag(rid, "answer_stage", stage)
        return Tracker(client=client, run_id=rid,
                       info={"uri": st.uri, "experiment_id": exp_id, "run_name": label,
                             "track": track, "run_key": key, "dvc_stage": stage})

    return open_run(track, create)
