"""Run-dependent values (wall seconds, reused shards) kept out of everything DVC hashes.

A stage's metrics JSON and its outputs must be equal bytes when it reruns on the same
inputs, or a rerun marks the tree dirty and invalidates downstream stages. Wall times and
similar values go instead to ``reports/timings/<track>/<name>.json`` (listed in no
``dvc.yaml`` stage, ignored by git) and to MLflow; the report's stage-time table reads them.

Example::

    from contrastlab.timings import write_timing
    write_timing("graph", "ntxent", {"time_s": 12.3, "time_s_per_seed": [6.1, 6.2]})
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

from .io import write_json

__all__ = ["TIMINGS_DIR", "timings_dir", "write_timing"]

#: Default folder, relative to the repository root (or ``$CONTRASTLAB_TIMINGS``).
TIMINGS_DIR = "reports/timings"


def timings_dir(root: str | Path | None = None) -> Path:
    """``$CONTRASTLAB_TIMINGS`` if set, else ``<root>/reports/timings`` (root: the cwd)."""
    env = os.environ.get("CONTRASTLAB_TIMINGS")
    if env:
        return Path(env)
    return Path(root or ".") / TIMINGS_DIR


def write_timing(track: str, name: str, values: dict[str, Any],
                 root: str | Path | None = None) -> Path:
    """Write ``values`` (numbers or lists of numbers; e.g. ``time_s`` in wall seconds) to
    ``<timings_dir>/<track>/<name>.json`` atomically and return the path.

    Raises:
        ValueError: ``track``/``name`` would leave the folder (``/``, ``..``) or a value is
            not a finite number or a list of them.
    """
    for part in (track, name):
        if not part or "/" in part or "\\" in part or part in (".", ".."):
            raise ValueError(f"timing track/name must be a plain file name, got {part!r}")

    def ok(v: Any) -> bool:
        if isinstance(v, (list, tuple)):
            return all(ok(x) for x in v)
        return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)

    bad = [k for k, v in values.items() if not ok(v)]
    if bad:
        raise ValueError(f"timing values must be finite numbers (or lists of them): {bad}")
    path = timings_dir(root) / track / f"{name}.json"
    write_json(path, dict(values))
    return path
