"""Opening runs: one per (track, variant, invocation) (:func:`variant_run`) or one per stage
invocation (:func:`stage_run`), named and tagged after the DVC experiment or git commit."""

from __future__ import annotations

import contextlib
import logging
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

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
    inv, tags = current(), {}
    if inv.experiment:
        tags["dvc_exp_name"] = inv.experiment
    if inv.baseline_rev:
        tags["dvc_exp_baseline"] = inv.baseline_rev
    return tags


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


@contextlib.contextmanager
def variant_run(track: str, variant: str, params: Mapping[str, Any] | Any = None, *,
                stage: str, tags: Mapping[str, Any] | None = None) -> Iterator[Tracker]:
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
    if not _enabled():
        yield Tracker(None)
        return
    root = repo_root()
    with _guarded(lambda: _open_variant_run(root, track, variant, params, stage, tags)) as t:
        yield t


@contextlib.contextmanager
def _guarded(open_run: Callable[[], Tracker]) -> Iterator[Tracker]:
    """Open a run with ``open_run`` (an MLflow error becomes a warning and a no-op tracker),
    yield it, and close it FINISHED / FAILED (``_closing``)."""
    try:
        tracker = open_run()
    except Exception as e:  # noqa: BLE001 - tracking must never fail a stage
        log.warning("MLflow tracking unavailable (%s: %s); the stage goes on without it",
                    type(e).__name__, e)
        tracker = Tracker(None)
    if not tracker.active:
        yield tracker
        return
    with _closing(tracker, fluent=_activate_fluent(tracker)):
        yield tracker


def _open_variant_run(root, track, variant, params, stage, tags) -> Tracker:
    uri = tracking_uri(root)
    client = _client(uri)
    exp_id = _experiment_id(client, uri, track, root)
    _install_handlers()
    key, label = run_key(root)
    vhash = params_hash(params) if params is not None else "none"
    base_name = f"{variant} · {label}"
    with _store_lock(uri):
        _fail_stale_runs(client, exp_id)
        filt = (f"tags.track = '{track}' and tags.variant = '{variant}' and "
                f"tags.run_key = '{key}' and tags.`contrastlab.role` = 'variant'")
        same_key = client.search_runs([exp_id], filt, order_by=["attributes.start_time DESC"],
                                      max_results=100)
        match = [r for r in same_key if r.data.tags.get("variant_hash") == vhash]
        reuse = None
        if match and stage not in match[0].data.tags.get("contrastlab.stages", "").split(","):
            reuse = match[0]
        if reuse is None:
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
    info = {"uri": uri, "experiment_id": exp_id, "run_name": name, "track": track, "variant": variant,
            "run_key": key, "dvc_stage": stage}
    tracker = Tracker(client=client, run_id=rid, info=info)
    if params is not None:
        tracker.log_params(params)
    return tracker


# ------------------------------------------------------------------ stage runs (older API)
@contextlib.contextmanager
def stage_run(track: str, stage: str, params: Mapping[str, Any] | Any = None,
              tags: Mapping[str, Any] | None = None) -> Iterator[Tracker]:
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
    if not _enabled():
        yield Tracker(None)
        return
    root = repo_root()

    def open_run() -> Tracker:
        uri = tracking_uri(root)
        client = _client(uri)
        exp_id = _experiment_id(client, uri, track, root)
        _install_handlers()
        all_tags = {"git_commit": git_commit(root), "dvc_stage": stage, "track": track,
                    "params_hash": params_hash(params) if params is not None else "none",
                    **_dvc_tags(), **_process_tags(), **(tags or {})}
        run = client.create_run(exp_id, tags={k: str(v) for k, v in all_tags.items()},
                                run_name=stage)
        tracker = Tracker(client=client, run_id=run.info.run_id,
                          info={"uri": uri, "experiment_id": exp_id, "run_name": stage, "track": track,
                                "dvc_stage": stage})
        tracker.log_params(params)
        return tracker

    with _guarded(open_run) as t:
        yield t
