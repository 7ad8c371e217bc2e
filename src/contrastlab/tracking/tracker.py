"""One MLflow run by id: metrics, params, tags, nested seed runs; a no-op after any MLflow
error (logged once as a warning)."""

from __future__ import annotations

import contextlib
import logging
import math
import time
from typing import Any, Callable, Iterator, Mapping

from ..params import flatten
from .artifacts import ArtifactLogging
from .lifecycle import _closing, _process_tags, _tag
from .store import MAX_PARAM_LEN, PARENT_TAG

log = logging.getLogger(__name__)


class Tracker(ArtifactLogging):
    """Logging into one MLflow run by id (a no-op when ``run_id`` is None or after an MLflow
    error, which is logged once as a warning)."""

    def __init__(self, run: Any | None = None, *, client: Any = None, run_id: str | None = None,
                 info: dict[str, Any] | None = None):
        if run is not None and run_id is None:
            run_id = run.info.run_id
        self._client = client
        self._run_id = run_id
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

    def _safe(self, what: str, fn: Callable[[], Any]) -> Any:
        if self._run_id is None:
            return None
        try:
            return fn()
        except Exception as e:  # noqa: BLE001 - tracking must never fail a stage
            log.warning("MLflow tracking disabled for this run (%s failed: %s: %s); the stage "
                        "goes on without tracking", what, type(e).__name__, e)
            self._run_id = None
            return None

    # -- logging
    def log_metrics(self, metrics: Mapping[str, float], step: int | None = None) -> None:
        """Log numeric metrics (non-finite and non-numeric values are skipped; ``@`` in a
        name becomes ``_at_``). ``step``: epoch or other integer axis (default 0)."""
        if self._run_id is None:
            return
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
        items = [Param(k, str(v)[:MAX_PARAM_LEN]) for k, v in flat.items()]
        for i in range(0, len(items), 100):  # MLflow's batch limit
            self._safe("log_params",
                       lambda chunk=items[i:i + 100]: self._client.log_batch(self._run_id,
                                                                             params=chunk))

    def set_tags(self, tags: Mapping[str, Any]) -> None:
        if self._run_id is None:
            return
        items = [_tag(k, v) for k, v in tags.items()]
        self._safe("set_tags", lambda: self._client.log_batch(self._run_id, tags=items))

    # -- nested runs
    @contextlib.contextmanager
    def seed_run(self, seed: int, params: Mapping[str, Any] | None = None) -> Iterator[Tracker]:
        """A nested child run for one seed (found again when a later stage asks for the same
        seed under the same parent). Yields a :class:`Tracker` (no-op when this one is)."""
        child = self._safe("seed_run", lambda: _child_run(self, seed))  # None when inactive
        if child is None:
            yield Tracker(None)
            return
        t = Tracker(client=self._client, run_id=child, info=self._info)
        t.log_params(params)  # nothing when None or empty
        with _closing(t):
            yield t


def _child_run(parent: Tracker, seed: int) -> str:
    client, info = parent._client, parent._info
    exp_id = info.get("experiment_id") or client.get_run(parent.run_id).info.experiment_id
    found = client.search_runs(
        [exp_id], f"tags.`{PARENT_TAG}` = '{parent.run_id}' and tags.seed = '{seed}'",
        max_results=1)
    tags = {k: info[k] for k in ("track", "variant", "run_key", "dvc_stage") if k in info}
    tags.update({PARENT_TAG: parent.run_id, "seed": str(seed), **_process_tags()})
    if found:
        rid = found[0].info.run_id
        client.update_run(rid, status="RUNNING")
        client.log_batch(rid, tags=[_tag(k, v) for k, v in tags.items()])
        return rid
    base = info.get("run_name") or parent.run_id[:8]
    return client.create_run(exp_id, tags=tags, run_name=f"{base} · seed {seed}").info.run_id
