"""The documented local DVC remote: ``dvc push`` then ``dvc pull`` round-trip through it.

``.dvc/config`` names the default remote ``local`` = ``../contrastlab-dvc-remote`` (a folder
beside the repository; DVC stores the path relative to ``.dvc/``). The test copies that
config into a throw-away repository, tracks a file, pushes, empties the cache and the
workspace copy, pulls, and finds the file again.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]


def _dvc() -> str:
    exe = Path(sys.executable).with_name("dvc")
    return str(exe) if exe.exists() else "dvc"


def test_default_remote_is_a_folder_beside_the_repository():
    from configobj import ConfigObj  # DVC's own config parser

    cfg = ConfigObj(str(ROOT / ".dvc" / "config"))
    assert cfg["core"]["remote"] == "local"
    url = cfg['remote "local"']["url"]
    assert (ROOT / ".dvc" / url).resolve() == (ROOT.parent / "contrastlab-dvc-remote").resolve()


def test_push_and_pull_through_the_local_remote(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DVC_", "GIT_"))}
    env.update(DVC_NO_ANALYTICS="1", GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.com",
               GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.com")

    def run(*args):
        p = subprocess.run(list(args), cwd=repo, env=env, capture_output=True, text=True,
                           timeout=300)
        assert p.returncode == 0, f"{args}: {p.stdout}\n{p.stderr}"
        return p.stdout

    run("git", "init", "-q")
    run(_dvc(), "init", "-q")
    cfg = (ROOT / ".dvc" / "config").read_text()
    cfg = "\n".join(line for line in cfg.splitlines() if "html_template" not in line)
    (repo / ".dvc" / "config").write_text(cfg + "\n")
    (repo / "model.bin").write_bytes(bytes(range(256)) * 16)
    run(_dvc(), "add", "-q", "model.bin")
    run(_dvc(), "push")
    remote = tmp_path / "contrastlab-dvc-remote"
    assert remote.is_dir() and any(p.is_file() for p in remote.rglob("*"))
    shutil.rmtree(repo / ".dvc" / "cache")
    (repo / "model.bin").unlink()
    run(_dvc(), "pull")
    assert (repo / "model.bin").read_bytes() == bytes(range(256)) * 16
