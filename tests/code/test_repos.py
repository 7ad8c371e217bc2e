"""Repository sources: malicious git URLs/refs refused; a real clone of a local repo at a pinned commit."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from contrastlab.data.repos import (GitError, UnsafeGitSource, fetch_dist, fetch_git,
                                    fetch_sources, safe_repo_name, validate_git_commit,
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
    "ssh://-oProxyCommand=touch%20pwned/a/b",      # ssh host read as an option
    "ssh://git@-oProxyCommand=touch%20pwned/a/b",
    "ssh://-user@host/a/b",
    "git@-oProxyCommand=x:a/b",
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


def test_commit_must_be_a_full_hash_unless_a_ref_is_allowed():
    full = "0123456789abcdef0123456789abcdef01234567"
    assert validate_git_commit(full) == full
    for c in ["0123abcd", "v1.0", "main", full.upper(), full + "0"]:
        with pytest.raises(UnsafeGitSource, match="full 40-hex"):
            validate_git_commit(c)
    assert validate_git_commit("v1.0", allow_ref=True) == "v1.0"
    with pytest.raises(UnsafeGitSource):
        validate_git_commit("--output=x", allow_ref=True)


def test_derived_names_cannot_leave_the_output_folder(tmp_path):
    assert safe_repo_name("a/b") == "a_b" and safe_repo_name("../evil") == "evil"
    for bad in ["..", ".", "", "/", "--"]:
        with pytest.raises(ValueError, match="cannot derive"):
            safe_repo_name(bad)
    local = tmp_path / "src" / "proj"
    (local / "sub").mkdir(parents=True)
    (local / "a.py").write_text("def g():\n    pass\n")
    out = tmp_path / "work" / "repos"
    out.mkdir(parents=True)
    man = fetch_sources([RepoSource(path=str(local / "sub" / ".."))], out)
    assert [e["name"] for e in man["repositories"]] == ["proj"]
    assert (out / "proj" / "a.py").exists()
    assert sorted(p.name for p in (tmp_path / "work").iterdir()) == ["repos"]  # nothing beside
    # a git URL whose last component is ".." has no usable name: refused before any fetch
    with pytest.raises(ValueError, match="cannot derive"):
        fetch_sources([RepoSource(git="https://example.com/a/..", commit="0" * 40)], out / "x")


def test_every_source_is_checked_before_anything_is_fetched(tmp_path):
    out = tmp_path / "repos"
    out.mkdir()
    srcs = [RepoSource(dist="six"), RepoSource(git="https://example.com/r.git", commit="abc1234")]
    with pytest.raises(UnsafeGitSource, match="sources.1: .*full 40-hex"):
        fetch_sources(srcs, out)
    assert list(out.iterdir()) == []
    assert RepoSource(git="https://example.com/r.git", commit="v1", allow_ref=True).allow_ref


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
    # git's own message reaches the user; the error is one line of bad input (ValueError)
    with pytest.raises(GitError, match="fatal: Needed a single revision") as ei:
        fetch_git(src.as_uri(), "0" * 40, tmp_path / "out2")
    assert isinstance(ei.value, ValueError) and isinstance(ei.value, RuntimeError)
    with pytest.raises(GitError, match="(?i)fatal: .*(does not exist|not a git repository|not appear)"):
        fetch_git((tmp_path / "nowhere").as_uri(), first, tmp_path / "out3")
    # a tag only with allow_ref; the manifest records the full hash it resolved to
    _git(src, "tag", "v1", first)
    with pytest.raises(UnsafeGitSource, match="allow_ref"):
        fetch_git(src.as_uri(), "v1", tmp_path / "out4")
    assert fetch_git(src.as_uri(), "v1", tmp_path / "out4", allow_ref=True)["commit"] == first


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
