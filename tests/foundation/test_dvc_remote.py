"""Issue 38: a team member's clone pulls the committed artifacts from a DVC remote instead of
recomputing them (docs/scaleout.md, "Sharing results through a DVC remote").

A tiny DVC project with one stage is built and run in a temporary git repository, pushed to a
local-directory remote (``dvc remote add``, ``dvc push``); a second ``git clone`` runs
``dvc pull`` and then ``dvc status``: the output arrives byte for byte and the stage is up to
date, so ``dvc repro`` there would run nothing. The stage writes a marker file when it runs,
so the test also sees that the clone never ran it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

DVC = shutil.which("dvc") or str(Path(sys.executable).parent / "dvc")
pytestmark = pytest.mark.skipif(not Path(DVC).exists() or shutil.which("git") is None,
                                reason="dvc or git not installed")

STAGE = """import pathlib, sys
pathlib.Path("ran.marker").write_text("ran")
pathlib.Path("out").mkdir(exist_ok=True)
pathlib.Path("out/table.bin").write_bytes(bytes(range(256)) * 64 + sys.argv[1].encode())
"""


def sh(*cmd: str, cwd: Path) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.org",
           "DVC_NO_ANALYTICS": "1"}
    out = subprocess.run(list(cmd), cwd=cwd, capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, (cmd, out.stdout, out.stderr)
    return out.stdout


@pytest.mark.slow
def test_a_clone_pulls_the_outputs_from_a_local_remote(tmp_path):
    a, remote, b = tmp_path / "a", tmp_path / "remote", tmp_path / "b"
    a.mkdir()
    sh("git", "init", "-q", cwd=a)
    sh(DVC, "init", "-q", cwd=a)
    (a / "make.py").write_text(STAGE)
    sh(DVC, "stage", "add", "-q", "-n", "make", "-d", "make.py", "-o", "out",
       f"{sys.executable} make.py v1", cwd=a)
    sh(DVC, "repro", "-q", cwd=a)
    assert (a / "ran.marker").exists()
    (a / ".gitignore").write_text((a / ".gitignore").read_text() + "ran.marker\n")
    sh(DVC, "remote", "add", "-d", "store", str(remote), cwd=a)
    sh("git", "add", "-A", cwd=a)
    sh("git", "commit", "-qm", "stage + remote", cwd=a)
    sh(DVC, "push", "-q", cwd=a)
    assert any(remote.rglob("*")), "nothing pushed"

    sh("git", "clone", "-q", str(a), str(b), cwd=tmp_path)
    assert not (b / "out").exists()
    sh(DVC, "pull", "-q", cwd=b)
    assert (b / "out" / "table.bin").read_bytes() == (a / "out" / "table.bin").read_bytes()
    status = sh(DVC, "status", cwd=b)
    assert "up to date" in status.lower(), status
    sh(DVC, "repro", "-q", cwd=b)  # nothing to run: the pulled output matches dvc.lock
    assert not (b / "ran.marker").exists()
    assert sh("git", "status", "--porcelain", cwd=b).strip() == ""
