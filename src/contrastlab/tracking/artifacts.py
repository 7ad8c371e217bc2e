"""Artifact logging of a :class:`~contrastlab.tracking.tracker.Tracker`: files, figures,
models (MLflow 3 LoggedModel) and dataset inputs."""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import warnings
from pathlib import Path
from typing import Any, Mapping

from ..params import flatten
from .store import MAX_PARAM_LEN

log = logging.getLogger(__name__)


class ArtifactLogging:
    """Mixin of :class:`Tracker`: needs ``self._run_id``, ``self._client`` and ``self._safe``
    (which does nothing when the run is inactive)."""

    def log_artifact(self, path: str | os.PathLike, artifact_path: str | None = None) -> None:
        """Copy a file or a folder into the run's artifacts (under ``artifact_path``)."""
        p = Path(path)
        if p.is_dir():
            self._safe("log_artifacts", lambda: self._client.log_artifacts(
                self._run_id, str(p), artifact_path or p.name))
        else:
            self._safe("log_artifact", lambda: self._client.log_artifact(
                self._run_id, str(p), artifact_path))

    def log_figure(self, figure: Any, name: str) -> None:
        """A matplotlib figure (or an image file's path) as artifact ``figures/<name>``."""
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
            flat = {k: str(v)[:MAX_PARAM_LEN] for k, v in flatten(params or {}).items()}
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
