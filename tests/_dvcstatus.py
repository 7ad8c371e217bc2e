"""Whether the committed report describes the project as it is (tests/ is on pytest's pythonpath)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path


def report_stage_changed(root: Path) -> bool:
    """True when DVC says the ``report`` stage's deps or outs changed since it last ran (e.g.
    a variant added by the documented recipe and not run yet).

    (File times cannot tell: a fresh clone checks files out in arbitrary order.)"""
    dvc = shutil.which("dvc") or str(Path(sys.executable).parent / "dvc")
    r = subprocess.run([dvc, "status", "report", "--json"], cwd=root, capture_output=True,
                       text=True, timeout=120)
    return r.returncode != 0 or r.stdout.strip() not in ("{}", "")


def skip_if_report_changed(root: Path, why: str) -> None:
    """Skip the calling test while the report stage is out of date (a user's variant added by
    the documented recipe and not run yet); under ``CI`` (set by the CI runner, which tests
    the committed tree) fail instead: there the committed report must describe the committed
    metrics, so a change under ``reports/metrics`` without ``dvc repro report`` is caught."""
    import pytest

    if report_stage_changed(root):
        msg = f"the report is out of date (`dvc status report` lists changes): {why}"
        if os.environ.get("CI"):
            pytest.fail(msg)
        pytest.skip(msg)
