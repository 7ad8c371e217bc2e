"""Whether the committed report describes the project as it is (tests/ is on pytest's pythonpath).

Several tests run ``dvc`` in the repository itself, in parallel pytest-xdist workers. DVC takes
a repository lock, so two of them at once make one fail with "Unable to acquire lock" -- which
must not read as "the report changed". :func:`run_dvc_in_root` serializes them with a file lock
and retries a lock failure; any other failure is raised with DVC's own message."""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

LOCK_MESSAGE = "Unable to acquire lock"


def _dvc() -> str:
    exe = Path(sys.executable).with_name("dvc")
    return str(exe) if exe.exists() else (shutil.which("dvc") or "dvc")


def run_dvc_in_root(root: Path, args: list[str], *, env: dict | None = None, timeout: int = 300,
                    attempts: int = 5) -> subprocess.CompletedProcess:
    """Run ``dvc *args`` in ``root``, one such call at a time across all test processes (a
    ``fcntl`` lock on a file named by the root's path), retrying while DVC reports its own
    repository lock taken (another DVC process outside the tests). Returns the last attempt."""
    key = hashlib.sha1(str(Path(root).resolve()).encode()).hexdigest()[:12]
    lock_path = Path(tempfile.gettempdir()) / f"contrastlab-dvc-{key}.lock"
    with open(lock_path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            for attempt in range(attempts):
                r = subprocess.run([_dvc(), *args], cwd=root, env=env, capture_output=True,
                                   text=True, timeout=timeout)
                if r.returncode == 0 or LOCK_MESSAGE not in r.stderr:
                    return r
                time.sleep(2.0 * (attempt + 1))
            return r
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def report_stage_changed(root: Path) -> bool:
    """True when DVC says the ``report`` stage's deps or outs changed since it last ran (e.g.
    a variant added by the documented recipe and not run yet).

    (File times cannot tell: a fresh clone checks files out in arbitrary order.)

    Raises:
        RuntimeError: ``dvc status`` itself failed (its stderr is in the message), so the
            answer is unknown rather than "changed".
    """
    r = run_dvc_in_root(root, ["status", "report", "--json"], timeout=120)
    if r.returncode != 0:
        raise RuntimeError(f"`dvc status report` failed ({r.returncode}): {r.stderr.strip()}")
    return r.stdout.strip() not in ("{}", "")


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
