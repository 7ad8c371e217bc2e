"""Repository sources: malicious git URLs/refs refused; a real clone of a local repo at a pinned commit."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from contrastlab.data.repos import (UnsafeGitSource, fetch_dist, fetch_git, fetch_sources,
                                    validate_git_ref, validate_git_url)
from contrastlab.params import ParamsError, load_params
from contrastlab.params.code import RepoSource

BAD_URLS = [
    "--upload-pack=touch /tmp/pwned",
    "-c core.sshCommand=evil",
    "ext::sh -c touch% /tmp/pwned",
    "http://example.com/repo.git",
    "/local/path/repo",
    "https://example.com/repo.git --upload-pack=x",
    "fd::17",
]


@pytest.mark.parametrize("url", BAD_URLS)
def test_malicious_git_url_refused(url, tmp_path):
    with pytest.raises(UnsafeGitSource):
        fetch_git(url, "0123abcd", tmp_path / "x")
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("ref", ["--output=/tmp/x", "-b", "HEAD@{1}", "a..b", "main:file", ""])
def test_malicious_git_ref_refused(ref):
    with pytest.raises(UnsafeGitSource):
        validate_git_ref(ref)


def test_good_urls_accepted():
    for u in ["https://github.com/a/b.git", "ssh://git@host/a/b", "git@github.com:a/b.git",
              "file:///tmp/repo"]:
        assert validate_git_url(u) == u


def _git(cwd: Path, *args: str) -> str:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "PATH": "/usr/bin:/bin", "HOME": str(cwd)}
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True,
                          text=True).stdout.strip()


@pytest.mark.skipif(shutil.which("git") is None, reason="git not installed")
def test_clone_local_repo_at_pinned_commit(tmp_path, monkeypatch):
    # a post-checkout hook configured globally must not run during the clone
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    marker = tmp_path / "hook_ran"
    (hooks / "post-checkout").write_text(f"#!/bin/sh\ntouch {marker}\n")
    (hooks / "post-checkout").chmod(0o755)
    gcfg = tmp_path / "gitconfig"
    gcfg.write_text(f"[core]\n\thooksPath = {hooks}\n")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(gcfg))
    src = tmp_path / "src"
    src.mkdir()
    _git(src, "init", "-q")
    (src / "mod.py").write_text("def f():\n    return 1\n")
    (src / "LICENSE").write_text("MIT\n")
    _git(src, "add", ".")
    _git(src, "commit", "-q", "-m", "one")
    first = _git(src, "rev-parse", "HEAD")
    (src / "mod.py").write_text("def f():\n    return 2\n")
    (src / "new.py").write_text("x = 1\n")
    _git(src, "add", ".")
    _git(src, "commit", "-q", "-m", "two")
    dest = tmp_path / "out"
    entry = fetch_git(src.as_uri(), first, dest)
    assert entry["commit"] == first and entry["kind"] == "git"
    assert (dest / "mod.py").read_text() == "def f():\n    return 1\n"
    assert not (dest / "new.py").exists() and not (dest / ".git").exists()
    assert entry["files"] == 1 and entry["license"] == "LICENSE"
    assert not marker.exists(), "a git hook ran during fetch_git"
    with pytest.raises(RuntimeError):
        fetch_git(src.as_uri(), "0" * 40, tmp_path / "out2")


def test_sources_manifest_and_params(tmp_path):
    local = tmp_path / "local"
    local.mkdir()
    (local / "a.py").write_text("def g():\n    pass\n")
    srcs = [RepoSource(dist="six"), RepoSource(path=str(local), name="mine")]
    man = fetch_sources(srcs, tmp_path / "repos")
    by = {e["name"]: e for e in man["repositories"]}
    assert by["six"]["version"] and by["six"]["files"] == 1
    assert by["mine"]["kind"] == "path" and (tmp_path / "repos" / "mine" / "a.py").exists()
    with pytest.raises(FileNotFoundError, match="not installed"):
        fetch_dist("no-such-distribution-xyz", tmp_path / "n")
    bad = tmp_path / "p.yaml"
    bad.write_text("code:\n  repos:\n    sources:\n      - {git: 'https://x/y.git'}\n")
    with pytest.raises(ParamsError, match="code.repos.sources.0"):
        load_params(bad)
