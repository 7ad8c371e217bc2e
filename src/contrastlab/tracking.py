"""MLflow conventions, in one place.

Store
    ``MLFLOW_TRACKING_URI`` when set, else ``sqlite:///<repo>/mlflow.db`` (artifacts under
    ``<repo>/mlartifacts``; ``<repo>`` is ``DVC_ROOT`` when DVC runs the stage, so queued
    experiments running in a temporary copy log to the real repository). MLflow files are
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
        ``<key>`` = ``DVC_EXP_NAME`` or the short commit (``ntxent · tangy-rail``,
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
``dvc exp run``, ``dvc_exp_name`` / ``dvc_exp_baseline`` (DVC's ``DVC_EXP_NAME`` and
``DVC_EXP_BASELINE_REV``), so the UI's search box can select one experiment's runs.
Metric names: ``@`` becomes ``_at_`` (MLflow forbids ``@``); NaN / inf values are skipped.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import shutil
import signal
import socket
import tempfile
import threading
import time
import warnings
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

from .params import flatten, params_hash
from .utils import git_commit, repo_root

log = logging.getLogger(__name__)

_MAX_PARAM_LEN = 500
EXPERIMENT_KIND_TAG = "mlflow.experimentKind"
EXPERIMENT_KIND = "custom_model_development"
_PARENT_TAG = "mlflow.parentRunId"


# ------------------------------------------------------------------ store and experiment
def tracking_uri(root: Path | None = None) -> str:
    """The MLflow tracking URI this project uses (see module docstring). A bare
    ``postgresql://`` URI gets the pinned psycopg2 driver (SQLAlchemy 2.1 would pick the
    uninstalled psycopg 3 and tracking would be disabled; ``contrastlab.tuning.rdb_url``)."""
    uri = os.environ.get("MLFLOW_TRACKING_URI")
    if uri:
        from .tuning import rdb_url

        return rdb_url(uri)
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


def _lock_path(uri: str) -> Path:
    """The lock file guarding store creation and run look-ups: ``<db>.lock`` beside a SQLite
    file, else one per URI in the temporary directory."""
    if uri.startswith("sqlite:///"):
        return Path(uri[len("sqlite:///"):] + ".lock")
    import hashlib

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
    if os.environ.get("CONTRASTLAB_MLFLOW", "1").lower() in {"0", "false", "no", "off"}:
        return False
    return int(os.environ.get("RANK", "0")) == 0


# ------------------------------------------------------------------ runs left open
_OPEN: dict[str, Any] = {}  # run_id -> client, for runs this process has not closed yet
_OPEN_LOCK = threading.Lock()
_HANDLED = (signal.SIGTERM, signal.SIGINT, getattr(signal, "SIGHUP", None))
_installed = False


def _fail_open_runs() -> None:
    """Mark every run this process still holds open as FAILED (best effort, never raises)."""
    with _OPEN_LOCK:
        items = list(_OPEN.items())
        _OPEN.clear()
    for run_id, client in items:
        try:
            client.set_terminated(run_id, "FAILED")
        except Exception:  # noqa: BLE001 - dying process: nothing more to do
            pass


def _on_signal(signum, frame) -> None:
    _fail_open_runs()
    prev = _previous.get(signum, signal.SIG_DFL)
    if callable(prev):
        prev(signum, frame)  # e.g. Python's SIGINT handler raises KeyboardInterrupt
    elif prev == signal.SIG_DFL:
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)  # the signal's usual effect (exit status -signum)


_previous: dict[int, Any] = {}


def _install_handlers() -> None:
    """Install the SIGTERM/SIGINT/SIGHUP handlers and the atexit hook once (main thread only)."""
    global _installed
    if _installed:
        return
    _installed = True
    atexit.register(_fail_open_runs)
    if threading.current_thread() is not threading.main_thread():
        return
    for sig in _HANDLED:
        if sig is None:
            continue
        try:
            prev = signal.getsignal(sig)
            if prev == signal.SIG_IGN:
                continue
            _previous[sig] = prev
            signal.signal(sig, _on_signal)
        except (ValueError, OSError):  # not settable here
            pass


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _fail_stale_runs(client, exp_id: str) -> None:
    """Runs of this host left RUNNING by a process that no longer exists (SIGKILL, power
    loss) are marked FAILED."""
    host = socket.gethostname()
    runs = client.search_runs([exp_id], f"attributes.status = 'RUNNING' and "
                                        f"tags.`contrastlab.host` = '{host}'", max_results=200)
    for r in runs:
        pid = r.data.tags.get("contrastlab.pid", "")
        if pid.isdigit() and int(pid) != os.getpid() and not _pid_alive(int(pid)):
            client.set_terminated(r.info.run_id, "FAILED")


# ------------------------------------------------------------------ the tracker
class Tracker:
    """Logging into one MLflow run by id (a no-op when ``run_id`` is None or after an MLflow
    error, which is logged once as a warning)."""

    def __init__(self, run: Any | None = None, *, client: Any = None, run_id: str | None = None,
                 info: dict[str, Any] | None = None):
        if run is not None and run_id is None:
            run_id = run.info.run_id
        self._client = client
        self._run_id = run_id
        self._run = run
        self._info = dict(info or {})  # experiment_id, name, key tags, for seed_run
        if run_id is not None and client is None:
            from mlflow.tracking import MlflowClient

            self._client = MlflowClient()

    # -- state
    @property
    def active(self) -> bool:
        return self._run_id is not None

    @property
    def run_id(self) -> str | None:
        return self._run_id

    def _disable(self, what: str, err: BaseException) -> None:
        log.warning("MLflow tracking disabled for this run (%s failed: %s: %s); the stage "
                    "goes on without tracking", what, type(err).__name__, err)
        self._run_id = None

    def _safe(self, what: str, fn: Callable[[], Any]) -> Any:
        if self._run_id is None:
            return None
        try:
            return fn()
        except Exception as e:  # noqa: BLE001 - tracking must never fail a stage
            self._disable(what, e)
            return None

    # -- logging
    def log_metrics(self, metrics: Mapping[str, float], step: int | None = None) -> None:
        """Log numeric metrics (non-finite and non-numeric values are skipped; ``@`` in a
        name becomes ``_at_``). ``step``: epoch or other integer axis (default 0)."""
        if self._run_id is None:
            return
        import math

        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        clean = []
        for k, v in metrics.items():
            try:
                fv = float(v)
            except (TypeError, ValueError):
                continue
            if math.isfinite(fv):
                clean.append(Metric(k.replace("@", "_at_"), fv, now, int(step or 0)))
        if clean:
            self._safe("log_metrics", lambda: self._client.log_batch(self._run_id, metrics=clean))

    def log_params(self, params: Mapping[str, Any] | Any, prefix: str | None = None) -> None:
        """Log params flat (nested dicts / pydantic models flattened with dots), under
        ``prefix.`` when given. A value already logged with another value is a warning."""
        if self._run_id is None or params is None:
            return
        from mlflow.entities import Param

        flat = flatten(params, prefix=prefix or "")
        items = [Param(k, str(v)[:_MAX_PARAM_LEN]) for k, v in flat.items()]
        for i in range(0, len(items), 100):  # MLflow's batch limit
            self._safe("log_params",
                       lambda chunk=items[i:i + 100]: self._client.log_batch(self._run_id,
                                                                             params=chunk))

    def set_tags(self, tags: Mapping[str, Any]) -> None:
        if self._run_id is None:
            return
        from mlflow.entities import RunTag

        items = [RunTag(k, str(v)) for k, v in tags.items()]
        self._safe("set_tags", lambda: self._client.log_batch(self._run_id, tags=items))

    def log_artifact(self, path: str | os.PathLike, artifact_path: str | None = None) -> None:
        """Copy a file or a folder into the run's artifacts (under ``artifact_path``)."""
        if self._run_id is None:
            return
        p = Path(path)
        if p.is_dir():
            self._safe("log_artifacts", lambda: self._client.log_artifacts(
                self._run_id, str(p), artifact_path or p.name))
        else:
            self._safe("log_artifact", lambda: self._client.log_artifact(
                self._run_id, str(p), artifact_path))

    def log_figure(self, figure: Any, name: str) -> None:
        """A matplotlib figure (or an image file's path) as artifact ``figures/<name>``."""
        if self._run_id is None:
            return
        if isinstance(figure, (str, os.PathLike)):
            self.log_artifact(figure, "figures")
        else:
            self._safe("log_figure", lambda: self._client.log_figure(
                self._run_id, figure, f"figures/{name}"))

    def log_model(self, path: str | os.PathLike, name: str = "model",
                  params: Mapping[str, Any] | None = None) -> str | None:
        """Log a trained model's checkpoint (file or folder) as an MLflow 3 LoggedModel whose
        source is this run (listed on the run page and the experiment's Models tab).

        Returns the model id, or None (tracking off or failed; the checkpoint is then logged
        as a plain artifact under ``model/`` when possible)."""
        if self._run_id is None:
            return None
        p = Path(path)
        if not p.exists():
            raise FileNotFoundError(f"{p}: no checkpoint to log")

        def _logged_model() -> str:
            from mlflow.entities import LoggedModelOutput

            run = self._client.get_run(self._run_id)
            flat = {k: str(v)[:_MAX_PARAM_LEN] for k, v in flatten(params or {}).items()}
            m = self._client.create_logged_model(run.info.experiment_id, name=name,
                                                 source_run_id=self._run_id, params=flat or None)
            with tempfile.TemporaryDirectory() as tmp:
                src = p
                if p.is_file():
                    shutil.copy2(p, Path(tmp) / p.name)
                    src = Path(tmp)
                self._client.log_model_artifacts(m.model_id, str(src))
            self._client.finalize_logged_model(m.model_id, "READY")
            self._client.log_outputs(self._run_id, [LoggedModelOutput(m.model_id, step=0)])
            return m.model_id

        try:
            return _logged_model()
        except Exception as e:  # noqa: BLE001
            log.warning("MLflow LoggedModel failed (%s: %s); logging %s as an artifact",
                        type(e).__name__, e, p)
            self.log_artifact(p, "model")
            return None

    def log_dataset(self, name: str, digest: str, source: str,
                    context: str = "training") -> None:
        """``mlflow.log_input`` of a metadata-only dataset: ``name``, ``digest`` (a content
        hash, e.g. DVC's md5 or a SHA-256 prefix), ``source`` (a path or URL)."""
        if self._run_id is None:
            return

        def _log() -> None:
            from mlflow.data.dataset_source_registry import resolve_dataset_source
            from mlflow.data.http_dataset_source import HTTPDatasetSource
            from mlflow.data.meta_dataset import MetaDataset
            from mlflow.entities import DatasetInput, InputTag
            from mlflow.utils.mlflow_tags import MLFLOW_DATASET_CONTEXT

            try:
                with warnings.catch_warnings():  # "can be interpreted in multiple ways"
                    warnings.simplefilter("ignore")
                    src = resolve_dataset_source(str(source))
            except Exception:  # noqa: BLE001 - unknown scheme: keep the string as a URL
                src = HTTPDatasetSource(url=str(source))
            ds = MetaDataset(src, name=name, digest=str(digest)[:36])
            di = DatasetInput(ds._to_mlflow_entity(),
                              tags=[InputTag(MLFLOW_DATASET_CONTEXT, context)])
            self._client.log_inputs(self._run_id, datasets=[di])

        self._safe("log_dataset", _log)

    # -- nested runs
    @contextlib.contextmanager
    def seed_run(self, seed: int, params: Mapping[str, Any] | None = None) -> Iterator[Tracker]:
        """A nested child run for one seed (found again when a later stage asks for the same
        seed under the same parent). Yields a :class:`Tracker` (no-op when this one is)."""
        if self._run_id is None:
            yield Tracker(None)
            return
        child = self._safe("seed_run", lambda: _child_run(self, seed))
        if child is None:
            yield Tracker(None)
            return
        t = Tracker(client=self._client, run_id=child, info=self._info)
        if params:
            t.log_params(params)
        with _closing(t):
            yield t


def _child_run(parent: Tracker, seed: int) -> str:
    client, info = parent._client, parent._info
    exp_id = info.get("experiment_id") or client.get_run(parent.run_id).info.experiment_id
    found = client.search_runs(
        [exp_id], f"tags.`{_PARENT_TAG}` = '{parent.run_id}' and tags.seed = '{seed}'",
        max_results=1)
    tags = {k: info[k] for k in ("track", "variant", "run_key", "dvc_stage") if k in info}
    tags.update({_PARENT_TAG: parent.run_id, "seed": str(seed), **_process_tags()})
    if found:
        rid = found[0].info.run_id
        client.update_run(rid, status="RUNNING")
        client.log_batch(rid, tags=[_tag(k, v) for k, v in tags.items()])
        return rid
    base = info.get("run_name") or parent.run_id[:8]
    return client.create_run(exp_id, tags=tags, run_name=f"{base} · seed {seed}").info.run_id


def _tag(k: str, v: Any):
    from mlflow.entities import RunTag

    return RunTag(k, str(v))


def _process_tags() -> dict[str, str]:
    return {"contrastlab.host": socket.gethostname(), "contrastlab.pid": str(os.getpid())}


@contextlib.contextmanager
def _closing(t: Tracker, fluent: bool = False) -> Iterator[None]:
    """Register ``t``'s run as open; end it FINISHED, or FAILED on any exception (also the
    fluent API's active run when ``fluent``)."""
    rid = t.run_id
    with _OPEN_LOCK:
        _OPEN[rid] = t._client
    status = "FAILED"
    try:
        yield
        status = "FINISHED"
    finally:
        with _OPEN_LOCK:
            _OPEN.pop(rid, None)
        if fluent:
            _deactivate_fluent(status)
        try:
            t._client.set_terminated(rid, status)
        except Exception as e:  # noqa: BLE001
            log.warning("MLflow: could not end run %s (%s)", rid, e)


# ------------------------------------------------------------------ common tags
def _dvc_tags() -> dict[str, str]:
    tags = {}
    if os.environ.get("DVC_EXP_NAME"):
        tags["dvc_exp_name"] = os.environ["DVC_EXP_NAME"]
    if os.environ.get("DVC_EXP_BASELINE_REV"):
        tags["dvc_exp_baseline"] = os.environ["DVC_EXP_BASELINE_REV"]
    return tags


def run_key(root: Path | None = None) -> tuple[str, str]:
    """``(key, label)`` naming one pipeline invocation: the DVC experiment's name inside
    ``dvc exp run`` (``DVC_EXP_NAME``), else the git commit (``-dirty`` when tracked sources
    changed); ``label`` is what run names show (the name, or the commit's first 8 hex)."""
    exp = os.environ.get("DVC_EXP_NAME")
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
            if os.environ.get("DVC_EXP_NAME"):
                run_tags[_PARENT_TAG] = _parent_run(client, exp_id, os.environ["DVC_EXP_NAME"],
                                                    track)
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


def _activate_fluent(tracker: Tracker) -> bool:
    """Make the run the fluent API's active run (so ``mlflow.log_*`` and nested
    ``mlflow.start_run(nested=True)`` calls inside the block attach to it), when none is."""
    try:
        import mlflow

        if mlflow.active_run() is not None:
            return False
        mlflow.set_tracking_uri(tracker._info["uri"])
        mlflow.start_run(run_id=tracker.run_id)
        return True
    except Exception as e:  # noqa: BLE001
        log.debug("fluent MLflow run not activated: %s", e)
        return False


def _deactivate_fluent(status: str) -> None:
    """End the fluent active run (``_closing`` then sets the same status by id)."""
    try:
        import mlflow

        mlflow.end_run(status=status)
    except Exception as e:  # noqa: BLE001
        log.debug("fluent MLflow run not ended: %s", e)


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
